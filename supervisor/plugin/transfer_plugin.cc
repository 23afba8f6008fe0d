#include "supervisor/plugin/transfer_plugin.h"

#include <cstring>

namespace airlock::plugin {
namespace {

Error transferError(const airlock_error_v1& err, std::string_view fallback) {
  std::string message(err.message, strnlen(err.message, sizeof err.message));
  if (message.empty()) message = fallback;
  return Error(std::move(message), "", err.code > 0 ? err.code : 0);
}

// A fixed-size char field the plugin filled; never trusted to be NUL-terminated.
template <size_t N>
std::string field(const char (&chars)[N]) {
  return std::string(chars, strnlen(chars, N));
}

}  // namespace

int matchLength(const std::vector<std::string>& prefixes, std::string_view location) {
  // "scheme:" before any '/': a location for a plugin that names that scheme, never a path.
  const size_t colon = location.find(':');
  const bool has_scheme = colon != std::string_view::npos && colon > 0 &&
                          location.substr(0, colon).find('/') == std::string_view::npos;
  int best = -1;
  for (const auto& p : prefixes) {
    if (p.empty()) {
      if (!has_scheme && best < 0) best = 0;
      continue;
    }
    if (location.starts_with(p) && static_cast<int>(p.size()) > best)
      best = static_cast<int>(p.size());
  }
  return best;
}

TransferPlugin::TransferPlugin(std::unique_ptr<Instance> instance)
    : instance_(std::move(instance)), prefixes_(copyStringArray(ops().prefixes)) {}

const airlock_transfer_ops_v1& TransferPlugin::ops() const {
  return *static_cast<const airlock_transfer_ops_v1*>(instance_->plugin().descriptor().ops);
}

Result<std::unique_ptr<OpenTransfer>> TransferPlugin::open(const TransferRequest& r) const {
  airlock_transfer_request_v1 req{};
  req.struct_size = sizeof req;
  req.direction = r.in ? AIRLOCK_TRANSFER_IN : AIRLOCK_TRANSFER_OUT;
  req.location = r.location.c_str();
  req.rules_json = r.rules_json.c_str();
  req.max_bytes = r.max_bytes;
  req.tenant = r.tenant.c_str();
  req.sandbox_id = r.sandbox_id.c_str();
  airlock_transfer_v1 out{};
  out.struct_size = sizeof out;
  out.fd = -1;
  airlock_error_v1 err{};
  if (int rc = ops().open(instance_->get(), &req, &out, &err); rc != 0) {
    if (err.code == 0) err.code = rc;
    return Unexpected(transferError(err, "open failed"));
  }
  std::unique_ptr<OpenTransfer> t(new OpenTransfer(shared_from_this(), out));
  if (!t->fd_) return fail("transfer plugin '" + fullName() + "': open() gave no fd");
  return t;
}

OpenTransfer::OpenTransfer(std::shared_ptr<const TransferPlugin> plugin, airlock_transfer_v1 t)
    : plugin_(std::move(plugin)),
      transfer_(t),
      fd_(t.fd),
      format_(field(t.format)),
      display_(field(t.display)),
      size_(t.size) {}

OpenTransfer::~OpenTransfer() { (void)finish(false); }

Result<> OpenTransfer::finish(bool ok) {
  if (finished_) return {};
  finished_ = true;
  fd_.reset();
  transfer_.fd = -1;
  airlock_error_v1 err{};
  if (int rc = plugin_->ops().close(plugin_->instance_->get(), &transfer_, ok ? 1 : 0, &err);
      rc != 0 && ok) {
    if (err.code == 0) err.code = rc;
    return Unexpected(transferError(err, "the transfer failed as it finished"));
  }
  return {};
}

}  // namespace airlock::plugin
