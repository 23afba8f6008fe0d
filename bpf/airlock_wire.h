/* The wire format between airlock's eBPF programs and the supervisor: map keys and values, ring
 * buffer events, and the numbers both sides agree on. Plain fixed-width types only, so clang
 * -target bpf and g++ lay them out identically; every size and offset that user space decodes is
 * asserted below on both sides. Numbers are explicit and stable: they end up in the audit log.
 *
 * Included by the *.bpf.c programs (after vmlinux.h) and by supervisor/audit (after
 * <linux/types.h>). */
#ifndef AIRLOCK_BPF_WIRE_H
#define AIRLOCK_BPF_WIRE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#ifdef __cplusplus
#define AIRLOCK_WIRE_ASSERT(cond, msg) static_assert(cond, msg)
#define AIRLOCK_WIRE_OFFSETOF(type, field) offsetof(type, field)
#include <cstddef>
#else
#define AIRLOCK_WIRE_ASSERT(cond, msg) _Static_assert(cond, msg)
#define AIRLOCK_WIRE_OFFSETOF(type, field) __builtin_offsetof(type, field)
#endif

/* Sandboxes per supervisor that the programs can tell apart (slot 0 means "none"). */
#define AIRLOCK_MAX_SLOTS 1024
/* Cgroup v2 ids that map to a slot: a sandbox's directory plus any per-execution children. */
#define AIRLOCK_MAX_AUDITED_CGROUPS 8192
/* Processes that can read events from one pinned engine at once (one ring buffer each). */
#define AIRLOCK_MAX_READERS 64
/* How deep below the v2 root a sandbox's cgroup may sit (airlock/<id> is depth 2). */
#define AIRLOCK_MAX_CGROUP_DEPTH 8
#define AIRLOCK_PATH_BYTES 256
#define AIRLOCK_ARGV_BYTES 256
#define AIRLOCK_COMM_BYTES 16
/* Rules that can cover one prefix of one sandbox (nested CIDRs); more is a clear error. */
#define AIRLOCK_RULES_PER_PREFIX 16
/* User rules per sandbox; rule indices are below this, built-in decisions above. */
#define AIRLOCK_MAX_RULES 1024
#define AIRLOCK_LPM_ENTRIES 65536
#define AIRLOCK_SYSCALL_COUNTERS 65536
/* Allowed UDP destinations remembered so a datagram stream is recorded once, not per packet. */
#define AIRLOCK_SEEN_DESTINATIONS 16384

/* Event types (airlock_event_header.type). */
enum airlock_event_type {
  AIRLOCK_EVENT_EXEC = 1,
  AIRLOCK_EVENT_NET = 2,
};

/* Which hook saw a network attempt (airlock_net_event.hook). */
enum airlock_net_hook {
  AIRLOCK_HOOK_CONNECT4 = 1,
  AIRLOCK_HOOK_CONNECT6 = 2,
  AIRLOCK_HOOK_SENDMSG4 = 3,
  AIRLOCK_HOOK_SENDMSG6 = 4,
};

enum airlock_verdict {
  AIRLOCK_VERDICT_DENY = 0,
  AIRLOCK_VERDICT_ALLOW = 1,
};

/* Network modes (low byte of airlock_slot_config.net_word). */
enum airlock_net_mode {
  AIRLOCK_NET_NONE = 0,      /* loopback only */
  AIRLOCK_NET_ALLOWLIST = 1, /* loopback and what a rule allows */
  AIRLOCK_NET_OPEN = 2,      /* everything but the protected ranges, unless a rule says otherwise */
};

/* Rule actions (airlock_rule_entry.action). */
enum airlock_rule_action {
  AIRLOCK_ACTION_DENY = 0,
  AIRLOCK_ACTION_ALLOW = 1,
};

/* airlock_net_event.rule: the index of the user rule that decided (< AIRLOCK_MAX_RULES), or one
 * of these built-in decisions. A protected range reports AIRLOCK_RULE_PROTECTED_BASE + its index
 * in the supervisor's table of protected ranges. */
enum airlock_builtin_rule {
  AIRLOCK_RULE_LOOPBACK = 0x10001,      /* loopback is always reachable */
  AIRLOCK_RULE_MODE_NONE = 0x10002,     /* mode none refuses everything else */
  AIRLOCK_RULE_NOT_ALLOWED = 0x10003,   /* allowlist mode, no rule matched */
  AIRLOCK_RULE_MODE_OPEN = 0x10004,     /* open mode, no rule matched */
  AIRLOCK_RULE_NO_SANDBOX = 0x10005,    /* reserved: engines attached per sandbox refused these */
  AIRLOCK_RULE_PROTECTED_BASE = 0x10100 /* + protected range index */
};

/* Audit switches per sandbox (airlock_slot_config.audit_flags). */
enum airlock_audit_flag {
  AIRLOCK_AUDIT_EXEC = 1u << 0,
  AIRLOCK_AUDIT_NET = 1u << 1,
  AIRLOCK_AUDIT_SYSCALLS = 1u << 2,
  /* The connect/sendmsg programs decide for this sandbox. They run for every cgroup below the
   * sandboxes' shared parent; without this flag they allow and record nothing (backends whose
   * traffic is not the sandbox's own sockets). */
  AIRLOCK_AUDIT_ENFORCE = 1u << 3,
};

/* ---- maps ---- */

/* audited_cgroups: cgroup v2 id -> this. */
struct airlock_cgroup_entry {
  __u32 slot;
  __u32 reserved;
};
AIRLOCK_WIRE_ASSERT(sizeof(struct airlock_cgroup_entry) == 8, "airlock_cgroup_entry size");

/* slot_config[slot]. net_word packs what a connect decision needs into one word the programs read
 * once, so a rule update flips mode and rule generation together: bits 0-7 mode, bit 8 the
 * generation of the rule maps in force. */
struct airlock_slot_config {
  __u32 net_word;
  __u32 audit_flags;
  /* Index in `rings` of the ring buffer of the process that owns the slot: with the engine pinned
   * (docs/audit.md), several airlock processes share the programs and maps, and each reads its own
   * sandboxes' events from its own ring. */
  __u32 reader;
  /* AIRLOCK_SLOT_CLAIMED while a process owns the slot: a claimer that finds it set knows the last
   * owner died without cleaning up, and purges what it left in the shared maps. */
  __u32 state;
};
AIRLOCK_WIRE_ASSERT(sizeof(struct airlock_slot_config) == 16, "airlock_slot_config size");
#define AIRLOCK_SLOT_CLAIMED 1
#define AIRLOCK_NET_WORD(mode, generation) ((__u32)(mode) | ((__u32)((generation)&1) << 8))
#define AIRLOCK_NET_WORD_MODE(word) ((word)&0xff)
#define AIRLOCK_NET_WORD_GENERATION(word) (((word) >> 8) & 1)
/* The slot and rule generation in an LPM key: one sandbox's rules never match another's. */
#define AIRLOCK_RULE_OWNER(slot, generation) (((__u32)(slot) << 1) | ((__u32)(generation)&1))

/* net_counters[slot] (per CPU). Packets and bytes as cgroup_skb sees them (IP header included). */
struct airlock_net_counters {
  __u64 tx_bytes;
  __u64 rx_bytes;
  __u64 tx_packets;
  __u64 rx_packets;
};
AIRLOCK_WIRE_ASSERT(sizeof(struct airlock_net_counters) == 32, "airlock_net_counters size");

/* rules_v4 / rules_v6 keys. prefixlen counts the 32 owner bits too, so a lookup matches only its
 * own sandbox's generation: prefixlen = 32 + CIDR length. */
struct airlock_rule_key_v4 {
  __u32 prefixlen;
  __u32 owner; /* AIRLOCK_RULE_OWNER(slot, generation), big-endian */
  __u8 addr[4];
};
AIRLOCK_WIRE_ASSERT(sizeof(struct airlock_rule_key_v4) == 12, "airlock_rule_key_v4 size");
struct airlock_rule_key_v6 {
  __u32 prefixlen;
  __u32 owner;
  __u8 addr[16];
};
AIRLOCK_WIRE_ASSERT(sizeof(struct airlock_rule_key_v6) == 24, "airlock_rule_key_v6 size");

/* One rule as it applies to a prefix. protocol 0 = any, else IPPROTO_TCP / IPPROTO_UDP. Ports
 * are host byte order, inclusive; 0-65535 = any. */
struct airlock_rule_entry {
  __u16 index;
  __u8 action;
  __u8 protocol;
  __u16 port_lo;
  __u16 port_hi;
};
AIRLOCK_WIRE_ASSERT(sizeof(struct airlock_rule_entry) == 8, "airlock_rule_entry size");

/* The value at a prefix: every rule whose CIDR contains the prefix, in rule order. The longest
 * matching prefix therefore carries every rule that matches the address; the first whose protocol
 * and port match decides. */
struct airlock_rule_set {
  __u32 count;
  __u32 reserved;
  struct airlock_rule_entry rules[AIRLOCK_RULES_PER_PREFIX];
};
AIRLOCK_WIRE_ASSERT(sizeof(struct airlock_rule_set) == 8 + 8 * AIRLOCK_RULES_PER_PREFIX,
                    "airlock_rule_set size");

/* protected_v4 / protected_v6 keys (value: __u32 index into the supervisor's table). */
struct airlock_range_key_v4 {
  __u32 prefixlen;
  __u8 addr[4];
};
AIRLOCK_WIRE_ASSERT(sizeof(struct airlock_range_key_v4) == 8, "airlock_range_key_v4 size");
struct airlock_range_key_v6 {
  __u32 prefixlen;
  __u8 addr[16];
};
AIRLOCK_WIRE_ASSERT(sizeof(struct airlock_range_key_v6) == 20, "airlock_range_key_v6 size");

/* syscall_counts (per CPU): {slot, syscall number} -> calls. */
struct airlock_syscall_key {
  __u32 slot;
  __u32 nr;
};
AIRLOCK_WIRE_ASSERT(sizeof(struct airlock_syscall_key) == 8, "airlock_syscall_key size");

/* seen_destinations: an allowed UDP destination of a sandbox, recorded once. */
struct airlock_destination_key {
  __u32 slot;
  __u16 port; /* host byte order */
  __u8 family;
  __u8 protocol;
  __u8 addr[16];
};
AIRLOCK_WIRE_ASSERT(sizeof(struct airlock_destination_key) == 24, "airlock_destination_key size");

/* ---- ring buffer events ---- */

struct airlock_event_header {
  __u32 type;      /* airlock_event_type */
  __u32 slot;      /* sandbox slot */
  __u64 time_ns;   /* bpf_ktime_get_ns (CLOCK_MONOTONIC) */
  __u64 cgroup_id; /* cgroup v2 id of the task */
  __u32 pid;       /* host tgid */
  __u32 tid;       /* host tid */
  __u32 ns_pid;    /* tgid in the task's own pid namespace, 0 where the hook cannot tell */
  __u32 uid;       /* host uid */
  char comm[AIRLOCK_COMM_BYTES];
};
AIRLOCK_WIRE_ASSERT(sizeof(struct airlock_event_header) == 56, "airlock_event_header size");
AIRLOCK_WIRE_ASSERT(AIRLOCK_WIRE_OFFSETOF(struct airlock_event_header, cgroup_id) == 16,
                    "airlock_event_header.cgroup_id offset");
AIRLOCK_WIRE_ASSERT(AIRLOCK_WIRE_OFFSETOF(struct airlock_event_header, comm) == 40,
                    "airlock_event_header.comm offset");

struct airlock_exec_event {
  struct airlock_event_header header;
  __u32 ppid;     /* host tgid of the parent */
  __u32 argc;     /* arguments in total; argv holds the head */
  __u16 path_len; /* bytes of path used, NUL included */
  __u16 argv_len; /* bytes of argv used: NUL-separated arguments */
  __u32 reserved;
  char path[AIRLOCK_PATH_BYTES]; /* the file that was executed, as passed to execve */
  char argv[AIRLOCK_ARGV_BYTES];
};
AIRLOCK_WIRE_ASSERT(sizeof(struct airlock_exec_event) == 56 + 16 + 512, "airlock_exec_event size");
AIRLOCK_WIRE_ASSERT(AIRLOCK_WIRE_OFFSETOF(struct airlock_exec_event, path) == 72,
                    "airlock_exec_event.path offset");

struct airlock_net_event {
  struct airlock_event_header header;
  __u32 rule;      /* user rule index or airlock_builtin_rule */
  __u16 port;      /* destination port, host byte order */
  __u8 hook;       /* airlock_net_hook */
  __u8 verdict;    /* airlock_verdict */
  __u8 family;     /* AF_INET (2) or AF_INET6 (10): the address family decided on */
  __u8 protocol;   /* IPPROTO_TCP, IPPROTO_UDP, ... */
  __u8 generation; /* rule generation that decided: rule indices refer to that rule list */
  __u8 reserved[5];
  __u8 addr[16]; /* 4 bytes used for AF_INET; a v4-mapped IPv6 address is decided as IPv4 */
};
AIRLOCK_WIRE_ASSERT(sizeof(struct airlock_net_event) == 56 + 16 + 16, "airlock_net_event size");
AIRLOCK_WIRE_ASSERT(AIRLOCK_WIRE_OFFSETOF(struct airlock_net_event, addr) == 72,
                    "airlock_net_event.addr offset");

#endif /* AIRLOCK_BPF_WIRE_H */
