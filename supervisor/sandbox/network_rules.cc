// A sandbox's kernel-enforced network rules, read and replaced through the API.
#include "supervisor/sandbox/manager.h"

#include "supervisor/sandbox/live_sandbox.h"

namespace airlock::sandbox {

namespace {

// The rules the kernel enforces and, for a sandbox with a routed link, its addresses (null with
// loopback only).
Json networkJson(const audit::NetPolicy& policy, const net::SandboxNetwork* link) {
  Json rules = Json::array();
  for (const auto& r : policy.rules) rules.push_back(r.toString());
  Json out = {{"mode", audit::netModeName(policy.mode)}, {"rules", rules}, {"link", nullptr}};
  if (link != nullptr) {
    const auto& a = link->addresses();
    out["link"] = {{"host_link", link->hostLink()},
                   {"address_v4", a.sandbox_v4},
                   {"gateway_v4", a.host_v4},
                   {"address_v6", a.sandbox_v6.empty() ? Json(nullptr) : Json(a.sandbox_v6)},
                   {"gateway_v6", a.host_v6.empty() ? Json(nullptr) : Json(a.host_v6)}};
  }
  return out;
}

}  // namespace

SResult<Json> Manager::getNetwork(const Caller& caller, const std::string& sb) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto audit = (*s)->box->auditHandle();
  if (audit == nullptr || !audit->enforcesNetwork())
    return serviceError(ErrorCode::kConflict,
                        "sandbox '" + sb +
                            "' has no kernel-enforced network rules (its profile audits nothing "
                            "and has no network.rules, or the eBPF engine is not loaded)");
  return networkJson(audit->network(), (*s)->box->network());
}

SResult<Json> Manager::setNetwork(const Caller& caller, const std::string& sb,
                                  const std::vector<std::string>& rules) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto audit = (*s)->box->auditHandle();
  if (audit == nullptr || !audit->enforcesNetwork())
    return serviceError(ErrorCode::kConflict,
                        "sandbox '" + sb +
                            "' has no kernel-enforced network rules (its profile audits nothing "
                            "and has no network.rules, or the eBPF engine is not loaded)");
  audit::NetPolicy policy = audit->network();  // the mode stays the profile's
  policy.rules.clear();
  for (size_t i = 0; i < rules.size(); ++i) {
    auto rule = audit::NetRule::parse(rules[i]);
    if (!rule)
      return serviceError(ErrorCode::kBadRequest,
                          "rules[" + std::to_string(i) + "]: " + rule.error().message());
    policy.rules.push_back(std::move(*rule));
  }
  auto resolved = audit::resolveHosts(policy, audit::systemResolver());
  if (!resolved)
    return serviceError(ErrorCode::kBadRequest, "rules: " + resolved.error().message());
  policy = std::move(*resolved);
  // compileRules refuses too many rules or overlaps, naming the rule.
  if (auto r = audit->updateNetwork(policy); !r)
    return serviceError(ErrorCode::kBadRequest, "rules: " + r.error().message());
  // A sandbox with its own network stack is held by its link's filter, not the hooks.
  if (auto r = (*s)->box->replaceNetworkRules(policy); !r)
    return serviceError(ErrorCode::kInternal, "rules: " + r.error().message());
  (*s)->last_active_at = nowMs();
  std::vector<std::string> applied;
  for (const auto& rule : policy.rules) applied.push_back(rule.toString());
  (*s)->network_rules = std::move(applied);
  journal(**s);
  return networkJson(audit->network(), (*s)->box->network());
}

}  // namespace airlock::sandbox
