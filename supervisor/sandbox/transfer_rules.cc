#include "supervisor/sandbox/transfer_rules.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "supervisor/audit/net_rules.h"

namespace airlock::sandbox {
namespace {

using Json = nlohmann::json;

Json httpRules(const policy::TransferHttp& h, const policy::TransferSettings& host) {
  // The ranges the network policy protects, from its one list: a URL must not reach what a
  // sandbox may not (the supervisor fetches from the host's network, which is more trusted).
  Json blocked = Json::array();
  for (const auto& r : audit::protectedRanges())
    blocked.push_back({{"cidr", r.cidr}, {"why", r.why}});
  return {{"allow", h.allow},
          {"redirects", h.redirects},
          {"connect_timeout_ms", uint64_t{h.connect_timeout_s} * 1000},
          {"idle_timeout_ms", uint64_t{h.idle_timeout_s} * 1000},
          {"timeout_ms", uint64_t{h.timeout_s} * 1000},
          {"blocked", std::move(blocked)},
          {"allow_private", h.allow_private},
          {"ca_file", h.ca_file},
          {"spool_dir", host.spool_dir}};
}

Json hostdirRules(const policy::TransferHostdir& d, const policy::TransferSettings& host) {
  const bool all = std::find(d.roots.begin(), d.roots.end(), "*") != d.roots.end();
  Json roots = Json::object();
  for (const auto& [name, path] : host.roots) {
    if (!all && std::find(d.roots.begin(), d.roots.end(), name) == d.roots.end()) continue;
    const bool writable = std::find(host.writable_roots.begin(), host.writable_roots.end(), name) !=
                          host.writable_roots.end();
    roots[name] = {{"path", path}, {"writable", writable}};
  }
  return {{"roots", std::move(roots)}};
}

}  // namespace

Result<TransferPolicy> transferPolicyFor(const policy::Profile& profile,
                                         const policy::TransferSettings& host,
                                         const std::string& short_name,
                                         const std::string& full_name) {
  const auto& allowed = profile.transfer.plugins;
  if (std::find_if(allowed.begin(), allowed.end(), [&](const std::string& p) {
        return p == short_name || p == full_name;
      }) == allowed.end()) {
    std::string list;
    for (const auto& p : allowed) list += (list.empty() ? "" : ", ") + p;
    return fail("transfer plugin '" + short_name + "' is not in profile '" + profile.name +
                "' transfer.plugins (" + (list.empty() ? "none" : list) + ")");
  }
  const auto& t = profile.transfer;
  TransferPolicy out;
  if (full_name == "airlock.transfer.http") {
    out.limits = &t.http.limits;
    out.rules_json = httpRules(t.http, host).dump();
  } else if (full_name == "airlock.transfer.hostdir") {
    out.limits = &t.hostdir.limits;
    out.rules_json = hostdirRules(t.hostdir, host).dump();
  } else {
    out.limits = &t.archive;
  }
  return out;
}

TransferLimits helperLimits(const policy::TransferLimits& limits, uint64_t sandbox_moved_bytes) {
  TransferLimits l;
  const uint64_t per_transfer = limits.max_mb << 20;
  const uint64_t sandbox_cap = limits.sandbox_max_mb << 20;
  const uint64_t left = sandbox_cap > sandbox_moved_bytes ? sandbox_cap - sandbox_moved_bytes : 0;
  l.max_bytes = std::min(per_transfer, left);
  l.max_files = limits.max_files;
  l.max_depth = limits.max_depth;
  l.max_ratio = limits.max_ratio;
  return l;
}

}  // namespace airlock::sandbox
