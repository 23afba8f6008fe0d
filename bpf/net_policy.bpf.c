/* Network policy and traffic accounting for sandboxes. Attached once, to the cgroup v2 directory
 * every sandbox's cgroup sits in (<v2>/airlock): programs attached to a cgroup run for all its
 * descendants, and each run finds its sandbox by the socket's or task's ancestor cgroups. A cgroup
 * there with no sandbox registered is none of this engine's business and is left alone; so is a
 * registered sandbox attached without enforcement (AIRLOCK_AUDIT_ENFORCE unset).
 *
 * cgroup/connect4|6 decide every connect() (TCP, and UDP's "connected" sends); cgroup/sendmsg4|6
 * decide every unconnected UDP datagram with a destination. Returning 0 makes the syscall fail
 * with EPERM, so a refused connection is an immediate error naming nothing the sandbox can guess,
 * and an event naming the rule that refused it. cgroup_skb/egress|ingress count bytes and packets
 * per sandbox: they see every packet of every socket of the cgroup, whatever syscall moved it
 * (write, sendfile, splice), and they work on kernels without kprobes or fentry.
 *
 * Decision order, the same for both families:
 *   1. loopback (127/8, ::1) in the sandbox's own network namespace: allowed;
 *   2. the sandbox's rules: the longest matching prefix carries every rule whose CIDR contains the
 *      address, in rule order; the first whose protocol and port match decides (allow or deny);
 *   3. loopback of the supervisor's own network namespace, and the protected ranges (private,
 *      link-local, metadata, CGNAT, ...): refused;
 *   4. the mode: none and allowlist refuse, open allows.
 * A v4-mapped IPv6 destination (::ffff:a.b.c.d) is decided as the IPv4 address it reaches. */
#include "common.bpf.h"

#include <bpf/bpf_endian.h>

#define AF_INET 2
#define AF_INET6 10

/* The network namespace cookie of the supervisor: loopback there reaches host services. Set by
 * the supervisor before load (SO_NETNS_COOKIE of one of its sockets). */
const volatile __u64 host_netns_cookie = 0;

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, AIRLOCK_LPM_ENTRIES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct airlock_rule_key_v4);
  __type(value, struct airlock_rule_set);
} rules_v4 SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, AIRLOCK_LPM_ENTRIES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct airlock_rule_key_v6);
  __type(value, struct airlock_rule_set);
} rules_v6 SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, 64);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct airlock_range_key_v4);
  __type(value, __u32);
} protected_v4 SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, 64);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct airlock_range_key_v6);
  __type(value, __u32);
} protected_v6 SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, AIRLOCK_MAX_SLOTS);
  __type(key, __u32);
  __type(value, struct airlock_net_counters);
} net_counters SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, AIRLOCK_SEEN_DESTINATIONS);
  __type(key, struct airlock_destination_key);
  __type(value, __u8);
} seen_destinations SEC(".maps");

struct decision {
  __u32 rule;
  __u8 verdict;
};

/* The first rule of `set` that matches protocol and port, if any. The scan runs in bpf_loop():
 * its callback is verified once, where an unrolled loop of AIRLOCK_RULES_PER_PREFIX branching
 * iterations, inlined at each of a program's decisions, made the verifier explore every path and
 * cost most of the engine's load time (which `airlock run` pays on every run). */
struct rule_scan {
  const struct airlock_rule_set* set;
  struct decision* d;
  __u32 count;
  __u16 port;
  __u8 protocol;
  __u8 found;
};

static long scan_one(__u64 i, void* arg) {
  struct rule_scan* s = arg;
  if (i >= s->count || i >= AIRLOCK_RULES_PER_PREFIX) return 1;
  const struct airlock_rule_entry* r = &s->set->rules[i];
  if (r->protocol != 0 && r->protocol != s->protocol) return 0;
  if (s->port < r->port_lo || s->port > r->port_hi) return 0;
  s->d->rule = r->index;
  s->d->verdict = r->action == AIRLOCK_ACTION_ALLOW ? AIRLOCK_VERDICT_ALLOW : AIRLOCK_VERDICT_DENY;
  s->found = 1;
  return 1;
}

static __always_inline int match_rules(const struct airlock_rule_set* set, __u8 protocol,
                                       __u16 port, struct decision* d) {
  struct rule_scan s = {
      .set = set, .d = d, .count = set->count, .port = port, .protocol = protocol, .found = 0};
  bpf_loop(AIRLOCK_RULES_PER_PREFIX, scan_one, &s, 0);
  return s.found;
}

static __always_inline void decide_by_mode(__u32 mode, struct decision* d) {
  if (mode == AIRLOCK_NET_OPEN) {
    d->rule = AIRLOCK_RULE_MODE_OPEN;
    d->verdict = AIRLOCK_VERDICT_ALLOW;
  } else if (mode == AIRLOCK_NET_ALLOWLIST) {
    d->rule = AIRLOCK_RULE_NOT_ALLOWED;
    d->verdict = AIRLOCK_VERDICT_DENY;
  } else {
    d->rule = AIRLOCK_RULE_MODE_NONE;
    d->verdict = AIRLOCK_VERDICT_DENY;
  }
}

static __always_inline void decide_v4(__u32 slot, __u32 net_word, const __u8 addr[4], __u8 protocol,
                                      __u16 port, int host_netns, struct decision* d) {
  int loopback = addr[0] == 127;
  if (loopback && !host_netns) {
    d->rule = AIRLOCK_RULE_LOOPBACK;
    d->verdict = AIRLOCK_VERDICT_ALLOW;
    return;
  }
  struct airlock_rule_key_v4 key = {
      .prefixlen = 32 + 32,
      .owner = bpf_htonl(AIRLOCK_RULE_OWNER(slot, AIRLOCK_NET_WORD_GENERATION(net_word))),
  };
  __builtin_memcpy(key.addr, addr, 4);
  const struct airlock_rule_set* set = bpf_map_lookup_elem(&rules_v4, &key);
  if (set && match_rules(set, protocol, port, d)) return;
  struct airlock_range_key_v4 range = {.prefixlen = 32};
  __builtin_memcpy(range.addr, addr, 4);
  const __u32* index = bpf_map_lookup_elem(&protected_v4, &range);
  if (index) {
    d->rule = AIRLOCK_RULE_PROTECTED_BASE + *index;
    d->verdict = AIRLOCK_VERDICT_DENY;
    return;
  }
  decide_by_mode(AIRLOCK_NET_WORD_MODE(net_word), d);
}

static __always_inline void decide_v6(__u32 slot, __u32 net_word, const __u8 addr[16],
                                      __u8 protocol, __u16 port, int host_netns,
                                      struct decision* d) {
  const __u32* w = (const __u32*)addr;
  int loopback = w[0] == 0 && w[1] == 0 && w[2] == 0 && w[3] == bpf_htonl(1);
  if (loopback && !host_netns) {
    d->rule = AIRLOCK_RULE_LOOPBACK;
    d->verdict = AIRLOCK_VERDICT_ALLOW;
    return;
  }
  struct airlock_rule_key_v6 key = {
      .prefixlen = 32 + 128,
      .owner = bpf_htonl(AIRLOCK_RULE_OWNER(slot, AIRLOCK_NET_WORD_GENERATION(net_word))),
  };
  __builtin_memcpy(key.addr, addr, 16);
  const struct airlock_rule_set* set = bpf_map_lookup_elem(&rules_v6, &key);
  if (set && match_rules(set, protocol, port, d)) return;
  struct airlock_range_key_v6 range = {.prefixlen = 128};
  __builtin_memcpy(range.addr, addr, 16);
  const __u32* index = bpf_map_lookup_elem(&protected_v6, &range);
  if (index) {
    d->rule = AIRLOCK_RULE_PROTECTED_BASE + *index;
    d->verdict = AIRLOCK_VERDICT_DENY;
    return;
  }
  decide_by_mode(AIRLOCK_NET_WORD_MODE(net_word), d);
}

/* Allowed UDP datagrams to a destination the sandbox already used are not recorded again. */
static __always_inline int already_recorded(__u32 slot, __u8 family, __u8 protocol, __u16 port,
                                            const __u8* addr) {
  struct airlock_destination_key key = {
      .slot = slot, .port = port, .family = family, .protocol = protocol};
  __builtin_memcpy(key.addr, addr, 16);
  if (bpf_map_lookup_elem(&seen_destinations, &key)) return 1;
  __u8 one = 1;
  bpf_map_update_elem(&seen_destinations, &key, &one, BPF_ANY);
  return 0;
}

static __always_inline void record(__u32 slot, __u32 net_word, __u8 hook, __u8 family,
                                   __u8 protocol, __u16 port, const __u8 addr[16],
                                   const struct decision* d) {
  if (!(audit_flags_of(slot) & AIRLOCK_AUDIT_NET)) return;
  int datagram = hook == AIRLOCK_HOOK_SENDMSG4 || hook == AIRLOCK_HOOK_SENDMSG6;
  if (datagram && d->verdict == AIRLOCK_VERDICT_ALLOW &&
      already_recorded(slot, family, protocol, port, addr))
    return;
  void* ring = ring_of(slot);
  struct airlock_net_event* e = ring ? bpf_ringbuf_reserve(ring, sizeof *e, 0) : 0;
  if (!e) {
    count_drop(slot);
    return;
  }
  fill_header(&e->header, AIRLOCK_EVENT_NET, slot);
  e->rule = d->rule;
  e->port = port;
  e->hook = hook;
  e->verdict = d->verdict;
  e->family = family;
  e->protocol = protocol;
  e->generation = AIRLOCK_NET_WORD_GENERATION(net_word);
  __builtin_memset(e->reserved, 0, sizeof e->reserved);
  __builtin_memcpy(e->addr, addr, 16);
  bpf_ringbuf_submit(e, 0);
}

/* The sandbox's slot and policy word, or 0 when this socket's task is in no sandbox whose
 * network this engine enforces. */
static __always_inline __u32 current_policy(__u32* net_word) {
  __u32 slot = slot_of_current_task();
  if (slot == 0) return 0;
  struct airlock_slot_config* c = bpf_map_lookup_elem(&slot_config, &slot);
  if (!c || !(c->audit_flags & AIRLOCK_AUDIT_ENFORCE)) return 0;
  *net_word = *(volatile __u32*)&c->net_word;
  return slot;
}

static __always_inline int handle_v4(struct bpf_sock_addr* ctx, __u8 hook) {
  __u32 w[4] = {ctx->user_ip4, 0, 0, 0};
  __u8* addr = (__u8*)w;
  __u16 port = bpf_ntohs((__u16)ctx->user_port);
  __u8 protocol = (__u8)ctx->protocol;
  struct decision d = {.rule = AIRLOCK_RULE_NO_SANDBOX, .verdict = AIRLOCK_VERDICT_DENY};
  __u32 net_word = 0;
  __u32 slot = current_policy(&net_word);
  if (slot == 0) return 1; /* not a sandbox this engine enforces: see the top of this file */
  int host_netns = bpf_get_netns_cookie(ctx) == host_netns_cookie;
  decide_v4(slot, net_word, addr, protocol, port, host_netns, &d);
  record(slot, net_word, hook, AF_INET, protocol, port, addr, &d);
  return d.verdict == AIRLOCK_VERDICT_ALLOW;
}

static __always_inline int handle_v6(struct bpf_sock_addr* ctx, __u8 hook) {
  __u32 w[4]; /* words keep the stack accesses aligned */
  __u8* addr = (__u8*)w;
  w[0] = ctx->user_ip6[0];
  w[1] = ctx->user_ip6[1];
  w[2] = ctx->user_ip6[2];
  w[3] = ctx->user_ip6[3];
  __u16 port = bpf_ntohs((__u16)ctx->user_port);
  __u8 protocol = (__u8)ctx->protocol;
  struct decision d = {.rule = AIRLOCK_RULE_NO_SANDBOX, .verdict = AIRLOCK_VERDICT_DENY};
  __u32 net_word = 0;
  __u32 slot = current_policy(&net_word);
  if (slot == 0) return 1;
  int host_netns = bpf_get_netns_cookie(ctx) == host_netns_cookie;
  __u8 family = AF_INET6;
  if (w[0] == 0 && w[1] == 0 && w[2] == bpf_htonl(0xffff)) {
    /* ::ffff:a.b.c.d reaches a.b.c.d: decide and record it as IPv4 (in place, so that one
     * record() serves both families: each inlined copy costs verifier time at every load). */
    family = AF_INET;
    w[0] = w[3];
    w[1] = w[2] = w[3] = 0;
    decide_v4(slot, net_word, addr, protocol, port, host_netns, &d);
  } else {
    decide_v6(slot, net_word, addr, protocol, port, host_netns, &d);
  }
  record(slot, net_word, hook, family, protocol, port, addr, &d);
  return d.verdict == AIRLOCK_VERDICT_ALLOW;
}

SEC("cgroup/connect4")
int connect4(struct bpf_sock_addr* ctx) { return handle_v4(ctx, AIRLOCK_HOOK_CONNECT4); }

SEC("cgroup/connect6")
int connect6(struct bpf_sock_addr* ctx) { return handle_v6(ctx, AIRLOCK_HOOK_CONNECT6); }

SEC("cgroup/sendmsg4")
int sendmsg4(struct bpf_sock_addr* ctx) { return handle_v4(ctx, AIRLOCK_HOOK_SENDMSG4); }

SEC("cgroup/sendmsg6")
int sendmsg6(struct bpf_sock_addr* ctx) { return handle_v6(ctx, AIRLOCK_HOOK_SENDMSG6); }

/* Bytes and packets per sandbox. The packet's socket names the cgroup (ingress runs in softirq,
 * where the current task is unrelated). Never drops a packet. */
static __always_inline void count_packet(struct __sk_buff* skb, int egress) {
  __u32 slot = AIRLOCK_SLOT_OF(bpf_skb_ancestor_cgroup_id(skb, level));
  if (slot == 0) return;
  struct airlock_net_counters* c = bpf_map_lookup_elem(&net_counters, &slot);
  if (!c) return;
  if (egress) {
    c->tx_bytes += skb->len;
    c->tx_packets += 1;
  } else {
    c->rx_bytes += skb->len;
    c->rx_packets += 1;
  }
}

SEC("cgroup_skb/egress")
int count_egress(struct __sk_buff* skb) {
  count_packet(skb, 1);
  return 1;
}

SEC("cgroup_skb/ingress")
int count_ingress(struct __sk_buff* skb) {
  count_packet(skb, 0);
  return 1;
}
