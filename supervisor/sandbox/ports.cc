// Ports (docs/api.md, "Ports"): connections to a server a sandbox runs, made by its agent, and
// the link tokens that authorize them without the tenant's bearer token.
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "airlock/policy/keys.h"
#include "supervisor/encoding/base64.h"
#include "supervisor/log/log.h"
#include "supervisor/sandbox/agent/port_stream.h"
#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sandbox/manager.h"

namespace airlock::sandbox {

namespace {

// How long the agent may take to connect (a loopback connect answers at once; a guest kernel
// under load may need a moment).
constexpr auto kConnectTimeout = std::chrono::seconds(10);

// 192 random bits as unpadded base64url: 32 characters that fit a URL path segment.
SResult<std::string> newLinkToken() {
  unsigned char bytes[24];
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes))
    return serviceError(ErrorCode::kInternal, std::string("getrandom: ") + Error::errnoName(errno));
  std::string token =
      encoding::base64Encode(std::string_view(reinterpret_cast<char*>(bytes), sizeof bytes));
  std::replace(token.begin(), token.end(), '+', '-');
  std::replace(token.begin(), token.end(), '/', '_');
  token.erase(std::remove(token.begin(), token.end(), '='), token.end());
  return token;
}

}  // namespace

SResult<std::shared_ptr<LiveSandbox>> Manager::findWithPorts(const Caller& caller,
                                                             const std::string& sb) {
  auto s = findRunning(caller, sb);
  if (!s) return s;
  if (!(*s)->profile.ports)
    return serviceError(ErrorCode::kForbidden, "sandbox '" + sb + "': its profile '" +
                                                   (*s)->profile_name +
                                                   "' turns ports off ([profiles." +
                                                   (*s)->profile_name + "] ports = false)");
  return s;
}

SResult<std::unique_ptr<PortStream>> Manager::openPort(const Caller& caller, const std::string& sb,
                                                       uint16_t port) {
  auto s = findWithPorts(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto stream = PortStream::open((*s)->conn, port, kConnectTimeout);
  if (!stream) return stream;
  // The sandbox counts as busy while the connection is open, like a running command.
  std::shared_ptr<LiveSandbox> box = *s;
  ++box->busy;
  (*stream)->hold(std::shared_ptr<void>(nullptr, [box](void*) {
    box->last_active_at = nowMs();
    --box->busy;
  }));
  if (audit_log_ != nullptr) {
    // One record per proxied connection; the link token (if one was used) is never written.
    audit::RecordIds ids{(*s)->id, (*s)->tenant, ""};
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const auto ns =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
    if (auto w = audit_log_->write("port", ids, ns, {{"port", port}}); !w)
      log::error("audit.write", {{"error", w.error().message()}});
  }
  return stream;
}

SResult<std::string> Manager::createPortLink(const Caller& caller, const std::string& sb,
                                             uint16_t port) {
  auto s = findWithPorts(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto token = newLinkToken();
  if (!token) return token;
  // A fleet's proxy routes /v1/ports/<token>/ by the node before the first '_' (base64url has
  // '_' too, but a node name never does).
  *token = policy::fleetIdPrefix(options_.node) + *token;
  std::lock_guard lock((*s)->mu);
  (*s)->port_links[policy::sha256Hex(*token)] = port;
  return token;
}

SResult<PortLinkTarget> Manager::resolvePortLink(const std::string& token) {
  const std::string digest = policy::sha256Hex(token);
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : sandboxes_) {
    std::lock_guard box_lock(s->mu);
    auto it = s->port_links.find(digest);
    if (it == s->port_links.end()) continue;
    PortLinkTarget t;
    t.caller.tenant = s->tenant;
    t.sandbox = s->id;
    t.port = it->second;
    return t;
  }
  return serviceError(ErrorCode::kNotFound,
                      "no such port link (a link ends with its sandbox; ask for a new one)");
}

}  // namespace airlock::sandbox
