// Loading the engine's programs and maps, pinning them, and opening the pins.
#include "supervisor/audit/engine_objects.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <tuple>

#include "airlock/whole_file.h"
#include "exec_audit.skel.h"
#include "min_core_btf.h"
#include "net_policy.skel.h"
#include "supervisor/audit/net_rules.h"
#include "supervisor/log/log.h"
#include "supervisor/sys/lock_file.h"
#include "syscall_count.skel.h"

namespace airlock::audit {

namespace {

using ExecSkel = BpfSkel<airlock_exec_audit, airlock_exec_audit__destroy>;
using NetSkel = BpfSkel<airlock_net_policy, airlock_net_policy__destroy>;

// Every object a pinned engine shares, by its name in the version's directory.
struct Pin {
  const char* name;
  UniqueFd EngineObjects::*fd;
};
constexpr Pin kPins[] = {
    {"audited_cgroups", &EngineObjects::audited_cgroups},
    {"slot_config", &EngineObjects::slot_config},
    {"drops", &EngineObjects::drops},
    {"rings", &EngineObjects::rings},
    {"rules_v4", &EngineObjects::rules_v4},
    {"rules_v6", &EngineObjects::rules_v6},
    {"protected_v4", &EngineObjects::protected_v4},
    {"protected_v6", &EngineObjects::protected_v6},
    {"net_counters", &EngineObjects::net_counters},
    {"seen_destinations", &EngineObjects::seen_destinations},
    {"connect4", &EngineObjects::connect4},
    {"connect6", &EngineObjects::connect6},
    {"sendmsg4", &EngineObjects::sendmsg4},
    {"sendmsg6", &EngineObjects::sendmsg6},
    {"count_egress", &EngineObjects::count_egress},
    {"count_ingress", &EngineObjects::count_ingress},
};
// The pinned link of the global exec hook: while it is pinned the hook stays attached.
constexpr const char* kExecLinkPin = "exec_link";

// The cgroup programs, attached to the sandboxes' parent. Their links' pins in a version's
// directory are named parent-<cgroup id in hex>-<name>.
struct CgroupProgram {
  const char* name;
  UniqueFd EngineObjects::*prog;
  bpf_attach_type type;
  const char* section;
};
constexpr CgroupProgram kCgroupPrograms[] = {
    {"count_egress", &EngineObjects::count_egress, BPF_CGROUP_INET_EGRESS, "cgroup_skb/egress"},
    {"count_ingress", &EngineObjects::count_ingress, BPF_CGROUP_INET_INGRESS, "cgroup_skb/ingress"},
    {"connect4", &EngineObjects::connect4, BPF_CGROUP_INET4_CONNECT, "cgroup/connect4"},
    {"connect6", &EngineObjects::connect6, BPF_CGROUP_INET6_CONNECT, "cgroup/connect6"},
    {"sendmsg4", &EngineObjects::sendmsg4, BPF_CGROUP_UDP4_SENDMSG, "cgroup/sendmsg4"},
    {"sendmsg6", &EngineObjects::sendmsg6, BPF_CGROUP_UDP6_SENDMSG, "cgroup/sendmsg6"},
};
constexpr const char* kParentLinkPrefix = "parent-";

std::string parentLinkPin(const std::string& pin_dir, uint64_t parent_id, const char* name) {
  char id[17];
  std::snprintf(id, sizeof id, "%llx", static_cast<unsigned long long>(parent_id));
  return pin_dir + "/" + kParentLinkPrefix + id + "-" + name;
}

UniqueFd dupFd(int fd) { return UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 3)); }

// FNV-1a over 8-byte words (then the tail bytes): the version only has to change when the bytes
// do. Every run hashes the ~100 KB of programs, and byte by byte that took ~0.1 ms.
uint64_t fnv1a(uint64_t h, const void* data, size_t size) {
  constexpr uint64_t kPrime = 1099511628211ull;
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + sizeof(uint64_t) <= size; i += sizeof(uint64_t)) {
    uint64_t word;
    std::memcpy(&word, p + i, sizeof word);
    h = (h ^ word) * kPrime;
  }
  for (; i < size; ++i) h = (h ^ p[i]) * kPrime;
  return h;
}

std::string engineVersion(uint64_t host_netns_cookie) {
  uint64_t h = 14695981039346656037ull;
  size_t size = 0;
  const void* bytes = airlock_exec_audit__elf_bytes(&size);
  h = fnv1a(h, bytes, size);
  bytes = airlock_net_policy__elf_bytes(&size);
  h = fnv1a(h, bytes, size);
  // The per-process syscall counter reuses the pinned maps: its layout must match them too.
  bytes = airlock_syscall_count__elf_bytes(&size);
  h = fnv1a(h, bytes, size);
  h = fnv1a(h, &host_netns_cookie, sizeof host_netns_cookie);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

Result<> fillProtectedRanges(int v4_fd, int v6_fd) {
  const auto& ranges = protectedRanges();
  for (uint32_t i = 0; i < ranges.size(); ++i) {
    auto cidr = Cidr::parse(ranges[i].cidr);
    if (!cidr) return Unexpected(std::move(cidr.error()).wrap("protected range table"));
    int rc;
    if (cidr->family == 4) {
      airlock_range_key_v4 key{cidr->prefix, {}};
      std::memcpy(key.addr, cidr->addr.data(), 4);
      rc = bpf_map_update_elem(v4_fd, &key, &i, BPF_ANY);
    } else {
      airlock_range_key_v6 key{cidr->prefix, {}};
      std::memcpy(key.addr, cidr->addr.data(), 16);
      rc = bpf_map_update_elem(v6_fd, &key, &i, BPF_ANY);
    }
    if (rc != 0) return sysError("bpf_map_update_elem(protected ranges)", ranges[i].cidr);
  }
  return {};
}

// The build's extract of the kernel types the programs use (bpf/embed_min_btf.cmake), as a memfd;
// invalid when /proc/version is not the kernel it came from (then libbpf reads vmlinux).
UniqueFd minimalKernelBtf() {
  std::string running = readWholeFile("/proc/version").value_or("");
  while (!running.empty() && (running.back() == '\n' || running.back() == ' ')) running.pop_back();
  if (running.empty() || running != airlock::bpf::kMinCoreBtfKernel) return {};
  UniqueFd fd(::memfd_create("airlock-min-core-btf", MFD_CLOEXEC));
  if (!fd) return {};
  const auto* data = airlock::bpf::kMinCoreBtf;
  size_t left = sizeof airlock::bpf::kMinCoreBtf;
  while (left > 0) {
    ssize_t n = ::write(fd.get(), data, left);
    if (n <= 0) return {};
    data += n;
    left -= static_cast<size_t>(n);
  }
  return fd;
}

// The verifier and map creation: the expensive part.
Result<EngineObjects> loadObjects(uint64_t host_netns_cookie) {
  ObjectOpenOptions open_opts;
  ExecSkel exec(airlock_exec_audit__open_opts(open_opts.get()));
  if (!exec) return libbpfError(-errno, "open bpf object", "exec_audit");
  if (int rc = airlock_exec_audit__load(exec.get()); rc != 0) {
    return libbpfError(rc, "load bpf program", "exec_audit (raw_tp/sched_process_exec)");
  }
  NetSkel net(airlock_net_policy__open_opts(open_opts.get()));
  if (!net) return libbpfError(-errno, "open bpf object", "net_policy");
  net->rodata->host_netns_cookie = host_netns_cookie;
  // One cgroup table, one slot configuration, one ring table and one drop counter for both.
  bpf_map__reuse_fd(net->maps.audited_cgroups, bpf_map__fd(exec->maps.audited_cgroups));
  bpf_map__reuse_fd(net->maps.slot_config, bpf_map__fd(exec->maps.slot_config));
  bpf_map__reuse_fd(net->maps.rings, bpf_map__fd(exec->maps.rings));
  bpf_map__reuse_fd(net->maps.drops, bpf_map__fd(exec->maps.drops));
  if (int rc = airlock_net_policy__load(net.get()); rc != 0) {
    return libbpfError(rc, "load bpf program",
                       "net_policy (cgroup/connect4|6, cgroup/sendmsg4|6, cgroup_skb)");
  }
  if (auto r = fillProtectedRanges(bpf_map__fd(net->maps.protected_v4),
                                   bpf_map__fd(net->maps.protected_v6));
      !r)
    return Unexpected(r.error());

  EngineObjects o;
  o.audited_cgroups = dupFd(bpf_map__fd(exec->maps.audited_cgroups));
  o.slot_config = dupFd(bpf_map__fd(exec->maps.slot_config));
  o.drops = dupFd(bpf_map__fd(exec->maps.drops));
  o.rings = dupFd(bpf_map__fd(exec->maps.rings));
  o.rules_v4 = dupFd(bpf_map__fd(net->maps.rules_v4));
  o.rules_v6 = dupFd(bpf_map__fd(net->maps.rules_v6));
  o.protected_v4 = dupFd(bpf_map__fd(net->maps.protected_v4));
  o.protected_v6 = dupFd(bpf_map__fd(net->maps.protected_v6));
  o.net_counters = dupFd(bpf_map__fd(net->maps.net_counters));
  o.seen_destinations = dupFd(bpf_map__fd(net->maps.seen_destinations));
  o.connect4 = dupFd(bpf_program__fd(net->progs.connect4));
  o.connect6 = dupFd(bpf_program__fd(net->progs.connect6));
  o.sendmsg4 = dupFd(bpf_program__fd(net->progs.sendmsg4));
  o.sendmsg6 = dupFd(bpf_program__fd(net->progs.sendmsg6));
  o.count_egress = dupFd(bpf_program__fd(net->progs.count_egress));
  o.count_ingress = dupFd(bpf_program__fd(net->progs.count_ingress));
  for (const Pin& pin : kPins) {
    if (!(o.*pin.fd)) return sysError("dup", std::string("bpf object ") + pin.name);
  }
  // The exec hook is global but returns at once for tasks outside audited cgroups.
  bpf_link* link = bpf_program__attach(exec->progs.on_exec);
  if (link == nullptr) return libbpfError(-errno, "attach", "raw_tp/sched_process_exec");
  o.exec_link.reset(link);
  return o;  // the skeletons close; the descriptors and the link keep everything alive
}

bool isBpffs(const std::string& path) {
  struct statfs fs {};
  return ::statfs(path.c_str(), &fs) == 0 && fs.f_type == BPF_FS_MAGIC;
}

std::string parentOf(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The pin root's parent must be a bpffs. Hosts booted by systemd have one at /sys/fs/bpf; on
// others (this CI's Firecracker guests) airlock mounts it there, root-only, once.
Result<> ensureBpffs(const std::string& pin_root) {
  const std::string mount_point = parentOf(pin_root);
  if (!isBpffs(mount_point)) {
    if (::mount("bpf", mount_point.c_str(), "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700") !=
            0 &&
        !isBpffs(mount_point))
      return sysError("mount bpffs", mount_point);
  }
  if (::mkdir(pin_root.c_str(), 0700) != 0 && errno != EEXIST) return sysError("mkdir", pin_root);
  return {};
}

// Every pin of `dir`, or nullopt when the directory is not (completely) there.
Result<std::optional<EngineObjects>> openPins(const std::string& dir) {
  EngineObjects o;
  for (const Pin& pin : kPins) {
    std::string path = dir + "/" + pin.name;
    (o.*pin.fd).reset(bpf_obj_get(path.c_str()));
    if (!(o.*pin.fd)) {
      if (errno == ENOENT) return std::nullopt;
      return sysError("bpf_obj_get", path);
    }
  }
  // The link's pin is what keeps the exec hook attached: without it events would be missing.
  std::string link = dir + "/" + kExecLinkPin;
  if (::access(link.c_str(), F_OK) != 0) return std::nullopt;
  o.pin_dir = dir;
  o.opened_from_pins = true;
  return std::optional<EngineObjects>(std::move(o));
}

Result<> removePinDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return errno == ENOENT ? Result<>{} : sysError("opendir", dir);
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (::unlinkat(::dirfd(d), e->d_name, 0) != 0 && errno != ENOENT) {
      auto err = sysError("unlink", dir + "/" + e->d_name);
      ::closedir(d);
      return err;
    }
  }
  ::closedir(d);
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) return sysError("rmdir", dir);
  return {};
}

// Pins a freshly loaded engine into a temporary directory and renames it into place, so that a
// reader sees a version's directory complete or not at all (bpffs refuses names with dots). The
// exec link is then let go of: its pin holds it.
Result<> pinObjects(EngineObjects& o, const std::string& pin_root) {
  const std::string dir = pin_root + "/" + o.version;
  const std::string tmp = dir + "-tmp-" + std::to_string(::getpid());
  if (auto r = removePinDir(tmp); !r) return r;
  if (::mkdir(tmp.c_str(), 0700) != 0) return sysError("mkdir", tmp);
  for (const Pin& pin : kPins) {
    std::string path = tmp + "/" + pin.name;
    if (bpf_obj_pin((o.*pin.fd).get(), path.c_str()) != 0) return sysError("bpf_obj_pin", path);
  }
  std::string link = tmp + "/" + kExecLinkPin;
  if (int rc = bpf_link__pin(o.exec_link.get(), link.c_str()); rc != 0)
    return libbpfError(rc, "pin", link);
  if (::rename(tmp.c_str(), dir.c_str()) != 0) return sysError("rename", tmp + " -> " + dir);
  // The pin now keeps the hook attached; destroying our handle must not detach it.
  bpf_link__disconnect(o.exec_link.get());
  o.exec_link.reset();
  o.pin_dir = dir;
  return {};
}

Result<EngineObjects> openOrLoadPinned(const ObjectOptions& options, const std::string& version) {
  const std::string dir = options.pin_root + "/" + version;
  // Held before the pins are opened: a concurrent unpinUnusedEngines leaves this version alone.
  AIRLOCK_TRY_CTX(users, sys::lockFileIn(options.lock_dir, version + ".users", LOCK_SH),
                  "audit engine");
  // When this version was last used: the loader of another keeps the most recent one.
  (void)::futimens(users.get(), nullptr);
  auto usePins = [&](EngineObjects& opened) {
    opened.version = version;
    opened.users_lock = std::move(users);
    return std::move(opened);
  };
  if (isBpffs(parentOf(options.pin_root))) {
    AIRLOCK_TRY_CTX(opened, openPins(dir), "audit engine");
    if (opened) return usePins(*opened);
  }
  // Load under the host-wide load lock, after checking again: another process may have pinned
  // this version while we waited.
  AIRLOCK_TRY_CTX(load_lock, sys::lockFileIn(options.lock_dir, "load.lock", LOCK_EX),
                  "audit engine");
  if (auto r = ensureBpffs(options.pin_root); !r) return Unexpected(r.error());
  AIRLOCK_TRY_CTX(opened, openPins(dir), "audit engine");
  if (opened) return usePins(*opened);
  auto loaded_result = loadObjects(options.host_netns_cookie);
  if (!loaded_result) return Unexpected(loaded_result.error());
  EngineObjects loaded = std::move(*loaded_result);
  loaded.version = version;
  // An older airlock's engine, or a loader that died before its rename, goes now if unused;
  // the most recently used other version stays. Two airlock versions taking turns on one host
  // (an upgrade, a second build) would otherwise unpin each other's engine, and every run of
  // either would pay a full load (~12 ms; +31 ms per run measured on a PVM host).
  if (auto gone = unpinUnusedEngines(options.pin_root, options.lock_dir, version, 1); !gone)
    log::warn("audit.engine", {{"error", gone.error().message()}});
  if (auto r = pinObjects(loaded, options.pin_root); !r) {
    (void)removePinDir(dir + "-tmp-" + std::to_string(::getpid()));
    // Loaded all the same: this process keeps it to itself rather than loading it twice.
    log::warn("audit.engine", {{"error", r.error().wrap("pinning the audit engine").message()},
                               {"effect", "this process keeps the engine to itself"}});
    return loaded;
  }
  loaded.users_lock = std::move(users);
  return loaded;
}

// Unpins the parent links whose cgroup is gone (the kernel detached them when it was removed; a
// link's info then reports cgroup id 0).
void unpinDeadParentLinks(const std::string& pin_dir) {
  DIR* d = ::opendir(pin_dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> dead;
  while (dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, kParentLinkPrefix, std::strlen(kParentLinkPrefix)) != 0) continue;
    std::string path = pin_dir + "/" + e->d_name;
    UniqueFd link(bpf_obj_get(path.c_str()));
    bpf_link_info info{};
    uint32_t len = sizeof info;
    if (link && bpf_obj_get_info_by_fd(link.get(), &info, &len) == 0 && info.cgroup.cgroup_id == 0)
      dead.push_back(path);
  }
  ::closedir(d);
  for (const auto& path : dead) ::unlink(path.c_str());
}

}  // namespace

Result<> attachToSandboxParent(EngineObjects& o, int parent_fd, uint64_t parent_id,
                               const std::string& parent_path, const std::string& lock_dir) {
  auto attach = [&](const CgroupProgram& p) -> Result<UniqueFd> {
    UniqueFd link(bpf_link_create((o.*(p.prog)).get(), parent_fd, p.type, nullptr));
    if (!link) return sysError(std::string("attach ") + p.section, parent_path);
    return link;
  };
  if (o.pin_dir.empty()) {
    if (o.parent_links.count(parent_id) != 0) return {};
    EngineObjects::ParentLinks links{parent_path, {}};
    for (const CgroupProgram& p : kCgroupPrograms) {
      auto link = attach(p);
      if (!link) return Unexpected(link.error());
      links.links.push_back(std::move(*link));
    }
    o.parent_links[parent_id] = std::move(links);
    return {};
  }
  // The pins name the cgroup by its id, which the kernel never reuses: while all of them exist
  // the programs are attached to this very directory (unless someone detached a link by hand).
  auto allPinned = [&] {
    for (const CgroupProgram& p : kCgroupPrograms) {
      struct stat st {};
      if (::stat(parentLinkPin(o.pin_dir, parent_id, p.name).c_str(), &st) != 0) return false;
    }
    return true;
  };
  if (allPinned()) return {};
  AIRLOCK_TRY_CTX(lock, sys::lockFileIn(lock_dir, o.version + ".parent", LOCK_EX), "audit engine");
  unpinDeadParentLinks(o.pin_dir);
  for (const CgroupProgram& p : kCgroupPrograms) {
    const std::string pin = parentLinkPin(o.pin_dir, parent_id, p.name);
    struct stat st {};
    if (::stat(pin.c_str(), &st) == 0) continue;
    auto link = attach(p);
    if (!link) return Unexpected(link.error());
    // Dropping our descriptor afterwards leaves the pin holding the attachment.
    if (bpf_obj_pin(link->get(), pin.c_str()) != 0) return sysError("bpf_obj_pin", pin);
  }
  return {};
}

ObjectOpenOptions::ObjectOpenOptions() {
  opts_.sz = sizeof opts_;
  btf_ = minimalKernelBtf();
  if (!btf_) return;
  path_ = "/proc/self/fd/" + std::to_string(btf_.get());
  opts_.btf_custom_path = path_.c_str();
}

Result<EngineObjects> openOrLoadEngineObjects(const ObjectOptions& options) {
  const std::string version = engineVersion(options.host_netns_cookie);
  if (!options.pin_root.empty()) {
    auto pinned = openOrLoadPinned(options, version);
    if (pinned) return pinned;
    // Still audited and enforced, at the cost of a load per process.
    log::warn("audit.engine", {{"error", "cannot share the engine through " + options.pin_root +
                                             ": " + pinned.error().message()},
                               {"effect", "loading it for this process alone"}});
  }
  auto loaded = loadObjects(options.host_netns_cookie);
  if (loaded) loaded->version = version;
  return loaded;
}

Result<std::vector<std::string>> unpinUnusedEngines(const std::string& pin_root,
                                                    const std::string& lock_dir,
                                                    const std::string& keep, size_t keep_recent) {
  std::vector<std::string> removed;
  DIR* d = ::opendir(pin_root.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return removed;
    return sysError("opendir", pin_root);
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != ".." && name != keep) names.push_back(name);
  }
  ::closedir(d);
  // Unused versions, locked so none comes into use while it goes, most recently used first.
  struct Unused {
    std::string name;
    UniqueFd users;  // empty for a dead loader's temporary directory
    timespec used{};
  };
  std::vector<Unused> unused;
  for (const std::string& name : names) {
    UniqueFd users;
    if (name.find("-tmp-") == std::string::npos) {
      // A version is in use while any process holds its users lock (shared).
      AIRLOCK_TRY_CTX(fd, sys::tryLockFileIn(lock_dir, name + ".users"), "audit engine");
      if (!fd) continue;
      users = std::move(fd);
    } else {
      // A loader that died before renaming its directory. Callers hold load.lock, so a live
      // loader cannot be mid-pin; the pid check is for callers that do not.
      pid_t pid = static_cast<pid_t>(std::atoi(name.substr(name.rfind('-') + 1).c_str()));
      if (pid > 0 && ::kill(pid, 0) == 0) continue;
    }
    Unused u{name, std::move(users), {}};
    struct stat st {};
    if (u.users && ::fstat(u.users.get(), &st) == 0) u.used = st.st_mtim;
    unused.push_back(std::move(u));
  }
  std::stable_sort(unused.begin(), unused.end(), [](const Unused& a, const Unused& b) {
    return std::tie(a.used.tv_sec, a.used.tv_nsec) > std::tie(b.used.tv_sec, b.used.tv_nsec);
  });
  size_t kept = 0;
  for (const Unused& u : unused) {
    if (u.users && kept < keep_recent) {
      ++kept;
      continue;
    }
    if (auto r = removePinDir(pin_root + "/" + u.name); !r) return Unexpected(r.error());
    removed.push_back(u.name);
  }
  return removed;
}

}  // namespace airlock::audit
