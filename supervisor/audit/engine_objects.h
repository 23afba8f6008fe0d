// The kernel objects of the audit engine (bpf/exec_audit, bpf/net_policy): its maps and programs,
// as descriptors, loaded from the skeletons or opened where another airlock process pinned them.
//
// Loading costs ~10 ms of CPU here (the verifier, map allocation), which a one-shot `airlock run`
// would pay on every run. So by default the engine is pinned in bpffs, once per host and version:
// <pin_root>/<version>/ holds every map, every program and the exec hook's link (which keeps the
// hook attached with no process holding it). `version` hashes the programs' bytes and the host
// network namespace the policy protects, so an upgraded airlock never shares maps with an older
// layout. The next process opens the pins (~0.1 ms). What stays per process: the ring buffer its
// sandboxes' events go to (`rings[reader]`) and the cgroup links of its sandboxes.
//
// Several processes coordinate with flock()ed files in <lock_dir>: <version>.users (shared, held
// by every process using a version; unpinUnusedEngines removes only versions nobody holds),
// load.lock (exclusive around a load and its pinning), <version>.reader-<k> (a process's ring)
// and <version>.slot-<n> (a sandbox's slot; see engine.cc).
#pragma once

#include <cstdint>
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
  // cgroup programs, attached per sandbox.
  UniqueFd connect4, connect6, sendmsg4, sendmsg6, count_egress, count_ingress;
  // A private engine's global exec hook: attached while this lives. A pinned engine's is pinned.
  BpfLink exec_link;

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

// Unpins every engine version under `pin_root` that no process uses, except `keep`; returns the
// versions removed. Removing a version detaches its exec hook.
Result<std::vector<std::string>> unpinUnusedEngines(const std::string& pin_root,
                                                    const std::string& lock_dir,
                                                    const std::string& keep = {});

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
