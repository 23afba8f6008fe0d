#include "supervisor/plugin/instances.h"

#include <cstddef>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "airlock/error_from_text.h"
#include "supervisor/log/log.h"

namespace airlock::plugin {
namespace {

// A plugin's failure report; the message names what failed, the code is an errno value.
Error pluginError(const airlock_error_v1& err, std::string_view fallback) {
  size_t len = strnlen(err.message, sizeof err.message);
  std::string message(err.message, len);
  if (message.empty()) message = fallback;
  return errorFromText(std::move(message), err.code > 0 ? err.code : 0);
}

// Plugins' messages below info are shown only when AIRLOCK_LOG_LEVEL=debug: the namespaces
// backend's stage timings, for example.
int initialLogLevel() {
  const char* env = std::getenv("AIRLOCK_LOG_LEVEL");
  return env != nullptr && std::string_view(env) == "debug" ? 0 : 1;
}

std::atomic<int> min_log_level{initialLogLevel()};

void logToStderr(void* ctx, int level, const char* message) {
  if (level < min_log_level.load(std::memory_order_relaxed)) return;
  static constexpr const char* kLevels[] = {"debug", "info", "warning", "error"};
  const char* tag = level >= 0 && level <= 3 ? kLevels[level] : "info";
  auto* name = static_cast<const std::string*>(ctx);
  const char* text = message != nullptr ? message : "";
  // A daemon's log takes the line with its fields; a CLI command keeps the short form its user
  // reads. The plugin's own level (above) applies to both.
  if (log::configured()) {
    const log::Level mapped = level <= 0   ? log::Level::kDebug
                              : level == 1 ? log::Level::kInfo
                              : level == 2 ? log::Level::kWarn
                                           : log::Level::kError;
    log::write(mapped, "plugin.message", {{"plugin", *name}, {"message", text}});
    return;
  }
  std::fprintf(stderr, "[%s] %s: %s\n", name->c_str(), tag, text);
}

}  // namespace

void setPluginLogLevel(int min_level) { min_log_level.store(min_level); }

std::vector<std::string> copyStringArray(const char* const* array) {
  std::vector<std::string> out;
  for (; array != nullptr && *array != nullptr; ++array) out.emplace_back(*array);
  return out;
}

Result<std::unique_ptr<Instance>> Instance::create(const PluginHandle& plugin,
                                                   std::string_view config_json) {
  std::unique_ptr<Instance> self(new Instance(plugin));
  self->host_.struct_size = sizeof(airlock_host_v1);
  self->host_.ctx = const_cast<std::string*>(&self->plugin_.name());
  self->host_.log = &logToStderr;
  std::string config(config_json.empty() ? "{}" : config_json);
  airlock_error_v1 err{};
  self->instance_ = plugin.descriptor().create(&self->host_, config.c_str(), &err);
  if (self->instance_ == nullptr)
    return Unexpected(
        pluginError(err, "create() returned NULL").wrap("plugin '" + plugin.name() + "': create"));
  return self;
}

Instance::~Instance() {
  if (instance_ != nullptr) plugin_.descriptor().destroy(instance_);
}

// --- isolation ---------------------------------------------------------------------------------

IsolationBackend::IsolationBackend(std::unique_ptr<Instance> instance)
    : instance_(std::move(instance)), extra_syscalls_(copyStringArray(ops().extra_syscalls)) {
  // Plugins built against 1.4 or earlier have no flags: every bit clear.
  if (ops().struct_size >=
      offsetof(airlock_isolation_ops_v1, host_memory_base_bytes) + sizeof(uint64_t)) {
    flags_ = ops().flags;
    host_pids_base_ = ops().host_pids_base;
    // 0 means "none of its own": the sandbox's processes are the host's.
    if (ops().host_pids_per_process > 0) host_pids_per_process_ = ops().host_pids_per_process;
    host_memory_base_ = ops().host_memory_base_bytes;
  }
  if (ops().struct_size >= offsetof(airlock_isolation_ops_v1, read_events) + sizeof(void*))
    read_events_ = ops().read_events;
  // A backend that says it reports events but cannot: the host would record nothing.
  if (read_events_ == nullptr) flags_ &= ~AIRLOCK_ISOLATION_OWN_AUDIT;
  if (ops().struct_size >= offsetof(airlock_isolation_ops_v1, adopt) + sizeof(void*))
    adopt_ = ops().adopt;
  // Operators never get a looser sandbox silently (the ABI promises this line).
  if (!extra_syscalls_.empty()) {
    std::string names;
    for (const auto& s : extra_syscalls_) names += (names.empty() ? "" : ", ") + s;
    instance_->log(2, "policy relaxation: this backend adds " + names +
                          " to every sandbox's seccomp allow list");
  }
}

Result<> IsolationBackend::readEvents(
    airlock_sandbox_v1& sandbox, const std::function<void(const airlock_sandbox_event_v1&)>& emit) {
  if (read_events_ == nullptr) return {};
  auto trampoline = [](void* ctx, const airlock_sandbox_event_v1* event) {
    if (event != nullptr && event->struct_size >= sizeof(airlock_sandbox_event_v1))
      (*static_cast<const std::function<void(const airlock_sandbox_event_v1&)>*>(ctx))(*event);
  };
  int rc = read_events_(instance_->get(), &sandbox, trampoline,
                        const_cast<void*>(static_cast<const void*>(&emit)));
  if (rc != 0)
    return Unexpected(Error("isolation plugin '" + fullName() + "': read_events", "", rc));
  return {};
}

const airlock_isolation_ops_v1& IsolationBackend::ops() const {
  return *static_cast<const airlock_isolation_ops_v1*>(instance_->plugin().descriptor().ops);
}

Result<airlock_sandbox_v1> IsolationBackend::start(const airlock_sandbox_spec_v1& spec) {
  airlock_sandbox_v1 out{};
  out.struct_size = sizeof out;
  out.pid = -1;
  out.pidfd = -1;
  out.events_fd = -1;
  airlock_error_v1 err{};
  int rc;
  if ((flags_ & AIRLOCK_ISOLATION_CONCURRENT) != 0) {
    rc = ops().start(instance_->get(), &spec, &out, &err);
  } else {
    std::lock_guard lock(mu_);
    rc = ops().start(instance_->get(), &spec, &out, &err);
  }
  if (rc != 0) {
    if (err.code == 0) err.code = rc;
    return Unexpected(
        pluginError(err, "start failed").wrap("isolation plugin '" + fullName() + "': start"));
  }
  if (out.pid <= 0) {
    release(out);
    return fail("isolation plugin '" + fullName() + "': start succeeded without a pid");
  }
  return out;
}

Result<UniqueFd> IsolationBackend::adopt(const airlock_adopt_spec_v1& spec,
                                         airlock_sandbox_v1& out) {
  if (adopt_ == nullptr) return fail("isolation plugin '" + fullName() + "' has no adopt()");
  airlock_error_v1 err{};
  int channel = -1;
  int rc;
  if ((flags_ & AIRLOCK_ISOLATION_CONCURRENT) != 0) {
    rc = adopt_(instance_->get(), &spec, &out, &channel, &err);
  } else {
    std::lock_guard lock(mu_);
    rc = adopt_(instance_->get(), &spec, &out, &channel, &err);
  }
  if (rc != 0) {
    if (err.code == 0) err.code = rc;
    return Unexpected(
        pluginError(err, "adopt failed").wrap("isolation plugin '" + fullName() + "': adopt"));
  }
  if (channel < 0) {
    release(out);
    return fail("isolation plugin '" + fullName() + "': adopt succeeded without a channel");
  }
  return UniqueFd(channel);
}

void IsolationBackend::release(airlock_sandbox_v1& sandbox) {
  if ((flags_ & AIRLOCK_ISOLATION_CONCURRENT) != 0)
    return ops().release(instance_->get(), &sandbox);
  std::lock_guard lock(mu_);
  ops().release(instance_->get(), &sandbox);
}

// --- language ----------------------------------------------------------------------------------

Language::Language(std::unique_ptr<Instance> instance) : instance_(std::move(instance)) {
  const auto& o = ops();
  aliases = copyStringArray(o.aliases);
  extensions = copyStringArray(o.extensions);
  image_paths = copyStringArray(o.image_paths);
  max_inline_bytes = o.max_inline_bytes;
}

const airlock_language_ops_v1& Language::ops() const {
  return *static_cast<const airlock_language_ops_v1*>(instance_->plugin().descriptor().ops);
}

bool Language::answersTo(std::string_view name) const {
  if (name == fullName() || name == this->name()) return true;
  for (const auto& a : aliases)
    if (a == name) return true;
  return false;
}

bool Language::handlesExtension(std::string_view extension) const {
  for (const auto& e : extensions)
    if (e == extension) return true;
  return false;
}

Result<Language::Command> Language::build(const airlock_code_request_v1& request) const {
  std::string context = "language plugin '" + fullName() + "': build_command";
  airlock_command_v1 out{};
  airlock_error_v1 err{};
  std::lock_guard lock(mu_);
  int rc = ops().build_command(instance_->get(), &request, &out, &err);
  if (rc != 0) {
    if (err.code == 0) err.code = rc;
    return Unexpected(pluginError(err, "failed").wrap(context));
  }
  Command command;
  command.argv = copyStringArray(out.argv);
  command.env = copyStringArray(out.env);
  ops().free_command(instance_->get(), &out);

  if (command.argv.empty()) return fail(context + ": empty argv");
  if (command.argv[0].empty() || command.argv[0][0] != '/')
    return fail(context + ": argv[0] is not an absolute path", command.argv[0]);
  for (const auto& e : command.env)
    if (e.find('=') == std::string::npos || e.front() == '=')
      return fail(context + ": environment entry is not K=V", e);
  return command;
}

namespace {
std::vector<const char*> cArgs(const std::vector<std::string>& args) {
  std::vector<const char*> out;
  for (const auto& a : args) out.push_back(a.c_str());
  out.push_back(nullptr);
  return out;
}
}  // namespace

Result<Language::Command> Language::buildInline(std::string_view code,
                                                const std::vector<std::string>& args) const {
  auto c_args = cArgs(args);
  airlock_code_request_v1 request{};
  request.struct_size = sizeof request;
  request.source = AIRLOCK_CODE_INLINE;
  request.code = {code.data(), code.size()};
  request.args = c_args.data();
  return build(request);
}

Result<Language::Command> Language::buildFile(const std::string& path,
                                              const std::vector<std::string>& args) const {
  auto c_args = cArgs(args);
  airlock_code_request_v1 request{};
  request.struct_size = sizeof request;
  request.source = AIRLOCK_CODE_FILE;
  request.path = path.c_str();
  request.args = c_args.data();
  return build(request);
}

Result<Language::Command> Language::buildSession() const {
  const char* const no_args[] = {nullptr};
  airlock_code_request_v1 request{};
  request.struct_size = sizeof request;
  request.source = AIRLOCK_CODE_SESSION;
  request.args = no_args;
  return build(request);
}

Result<Language::Command> Language::buildPrestart(const std::vector<std::string>& modules) const {
  auto c_args = cArgs(modules);
  airlock_code_request_v1 request{};
  request.struct_size = sizeof request;
  request.source = AIRLOCK_CODE_PRESTART;
  request.args = c_args.data();
  return build(request);
}

}  // namespace airlock::plugin
