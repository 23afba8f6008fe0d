// A sandbox's network rules in the audit engine's LPM tries: installed per generation, swapped
// atomically by updateNetwork, removed on detach.
#include "supervisor/audit/engine_impl.h"

#include <bpf/bpf.h>

#include <cerrno>

namespace airlock::audit {

Result<> AuditEngine::Impl::installRules(const CompiledRules& rules) {
  int v4 = obj.rules_v4.get(), v6 = obj.rules_v6.get();
  for (const auto& [key, value] : rules.v4) {
    if (bpf_map_update_elem(v4, &key, &value, BPF_ANY) != 0) {
      int e = errno;
      removeRules(rules);
      errno = e;
      return sysError("bpf_map_update_elem(rules_v4)");
    }
  }
  for (const auto& [key, value] : rules.v6) {
    if (bpf_map_update_elem(v6, &key, &value, BPF_ANY) != 0) {
      int e = errno;
      removeRules(rules);
      errno = e;
      return sysError("bpf_map_update_elem(rules_v6)");
    }
  }
  return {};
}

void AuditEngine::Impl::removeRules(const CompiledRules& rules) {
  for (const auto& [key, value] : rules.v4) bpf_map_delete_elem(obj.rules_v4.get(), &key);
  for (const auto& [key, value] : rules.v6) bpf_map_delete_elem(obj.rules_v6.get(), &key);
}

Result<> SandboxAudit::updateNetwork(const NetPolicy& policy) {
  auto& m = *engine_->impl_;
  auto ctx = "audit: network update for '" + state_->cgroup_path + "'";
  if (!state_->enforce) return fail(ctx + ": attached without network enforcement");
  uint32_t next;
  {
    std::lock_guard lock(state_->mu);
    next = state_->generation ^ 1u;
  }
  AIRLOCK_TRY_CTX(compiled, compileRules(policy, state_->slot, next), ctx);
  if (auto r = m.installRules(compiled); !r) return Unexpected(std::move(r.error()).wrap(ctx));
  {
    std::lock_guard lock(state_->mu);
    state_->policies[next] = policy;
  }
  // One word flips mode and generation together: connects see the old rules or the new ones.
  if (auto r = m.writeSlotConfig(state_->slot, policy.mode, next, state_->audit_flags); !r) {
    m.removeRules(compiled);
    return Unexpected(std::move(r.error()).wrap(ctx));
  }
  std::lock_guard lock(state_->mu);
  m.removeRules(state_->installed);
  state_->installed = std::move(compiled);
  state_->generation = next;
  return {};
}

bool SandboxAudit::enforcesNetwork() const { return state_->enforce; }

NetPolicy SandboxAudit::network() const {
  std::lock_guard lock(state_->mu);
  return state_->policies[state_->generation];
}

}  // namespace airlock::audit
