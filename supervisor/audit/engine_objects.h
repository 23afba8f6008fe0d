// The kernel objects of the audit engine (bpf/exec_audit, bpf/net_policy): its maps and programs,
// as descriptors, loaded from the skeletons or opened where another airlock process pinned them.
//
// Loading costs ~10 ms of CPU here (the verifier, map allocation), which a one-shot `airlock run`
// would pay on every run. So by default the engine is pinned in bpffs, once per host and version:
// <pin_root>/<version>/ holds every map, every program and the exec hook's link (which keeps the
// hook attached with no process holding it). `version` hashes the programs' bytes and the host
// network namespace the policy protects, so an upgraded airlock never shares maps with an older
// layout. The next process opens the pins (~0.1 ms). What stays per process: the ring buffer its
// sandboxes' events go to (`rings[reader]`).
//
// The cgroup programs (connect/sendmsg decisions, byte counting) are attached once to the cgroup
// v2 directory every sandbox sits in (<v2>/airlock), not to each sandbox: a cgroup attachment
// costs the kernel a static-key switch (~1 ms here, twice per sandbox), and programs on a parent
// run for all its descendants anyway. A pinned engine pins these links too
// (parent-<cgroup id>-<program>), so they stay attached while the version is pinned.
//
// Several processes coordinate with flock()ed files in <lock_dir>: <version>.users (shared, held
// by every process using a version; unpinUnusedEngines removes only versions nobody holds),
// load.lock (exclusive around a load and its pinning), <version>.reader-<k> (a process's ring)
// and <version>.slot-<n> (a sandbox's slot; see engine.cc).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <bpf/libbpf.h>
#include "airlock/result.h"
#include "airlock/unique_fd.h"

#include "supervisor/audit/bpf_handles.h"

namespace airlock::audit {

struct EngineObjects {
  // Maps.
  UniqueFd audited_cgroups, slot_config, drops, rings;
  UniqueFd rules_v4, rules_v6, protected_v4, protected_v6, net_counters, seen_destinations;
  // cgroup programs, attached to the sandboxes' parent (attachToSandboxParent).
  UniqueFd connect4, connect6, sendmsg4, sendmsg6, count_egress, count_ingress;
  // A private engine's global exec hook: attached while this lives. A pinned engine's is pinned.
  BpfLink exec_link;
  // A private engine's links on the sandboxes' parent, by the parent's cgroup id: attached while
  // this lives. A pinned engine's are pinned.
  struct ParentLinks {
    std::string path;
    std::vector<UniqueFd> links;
  };
  std::map<uint64_t, ParentLinks> parent_links;

  std::string version;
  std::string pin_dir;            // <pin_root>/<version>; empty for a private engine
  bool opened_from_pins = false;  // another process had loaded and pinned this version
  UniqueFd users_lock;            // shared lock on <version>.users while this process uses the pins
};

struct ObjectOptions {
  // bpffs directory to share the engine through ("" = load a private engine, gone with this
  // process). Its parent is mounted as bpffs when it is not one yet, as systemd does at boot.
  std::string pin_root;
  std::string lock_dir = "/run/lock/airlock-audit";
  // SO_NETNS_COOKIE of the supervisor's network namespace (its loopback is the host's).
  uint64_t host_netns_cookie = 0;
};

// Opens the pinned engine of this version, loading and pinning it first when no process did (a
// version no process uses any more is then unpinned). Without a pin root, or when bpffs cannot
// be used, loads a private engine. The error names the program the kernel refused.
Result<EngineObjects> openOrLoadEngineObjects(const ObjectOptions& options);

// Makes sure the cgroup programs are attached to `parent_fd`, the cgroup v2 directory (cgroup id
// `parent_id`, at `parent_path`) that sandboxes' cgroups sit in. For a pinned engine that is
// normally a few stat()s of the pins; when they are missing (first use, or the directory was
// removed and made again), under <version>.parent in the lock directory, attaches and pins the
// links, and unpins those of cgroups that no longer exist.
Result<> attachToSandboxParent(EngineObjects& objects, int parent_fd, uint64_t parent_id,
                               const std::string& parent_path, const std::string& lock_dir);

// Unpins every engine version under `pin_root` that no process uses, except `keep` and the
// `keep_recent` most recently used others (by the time of their <version>.users file, which each
// use touches); returns the versions removed. Removing a version detaches its exec hook.
Result<std::vector<std::string>> unpinUnusedEngines(const std::string& pin_root,
                                                    const std::string& lock_dir,
                                                    const std::string& keep = {},
                                                    size_t keep_recent = 0);

// libbpf's options for opening one of bpf/'s objects: with the few kernel types the programs'
// CO-RE relocations need (extracted at build time) when the running kernel is the build's, else
// libbpf's default, the whole /sys/kernel/btf/vmlinux (~40 ms to parse per object).
class ObjectOpenOptions {
 public:
  ObjectOpenOptions();
  ObjectOpenOptions(const ObjectOpenOptions&) = delete;  // opts_ points into path_
  ObjectOpenOptions& operator=(const ObjectOpenOptions&) = delete;
  const bpf_object_open_opts* get() const { return &opts_; }

 private:
  UniqueFd btf_;  // a memfd with the extract
  std::string path_;
  bpf_object_open_opts opts_{};
};

}  // namespace airlock::audit
