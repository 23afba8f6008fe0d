/* Maps and helpers every airlock program shares. Each object declares these maps; the supervisor
 * creates them once (with exec_audit.bpf.c) and hands the same descriptors to the other objects
 * before they load (bpf_map__reuse_fd), so there is one ring table, one drop counter and one
 * cgroup table per engine (per host when the engine is pinned). */
#ifndef AIRLOCK_COMMON_BPF_H
#define AIRLOCK_COMMON_BPF_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "airlock_wire.h"

char LICENSE[] SEC("license") = "GPL";

/* cgroup v2 id of a sandbox's directory (or of a child of it) -> its slot. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, AIRLOCK_MAX_AUDITED_CGROUPS);
  __type(key, __u64);
  __type(value, struct airlock_cgroup_entry);
} audited_cgroups SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, AIRLOCK_MAX_SLOTS);
  __type(key, __u32);
  __type(value, struct airlock_slot_config);
} slot_config SEC(".maps");

/* Event ring buffers, one per reading process (airlock_slot_config.reader). Each process creates
 * its own ring, of the size its policy asks for, and stores it here; this inner definition is only
 * the template the kernel checks them against (the size of a ring may differ). */
struct airlock_ring {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1 << 12);
};
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
  __uint(max_entries, AIRLOCK_MAX_READERS);
  __type(key, __u32);
  __array(values, struct airlock_ring);
} rings SEC(".maps");

/* Events lost because the ring buffer was full, per slot. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, AIRLOCK_MAX_SLOTS);
  __type(key, __u32);
  __type(value, __u64);
} drops SEC(".maps");

/* The slot of the sandbox whose cgroup (or an ancestor of it) is audited, else 0. `ancestor_id`
 * is an expression in `level` giving the id of the cgroup at that depth below the v2 root, 0 past
 * the cgroup's own depth. The
 * outermost audited cgroup wins, so a sandbox's per-execution children need no entry of their
 * own. */
#define AIRLOCK_SLOT_OF(ancestor_id)                                                 \
  ({                                                                                 \
    __u32 found_slot = 0;                                                            \
    for (int level = 1; level <= AIRLOCK_MAX_CGROUP_DEPTH; level++) {                \
      __u64 cgid = (ancestor_id);                                                    \
      if (cgid == 0) break;                                                          \
      struct airlock_cgroup_entry* e = bpf_map_lookup_elem(&audited_cgroups, &cgid); \
      if (e) {                                                                       \
        found_slot = e->slot;                                                        \
        break;                                                                       \
      }                                                                              \
    }                                                                                \
    found_slot;                                                                      \
  })

static __always_inline __u32 slot_of_current_task(void) {
  return AIRLOCK_SLOT_OF(bpf_get_current_ancestor_cgroup_id(level));
}

static __always_inline __u32 audit_flags_of(__u32 slot) {
  struct airlock_slot_config* c = bpf_map_lookup_elem(&slot_config, &slot);
  return c ? c->audit_flags : 0;
}

/* The ring buffer of the process that reads `slot`'s events; NULL when it has none (count a drop).
 */
static __always_inline void* ring_of(__u32 slot) {
  struct airlock_slot_config* c = bpf_map_lookup_elem(&slot_config, &slot);
  if (!c) return 0;
  __u32 reader = c->reader;
  return bpf_map_lookup_elem(&rings, &reader);
}

static __always_inline void count_drop(__u32 slot) {
  __u64* d = bpf_map_lookup_elem(&drops, &slot);
  if (d) *d += 1;
}

/* The fields every event carries, for the current task. ns_pid is left to hooks that can read it.
 */
static __always_inline void fill_header(struct airlock_event_header* h, __u32 type, __u32 slot) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  h->type = type;
  h->slot = slot;
  h->time_ns = bpf_ktime_get_ns();
  h->cgroup_id = bpf_get_current_cgroup_id();
  h->pid = pid_tgid >> 32;
  h->tid = (__u32)pid_tgid;
  h->ns_pid = 0;
  h->uid = (__u32)bpf_get_current_uid_gid();
  bpf_get_current_comm(h->comm, sizeof h->comm);
}

#endif /* AIRLOCK_COMMON_BPF_H */
