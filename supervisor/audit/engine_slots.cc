// A sandbox's slot in the audit engine's shared maps: claiming one, purging what a dead process
// left in it, resetting it, and detaching.
#include "supervisor/audit/engine_impl.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>

#include <vector>

#include "supervisor/sys/lock_file.h"

namespace airlock::audit {

namespace {

// Deletes every key of `map_fd` for which doomed(key) holds (collected first: deleting while
// iterating would restart the walk).
template <typename Key, typename Pred>
void deleteKeysWhere(int map_fd, Pred doomed) {
  std::vector<Key> found;
  Key key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(map_fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    if (doomed(key)) found.push_back(key);
  }
  for (const auto& k : found) bpf_map_delete_elem(map_fd, &k);
}
// Every key whose leading u32 is `slot` (seen_destinations, syscall_counts).
template <typename Key>
void deleteSlotKeys(int map_fd, uint32_t slot) {
  deleteKeysWhere<Key>(map_fd, [slot](const Key& k) { return k.slot == slot; });
}
// `slot`'s value back to zero on every CPU.
template <typename Value>
void zeroPerCpu(int map_fd, uint32_t slot, int ncpu) {
  std::vector<Value> zeros(static_cast<size_t>(ncpu));
  bpf_map_update_elem(map_fd, &slot, zeros.data(), BPF_ANY);
}

}  // namespace

Result<> AuditEngine::Impl::writeSlotConfig(uint32_t slot, NetMode mode, uint32_t generation,
                                            uint32_t flags) {
  airlock_slot_config config{AIRLOCK_NET_WORD(static_cast<uint32_t>(mode), generation), flags,
                             reader_index, AIRLOCK_SLOT_CLAIMED};
  if (bpf_map_update_elem(slotConfigFd(), &slot, &config, BPF_ANY) != 0) {
    return sysError("bpf_map_update_elem(slot_config)", std::to_string(slot));
  }
  return {};
}

// Claims a free slot for a sandbox: one no sandbox of this process uses and, with a pinned
// engine, whose lock file no other process holds. Caller holds mu.
Result<std::pair<uint32_t, UniqueFd>> AuditEngine::Impl::claimSlot() {
  for (uint32_t i = 0; i < AIRLOCK_MAX_SLOTS - 1; ++i) {
    uint32_t s = 1 + (next_slot - 1 + i) % (AIRLOCK_MAX_SLOTS - 1);
    if (used_slots[s]) continue;
    UniqueFd lock;
    if (pinned()) {
      AIRLOCK_TRY_CTX(fd, sys::tryLockFileIn(options.lock_dir, lockName("slot", s)), "audit slot");
      if (!fd) continue;  // another airlock process's sandbox
      lock = std::move(fd);
    }
    used_slots[s] = true;
    next_slot = s % (AIRLOCK_MAX_SLOTS - 1) + 1;
    return std::pair{s, std::move(lock)};
  }
  return fail("audit: every one of " + std::to_string(AIRLOCK_MAX_SLOTS - 1) +
              " audit slots is in use");
}

// A slot whose configuration still says claimed was left by a process that died (killed with
// -9) while a sandbox held it: its cgroup entries, rules and per-slot state are still in the
// shared maps. Removes them, so the slot starts clean and no leftover rule matches. True when
// there was something to purge.
bool AuditEngine::Impl::purgeStaleSlot(uint32_t slot) {
  airlock_slot_config config{};
  if (bpf_map_lookup_elem(slotConfigFd(), &slot, &config) != 0) return false;
  if (config.state != AIRLOCK_SLOT_CLAIMED) return false;
  deleteKeysWhere<uint64_t>(cgroupsFd(), [&](uint64_t cgroup_id) {
    airlock_cgroup_entry entry{};
    return bpf_map_lookup_elem(cgroupsFd(), &cgroup_id, &entry) == 0 && entry.slot == slot;
  });
  // Rule keys carry AIRLOCK_RULE_OWNER(slot, generation), big-endian.
  auto owned = [slot](const auto& key) { return (ntohl(key.owner) >> 1) == slot; };
  deleteKeysWhere<airlock_rule_key_v4>(obj.rules_v4.get(), owned);
  deleteKeysWhere<airlock_rule_key_v6>(obj.rules_v6.get(), owned);
  resetSlotState(slot);
  return true;
}

// Per-slot state back to zero: a later sandbox in this slot starts from zero and sees its own
// first UDP destinations. The configuration last: while it says claimed, a crash here is purged
// again by the next claimer.
void AuditEngine::Impl::resetSlotState(uint32_t slot) {
  zeroPerCpu<uint64_t>(dropsFd(), slot, ncpu);
  zeroPerCpu<airlock_net_counters>(obj.net_counters.get(), slot, ncpu);
  deleteSlotKeys<airlock_destination_key>(obj.seen_destinations.get(), slot);
  airlock_slot_config empty{};
  bpf_map_update_elem(slotConfigFd(), &slot, &empty, BPF_ANY);
}

// With a pinned engine a cgroup can still be registered by a process that died (a `serve`
// killed with -9 whose sandbox the next one adopts). True when that slot was purged, so the
// cgroup can be registered again; false when its owner is alive.
Result<bool> AuditEngine::Impl::releaseDeadOwnersCgroup(uint64_t cgroup_id) {
  std::lock_guard reclaim(reclaim_mu);
  airlock_cgroup_entry entry{};
  if (!pinned()) return false;
  // Gone since the caller found it: purged by the claim of its dead owner's slot.
  if (bpf_map_lookup_elem(cgroupsFd(), &cgroup_id, &entry) != 0) return true;
  {
    std::lock_guard lock(mu);
    if (used_slots[entry.slot]) return false;  // ours
  }
  AIRLOCK_TRY_CTX(fd, sys::tryLockFileIn(options.lock_dir, lockName("slot", entry.slot)),
                  "audit slot");
  if (!fd) return false;  // its owner is alive
  purgeStaleSlot(entry.slot);
  return true;
}

// Undoes whatever attach() got done; safe on a partial state.
void AuditEngine::Impl::detach(SandboxAudit::State& s) {
  {
    std::lock_guard lock(mu);
    slots.erase(s.slot);
  }
  // Unregistered first: from then on the programs leave this cgroup alone, so nothing decides
  // with a half-removed state.
  if (s.cgroup_registered) bpf_map_delete_elem(cgroupsFd(), &s.cgroup_id);
  {
    std::lock_guard lock(s.mu);
    removeRules(s.installed);
    s.installed = {};
  }
  if (s.slot == 0) return;
  resetSlotState(s.slot);
  std::lock_guard lock(mu);
  if (s.count_syscalls) {
    if (syscalls) deleteSlotKeys<airlock_syscall_key>(syscallCountsFd(), s.slot);
    releaseSyscallCounter();
  }
  used_slots[s.slot] = false;
  s.slot_lock.reset();  // after the slot is clean: the next claimer finds nothing to purge
}

}  // namespace airlock::audit
