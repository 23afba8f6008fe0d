#include "supervisor/plugin/loader.h"

#include <dlfcn.h>

#include <boost/dll/shared_library.hpp>
#include <exception>

#include "supervisor/plugin/trusted_file.h"

namespace airlock::plugin {

std::string_view kindName(uint32_t kind) {
  switch (kind) {
    case AIRLOCK_PLUGIN_ISOLATION:
      return "isolation";
    case AIRLOCK_PLUGIN_LANGUAGE:
      return "language";
    case AIRLOCK_PLUGIN_TRANSFER:
      return "transfer";
    case AIRLOCK_PLUGIN_REVIEW:
      return "review";
    default:
      return {};
  }
}

namespace {

// Plain ASCII ranges: <cctype> would follow the process locale.
bool lowerOrDigit(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool validComponent(std::string_view c) {
  if (c.empty() || !lowerOrDigit(c[0])) return false;
  for (char ch : c)
    if (!lowerOrDigit(ch) && ch != '_' && ch != '-') return false;
  return true;
}

// Reads one of the C strings a plugin hands over, or names what is wrong with it.
Result<std::string> staticString(const char* s, const char* field) {
  if (s == nullptr) return fail(std::string(field) + " is NULL");
  return std::string(s);
}

Result<> validateOps(const airlock_plugin_v1& d) {
  switch (d.kind) {
    case AIRLOCK_PLUGIN_ISOLATION: {
      if (d.ops == nullptr) return fail("isolation plugin has NULL ops");
      auto* ops = static_cast<const airlock_isolation_ops_v1*>(d.ops);
      if (ops->struct_size < sizeof(airlock_isolation_ops_v1))
        return fail("isolation ops struct_size " + std::to_string(ops->struct_size) +
                    " is smaller than " + std::to_string(sizeof(airlock_isolation_ops_v1)));
      if (ops->start == nullptr || ops->release == nullptr)
        return fail("isolation ops lack start() or release()");
      return {};
    }
    case AIRLOCK_PLUGIN_LANGUAGE: {
      if (d.ops == nullptr) return fail("language plugin has NULL ops");
      auto* ops = static_cast<const airlock_language_ops_v1*>(d.ops);
      if (ops->struct_size < sizeof(airlock_language_ops_v1))
        return fail("language ops struct_size " + std::to_string(ops->struct_size) +
                    " is smaller than " + std::to_string(sizeof(airlock_language_ops_v1)));
      if (ops->build_command == nullptr || ops->free_command == nullptr)
        return fail("language ops lack build_command() or free_command()");
      return {};
    }
    case AIRLOCK_PLUGIN_REVIEW: {
      // NULL ops: a review plugin of ABI 1.1, when the kind was only reserved. It loads, and a
      // review chain naming it fails to build.
      if (d.ops == nullptr) return {};
      auto* ops = static_cast<const airlock_review_ops_v1*>(d.ops);
      if (ops->struct_size < sizeof(airlock_review_ops_v1))
        return fail("review ops struct_size " + std::to_string(ops->struct_size) +
                    " is smaller than " + std::to_string(sizeof(airlock_review_ops_v1)));
      if (ops->review == nullptr) return fail("review ops lack review()");
      return {};
    }
    case AIRLOCK_PLUGIN_TRANSFER: {
      // NULL ops: a transfer plugin built before ABI 1.8 defined them. It loads; a transfer
      // naming it fails.
      if (d.ops == nullptr) return {};
      if (d.abi_minor < 8)
        return fail("transfer plugin of ABI 1." + std::to_string(d.abi_minor) +
                    " has ops, which ABI 1.8 defines first");
      auto* ops = static_cast<const airlock_transfer_ops_v1*>(d.ops);
      if (ops->struct_size < sizeof(airlock_transfer_ops_v1))
        return fail("transfer ops struct_size " + std::to_string(ops->struct_size) +
                    " is smaller than " + std::to_string(sizeof(airlock_transfer_ops_v1)));
      if (ops->prefixes == nullptr || ops->open == nullptr || ops->close == nullptr)
        return fail("transfer ops lack prefixes, open() or close()");
      return {};
    }
    default:
      if (d.ops != nullptr)
        return fail(std::string(kindName(d.kind)) + " plugin has ops, which ABI " +
                    std::to_string(AIRLOCK_PLUGIN_ABI_MAJOR) + "." +
                    std::to_string(AIRLOCK_PLUGIN_ABI_MINOR) + " does not define");
      return {};
  }
}

}  // namespace

Result<> validatePluginName(std::string_view name, uint32_t kind) {
  if (name.empty()) return fail("empty name");
  std::string quoted = "name '" + std::string(name) + "'";
  size_t a = name.find('.');
  size_t b = a == std::string_view::npos ? a : name.find('.', a + 1);
  if (b == std::string_view::npos || name.find('.', b + 1) != std::string_view::npos)
    return fail(quoted + " is not of the form <vendor>." + std::string(kindName(kind)) + ".<name>");
  std::string_view vendor = name.substr(0, a), middle = name.substr(a + 1, b - a - 1),
                   tail = name.substr(b + 1);
  if (!validComponent(vendor) || !validComponent(middle) || !validComponent(tail))
    return fail(quoted + ": each component must be [a-z0-9][a-z0-9_-]*");
  if (middle != kindName(kind))
    return fail(quoted + " says kind '" + std::string(middle) + "' but the plugin's kind is '" +
                std::string(kindName(kind)) + "'");
  return {};
}

PluginHandle::State::~State() {
  library.reset();
  // glibc keeps a library mapped after dlclose when it cannot be unloaded (C++ unique symbols
  // make most plugins so), under the name it was loaded as, and finds a library by that name
  // before it opens anything: with fd N closed and its number reused for another plugin,
  // loading "/proc/self/fd/N" would give the old library. So the fd lives as long as the
  // library does.
  if (!file) return;
  const std::string name = "/proc/self/fd/" + std::to_string(file.get());
  if (void* still = ::dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD); still != nullptr) {
    ::dlclose(still);
    (void)file.release();
  }
}

std::string PluginHandle::version() const {
  return state_->descriptor->version != nullptr ? state_->descriptor->version : "";
}

Result<PluginHandle> loadPlugin(const std::string& path, const LoadOptions& options) {
  auto file = checkTrustedFile(path, options.required_owner);
  if (!file) return Unexpected(std::move(file.error()));
  return loadTrustedPlugin(path, std::move(*file));
}

Result<PluginHandle> loadTrustedPlugin(const std::string& path, TrustedFile file) {
  // Everything below runs code from the file; it passed the ownership checks, so it is trusted
  // not to be malicious, only possibly built against another ABI. dlopen reopens the checked
  // inode through its fd: a path would be looked up again, and could name another file by now.
  auto library = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code ec;
  ::dlerror();  // clear a stale message so the one read below is about this file
  library->load("/proc/self/fd/" + std::to_string(file.fd.get()), ec,
                boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  if (ec || !library->is_loaded()) {
    const char* why = ::dlerror();
    return fail(std::string("dlopen failed: ") + (why != nullptr ? why : ec.message().c_str()));
  }
  if (!library->has(AIRLOCK_PLUGIN_ENTRY_SYMBOL))
    return fail("no entry symbol '" AIRLOCK_PLUGIN_ENTRY_SYMBOL
                "' (not an airlock plugin, or not exported with AIRLOCK_*_PLUGIN)");

  const airlock_plugin_v1* d = nullptr;
  try {
    auto& entry = library->get_alias<const airlock_plugin_v1*()>(AIRLOCK_PLUGIN_ENTRY_SYMBOL);
    d = entry();
  } catch (const std::exception& e) {
    return fail(std::string("entry point failed: ") + e.what());
  }
  if (d == nullptr) return fail("entry point returned NULL");
  if (d->abi_major != AIRLOCK_PLUGIN_ABI_MAJOR)
    return fail("ABI major " + std::to_string(d->abi_major) + ", this airlock speaks " +
                std::to_string(AIRLOCK_PLUGIN_ABI_MAJOR));
  if (d->struct_size < sizeof(airlock_plugin_v1))
    return fail("descriptor struct_size " + std::to_string(d->struct_size) + " is smaller than " +
                std::to_string(sizeof(airlock_plugin_v1)) + " (ABI " +
                std::to_string(AIRLOCK_PLUGIN_ABI_MAJOR) + "." +
                std::to_string(AIRLOCK_PLUGIN_ABI_MINOR) + ")");
  if (kindName(d->kind).empty()) return fail("unknown kind " + std::to_string(d->kind));
  auto name = staticString(d->name, "name");
  if (!name) return Unexpected(std::move(name.error()));
  if (auto ok = validatePluginName(*name, d->kind); !ok) return Unexpected(std::move(ok.error()));
  if (d->create == nullptr || d->destroy == nullptr)
    return fail("plugin '" + *name + "' lacks create() or destroy()");
  if (auto ok = validateOps(*d); !ok) return Unexpected(std::move(ok.error()));

  auto state = std::make_shared<PluginHandle::State>();
  state->file = std::move(file.fd);
  state->library = std::move(library);
  state->descriptor = d;
  state->path = path;
  state->real_path = std::move(file.real_path);
  state->name = *name;
  state->short_name = name->substr(name->rfind('.') + 1);
  return PluginHandle(std::move(state));
}

}  // namespace airlock::plugin
