/* Per-syscall counts of audited sandboxes, off by default.
 *
 * The raw sys_enter tracepoint runs for every syscall of every process on the host, audited or
 * not (≈ +125 ns per call measured on the development machine, docs/audit.md). The supervisor
 * therefore loads and attaches this program only while at least one sandbox's policy asks for
 * syscall counts, and detaches it when the last one goes. Non-audited tasks pay the program
 * entry and one cgroup lookup per depth of their cgroup. */
#include "common.bpf.h"

#include <bpf/bpf_tracing.h>

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_HASH);
  __uint(max_entries, AIRLOCK_SYSCALL_COUNTERS);
  __type(key, struct airlock_syscall_key);
  __type(value, __u64);
} syscall_counts SEC(".maps");

SEC("raw_tp/sys_enter")
int BPF_PROG(count_syscall, struct pt_regs* regs, long id) {
  __u32 slot = slot_of_current_task();
  if (slot == 0 || !(audit_flags_of(slot) & AIRLOCK_AUDIT_SYSCALLS)) return 0;
  struct airlock_syscall_key key = {.slot = slot, .nr = (__u32)id};
  __u64* count = bpf_map_lookup_elem(&syscall_counts, &key);
  if (count) {
    *count += 1;
    return 0;
  }
  __u64 one = 1;
  if (bpf_map_update_elem(&syscall_counts, &key, &one, BPF_NOEXIST) == 0) return 0;
  /* Another CPU created the entry first (each CPU has its own counter in it), or the table is
   * full: a lost count is reported as a drop of this sandbox. */
  count = bpf_map_lookup_elem(&syscall_counts, &key);
  if (count)
    *count += 1;
  else
    count_drop(slot);
  return 0;
}
