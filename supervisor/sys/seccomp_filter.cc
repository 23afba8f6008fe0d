// Compiles the seccomp profile (seccomp_profile.cc + policy additions) to a BPF program.
#include "supervisor/sys/seccomp_filter.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "airlock/unique_fd.h"
#include "supervisor/sys/seccomp_arg_checks.h"

namespace airlock::sys {

namespace {

using F = SeccompArgFilter;

struct CtxDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};
using SeccompCtx = std::unique_ptr<void, CtxDeleter>;

struct Effective {
  int errnum = 0;
  F filter = F::kNone;
};

constexpr uint64_t kCloneNsFlags[] = {CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                      CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET};

// The plain part of the profile (allow, or a fixed errno, no argument checks) as a binary search
// over ranges of syscall numbers with the same outcome, in front of libseccomp's program.
// libseccomp compares every syscall on its own (≈ 550 instructions for the default profile), and
// the kernel checks, converts and JIT-compiles the whole program again for every process that
// installs it: ≈ 0.4 ms per sandboxed program on a 2-CPU VM, ~1/5 of a `true` command. The
// default profile is ~80 such ranges. Syscalls with argument checks, numbers above the table
// (x32's included) and foreign architectures jump past the tree to the prefix checks and the
// exact libseccomp program, which then only holds the argument-checked syscalls.
struct NrRange {
  uint32_t first;   // the range runs up to the next one's first
  uint32_t action;  // SECCOMP_RET_*, when !defer
  bool defer;       // decided by the program after the tree
};

// Where a branch of the tree goes: another node, a shared return, or past the tree.
struct TreeTarget {
  enum Kind : uint8_t { kNode, kReturn, kDefer } kind;
  uint32_t value;  // node index, or the action returned
};

// Emits the subtree of ranges [lo, hi) in pre-order (a node's lower half follows it) and returns
// where a branch to it goes: a single range needs no instruction of its own, its parent jumps
// straight to the shared return (or past the tree).
TreeTarget emitRangeTree(const std::vector<NrRange>& ranges, size_t lo, size_t hi,
                         std::vector<sock_filter>& out,
                         std::vector<std::pair<TreeTarget, TreeTarget>>& branches) {
  if (hi - lo == 1) {
    if (ranges[lo].defer) return {TreeTarget::kDefer, 0};
    return {TreeTarget::kReturn, ranges[lo].action};
  }
  size_t mid = lo + (hi - lo) / 2;
  auto node = static_cast<uint32_t>(out.size());
  // nr >= first of the upper half: true branch to it, false to the lower half.
  out.push_back(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, ranges[mid].first, 0, 0));
  branches.emplace_back();
  TreeTarget lower = emitRangeTree(ranges, lo, mid, out, branches);
  TreeTarget upper = emitRangeTree(ranges, mid, hi, out, branches);
  branches[node] = {upper, lower};
  return {TreeTarget::kNode, node};
}

// `plain`: syscall number -> action; `deferred`: numbers decided after the tree. Numbers in
// neither get `fallback` (the profile's default) up to the highest number of either.
Result<std::vector<sock_filter>> buildRangeTree(uint32_t audit_arch,
                                                const std::map<uint32_t, uint32_t>& plain,
                                                const std::set<uint32_t>& deferred,
                                                uint32_t fallback) {
  uint32_t limit = 0;
  if (!plain.empty()) limit = std::max(limit, plain.rbegin()->first + 1);
  if (!deferred.empty()) limit = std::max(limit, *deferred.rbegin() + 1);
  std::vector<NrRange> ranges;
  for (uint32_t nr = 0; nr < limit; ++nr) {
    NrRange r{nr, fallback, deferred.count(nr) != 0};
    if (auto it = plain.find(nr); it != plain.end()) r.action = it->second;
    bool same = !ranges.empty() && ranges.back().defer == r.defer &&
                (r.defer || ranges.back().action == r.action);
    if (!same) ranges.push_back(r);
  }
  ranges.push_back({limit, 0, true});

  // The tree's nodes, then one return per action, then whatever follows the tree.
  std::vector<sock_filter> tree;
  std::vector<std::pair<TreeTarget, TreeTarget>> branches;  // per node: (nr >= k, nr < k)
  TreeTarget root = emitRangeTree(ranges, 0, ranges.size(), tree, branches);
  std::map<uint32_t, uint32_t> return_at;  // action -> index of its return
  for (const auto& r : ranges) {
    if (!r.defer && !return_at.count(r.action)) {
      return_at[r.action] = static_cast<uint32_t>(tree.size());
      tree.push_back(BPF_STMT(BPF_RET | BPF_K, r.action));
    }
  }
  const auto past = static_cast<uint32_t>(tree.size());
  auto index = [&](const TreeTarget& t) {
    return t.kind == TreeTarget::kNode     ? t.value
           : t.kind == TreeTarget::kReturn ? return_at.at(t.value)
                                           : past;
  };
  for (uint32_t node = 0; node < branches.size(); ++node) {
    for (bool taken : {true, false}) {
      uint32_t offset = index(taken ? branches[node].first : branches[node].second) - node - 1;
      if (offset > 255) return fail("compile seccomp filter: range tree too large for a BPF jump");
      (taken ? tree[node].jt : tree[node].jf) = static_cast<uint8_t>(offset);
    }
  }

  std::vector<sock_filter> out;
  // Another architecture: straight past the tree, to the programs that kill it.
  out.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
  out.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, audit_arch, 1, 0));
  out.push_back(BPF_STMT(BPF_JMP | BPF_JA, 1 + static_cast<uint32_t>(tree.size()) +
                                               (root.kind == TreeTarget::kNode ? 0 : 1)));
  out.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
  if (root.kind != TreeTarget::kNode) {
    // One range only (an empty profile): a single jump to it.
    out.push_back(BPF_STMT(BPF_JMP | BPF_JA, index(root)));
  }
  out.insert(out.end(), tree.begin(), tree.end());
  return out;
}

Result<> addRule(scmp_filter_ctx ctx, uint32_t action, int nr, const char* name,
                 std::vector<scmp_arg_cmp> cmps = {}) {
  int rc = seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(cmps.size()),
                                  cmps.empty() ? nullptr : cmps.data());
  if (rc < 0) return kernelError(rc, "seccomp_rule_add", name);
  return {};
}

Result<> addFiltered(scmp_filter_ctx ctx, int nr, const char* name, F filter,
                     std::vector<ArgValueCheck>& prefix) {
  const uint32_t allow = SCMP_ACT_ALLOW;
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  switch (filter) {
    case F::kNone:
      return addRule(ctx, allow, nr, name);
    case F::kCloneWithoutNamespaces: {
      uint64_t all = 0;
      for (uint64_t f : kCloneNsFlags) all |= f;
      if (auto r = addRule(ctx, allow, nr, name, {SCMP_A0(SCMP_CMP_MASKED_EQ, all, 0)}); !r) {
        return r;
      }
      for (uint64_t f : kCloneNsFlags) {
        if (auto r = addRule(ctx, eperm, nr, name, {SCMP_A0(SCMP_CMP_MASKED_EQ, f, f)}); !r) {
          return r;
        }
      }
      return {};
    }
    case F::kSocketFamilies: {
      const uint32_t noaf = SCMP_ACT_ERRNO(EAFNOSUPPORT);
      if (auto r = addRule(ctx, allow, nr, name, {SCMP_A0(SCMP_CMP_EQ, AF_UNIX)}); !r) return r;
      for (uint64_t fam : {AF_INET, AF_INET6}) {
        for (uint64_t type : {SOCK_STREAM, SOCK_DGRAM}) {
          auto r = addRule(ctx, allow, nr, name,
                           {SCMP_A0(SCMP_CMP_EQ, fam), SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, type)});
          if (!r) return r;
        }
        for (uint64_t type : {SOCK_RAW, SOCK_RDM, SOCK_SEQPACKET, SOCK_DCCP, SOCK_PACKET}) {
          auto r = addRule(ctx, eperm, nr, name,
                           {SCMP_A0(SCMP_CMP_EQ, fam), SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, type)});
          if (!r) return r;
        }
      }
      // Every other family (netlink, packet, vsock, ...): the kernel's own "not supported".
      for (uint64_t fam = 0; fam < AF_INET6; ++fam) {
        if (fam == AF_UNIX || fam == AF_INET) continue;
        if (auto r = addRule(ctx, noaf, nr, name, {SCMP_A0(SCMP_CMP_EQ, fam)}); !r) return r;
      }
      return addRule(ctx, noaf, nr, name, {SCMP_A0(SCMP_CMP_GT, AF_INET6)});
    }
    case F::kMknodNoDevices: {
      // mknod(path, mode, dev), mknodat(dirfd, path, mode, dev).
      bool at = std::string_view(name) == "mknodat";
      auto mode = [&](uint64_t type) {
        return scmp_arg_cmp{at ? 2u : 1u, SCMP_CMP_MASKED_EQ, S_IFMT, type};
      };
      for (uint64_t t : {uint64_t{0}, uint64_t{S_IFREG}, uint64_t{S_IFIFO}, uint64_t{S_IFSOCK}}) {
        if (auto r = addRule(ctx, allow, nr, name, {mode(t)}); !r) return r;
      }
      for (uint64_t t : {S_IFCHR, S_IFBLK, S_IFDIR, S_IFLNK}) {
        if (auto r = addRule(ctx, eperm, nr, name, {mode(t)}); !r) return r;
      }
      return {};
    }
    case F::kIoctlNoTiocsti:
      prefix.push_back({nr, 1, {TIOCSTI, TIOCLINUX}, false});
      return addRule(ctx, allow, nr, name);
    case F::kPersonalitySafe:
      // Query (0xffffffff), PER_LINUX (0), PER_LINUX | UNAME26 and their 0x8 variants, as Docker.
      prefix.push_back({nr, 0, {0x0, 0x8, 0x20000, 0x20008, 0xffffffff}, true});
      return {};
  }
  return fail("unknown seccomp argument filter", name);
}

Result<std::string> exportBpf(scmp_filter_ctx ctx) {
  UniqueFd fd(::memfd_create("airlock-seccomp", MFD_CLOEXEC));
  if (!fd) return sysError("memfd_create", "airlock-seccomp");
  if (int rc = seccomp_export_bpf(ctx, fd.get()); rc < 0) {
    return kernelError(rc, "seccomp_export_bpf");
  }
  off_t size = ::lseek(fd.get(), 0, SEEK_END);
  if (size < 0) return sysError("lseek", "airlock-seccomp");
  std::string out(static_cast<size_t>(size), '\0');
  if (::pread(fd.get(), out.data(), out.size(), 0) != size) {
    return sysError("read", "airlock-seccomp");
  }
  return out;
}

}  // namespace

namespace seccomp_detail {
// The default profile compiled at build time (generated seccomp_default_blob.cc); empty in the
// generator itself.
std::string_view precompiledDefaultFilter();
}  // namespace seccomp_detail

Result<std::string> buildSeccompFilter(const SeccompOptions& opts, SeccompCodegen codegen) {
  const uint32_t arch = seccomp_arch_native();
  std::map<std::string, Effective> rules;
  for (const auto& r : defaultSeccompRules()) rules[r.name] = {r.errnum, r.filter};

  auto check = [&](const std::string& name, const char* list) -> Result<> {
    int nr = seccomp_syscall_resolve_name_arch(arch, name.c_str());
    if (nr == __NR_SCMP_ERROR)
      return fail(std::string("seccomp ") + list + ": unknown syscall", name);
    if (nr < 0) {
      return fail(std::string("seccomp ") + list + ": syscall does not exist on this architecture",
                  name);
    }
    return {};
  };
  for (const auto& name : opts.allow) {
    if (auto r = check(name, "allow"); !r) return Unexpected(r.error());
    rules[name] = {0, F::kNone};
  }
  for (const auto& name : opts.deny) {
    if (auto r = check(name, "deny"); !r) return Unexpected(r.error());
    rules[name] = {EPERM, F::kNone};
  }

  // Unknown syscalls: ENOSYS, so libc falls back from calls newer than this profile.
  SeccompCtx ctx(seccomp_init(SCMP_ACT_ERRNO(ENOSYS)));
  if (!ctx) return fail("seccomp_init");
  // i386 and x32 entry points on an x86_64 host: kill, never interpret their numbers.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
      rc < 0) {
    return kernelError(rc, "seccomp_attr_set", "ACT_BADARCH");
  }
  // Binary search over syscall numbers instead of a linear chain of ~300 comparisons.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2); rc < 0) {
    return kernelError(rc, "seccomp_attr_set", "CTL_OPTIMIZE");
  }

  std::vector<ArgValueCheck> prefix;
  std::map<uint32_t, uint32_t> plain;  // for the range tree
  std::set<uint32_t> deferred;
  for (const auto& [name, eff] : rules) {
    int nr = seccomp_syscall_resolve_name_arch(arch, name.c_str());
    // Names this libseccomp or architecture does not know stay at the ENOSYS default; so do
    // ENOSYS rules, which libseccomp refuses as redundant with the default (EACCES).
    if (nr < 0 || eff.errnum == ENOSYS) continue;
    if (codegen == SeccompCodegen::kRangeTree) {
      if (eff.errnum == 0 && eff.filter != F::kNone) {
        deferred.insert(static_cast<uint32_t>(nr));  // argument checks: libseccomp's part
      } else {
        plain[static_cast<uint32_t>(nr)] =
            eff.errnum != 0 ? SCMP_ACT_ERRNO(static_cast<uint32_t>(eff.errnum)) : SCMP_ACT_ALLOW;
        continue;
      }
    }
    Result<> r = eff.errnum != 0
                     ? addRule(ctx.get(), SCMP_ACT_ERRNO(static_cast<uint32_t>(eff.errnum)), nr,
                               name.c_str())
                     : addFiltered(ctx.get(), nr, name.c_str(), eff.filter, prefix);
    if (!r) return Unexpected(std::move(r.error()).wrap("compile seccomp filter"));
  }

  AIRLOCK_TRY_CTX(body, exportBpf(ctx.get()), "compile seccomp filter");
  std::vector<sock_filter> head;
  if (codegen == SeccompCodegen::kRangeTree) {
    AIRLOCK_TRY_CTX(tree, buildRangeTree(arch, plain, deferred, SCMP_ACT_ERRNO(ENOSYS)),
                    "compile seccomp filter");
    head = std::move(tree);
  }
  AIRLOCK_TRY_CTX(checks, buildArgValueChecks(arch, prefix), "compile seccomp filter");
  head.insert(head.end(), checks.begin(), checks.end());
  std::string out(reinterpret_cast<const char*>(head.data()), head.size() * sizeof(sock_filter));
  out += body;
  if (out.size() / sizeof(sock_filter) > BPF_MAXINSNS) {
    return fail("compile seccomp filter: program too long (" +
                std::to_string(out.size() / sizeof(sock_filter)) + " instructions)");
  }
  return out;
}

Result<std::string> compileSeccompFilter(const SeccompOptions& opts) {
  // libseccomp needs ≈ 5 ms for ~300 rules, too slow for every run: the default profile is
  // compiled at build time, and other option sets once per process.
  if (opts.allow.empty() && opts.deny.empty()) {
    std::string_view pre = seccomp_detail::precompiledDefaultFilter();
    if (!pre.empty()) return std::string(pre);
  }
  auto normalized = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    std::string key;
    for (const auto& s : v) key += s + ",";
    return key;
  };
  std::string key = normalized(opts.allow) + "|" + normalized(opts.deny);
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  {
    std::lock_guard lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  auto built = buildSeccompFilter(opts);
  if (!built) return built;
  std::lock_guard lock(mu);
  if (cache.size() >= 64) cache.clear();
  cache.emplace(key, *built);
  return built;
}

}  // namespace airlock::sys
