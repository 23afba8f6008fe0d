// Hook probes: each program of each skeleton loaded alone, attached, detached.
#include "supervisor/audit/hook_probe.h"

#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include "airlock/result.h"
#include "airlock/unique_fd.h"
#include "exec_audit.skel.h"
#include "hook_probe.skel.h"
#include "net_policy.skel.h"
#include "supervisor/audit/bpf_handles.h"
#include "syscall_count.skel.h"

namespace airlock::audit {

namespace {

std::string refusal(const std::string& step, int err) {
  std::string said = takeLibbpfMessages();
  // The verifier log is long; its last line says why.
  if (auto nl = said.find_last_of('\n'); nl != std::string::npos) said = said.substr(nl + 1);
  std::string out = step + ": " + Error::errnoName(err) + " (" + std::strerror(err) + ")";
  if (!said.empty()) out += " [" + said + "]";
  return out;
}

// Loads only `target` of a freshly opened object, then attaches it with `attach`.
// `open` returns the bpf_object and its programs; the ring buffer, if any, is shrunk to a page.
template <typename Skel>
HookSupport probeProgram(const char* hook, Skel* (*open)(), void (*destroy)(Skel*),
                         bpf_object* (*object)(Skel*), const char* program,
                         const std::function<bpf_link*(bpf_program*)>& attach,
                         const char* consequence, bool used = true) {
  HookSupport out{hook, false, used, {}, consequence};
  Skel* skel = open();
  if (skel == nullptr) {
    out.detail = refusal("open", errno);
    return out;
  }
  bpf_object* obj = object(skel);
  bpf_program* target = nullptr;
  bpf_program* p;
  bpf_object__for_each_program(p, obj) {
    bool mine = std::strcmp(bpf_program__name(p), program) == 0;
    bpf_program__set_autoload(p, mine);
    if (mine) target = p;
  }
  bpf_map* m;
  bpf_object__for_each_map(m, obj) {
    if (bpf_map__type(m) == BPF_MAP_TYPE_RINGBUF) {
      bpf_map__set_max_entries(m, static_cast<uint32_t>(::sysconf(_SC_PAGESIZE)));
    }
  }
  if (target == nullptr) {
    out.detail = std::string("program ") + program + " missing from the object";
  } else if (int rc = bpf_object__load(obj); rc != 0) {
    out.detail = refusal("load", -rc);
  } else if (bpf_link* link = attach(target); link == nullptr) {
    out.detail = refusal("attach", errno);
  } else {
    bpf_link__destroy(link);
    out.ok = true;
    out.detail = "loads and attaches";
  }
  destroy(skel);
  return out;
}

// A temporary, empty cgroup v2 directory for cgroup-attached probes.
class ScratchCgroup {
 public:
  explicit ScratchCgroup(const std::string& v2_mount) {
    if (v2_mount.empty()) return;
    path_ = v2_mount + "/airlock-doctor-" + std::to_string(::getpid());
    if (::mkdir(path_.c_str(), 0700) != 0 && errno != EEXIST) {
      error_ = refusal("mkdir " + path_, errno);
      path_.clear();
      return;
    }
    fd_.reset(::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd_) error_ = refusal("open " + path_, errno);
  }
  ~ScratchCgroup() {
    fd_.reset();
    if (!path_.empty()) ::rmdir(path_.c_str());
  }
  int fd() const { return fd_.get(); }
  const std::string& error() const { return error_; }

 private:
  std::string path_;
  UniqueFd fd_;
  std::string error_ = "cgroup2 is not mounted";
};

}  // namespace

std::vector<HookSupport> probeHooks(const std::string& v2_mount) {
  captureLibbpfMessages();
  std::vector<HookSupport> out;
  auto global = [](bpf_program* p) { return bpf_program__attach(p); };

  out.push_back(probeProgram<airlock_exec_audit>(
      "raw_tp/sched_process_exec", airlock_exec_audit__open, airlock_exec_audit__destroy,
      [](airlock_exec_audit* s) { return s->obj; }, "on_exec", global,
      "no exec audit: executions report no processes"));

  ScratchCgroup scratch(v2_mount);
  struct CgroupHook {
    const char* hook;
    const char* program;
    const char* consequence;
  };
  const CgroupHook cgroup_hooks[] = {
      {"cgroup/connect4", "connect4", "no IPv4 connect policy or audit"},
      {"cgroup/connect6", "connect6", "no IPv6 connect policy or audit"},
      {"cgroup/sendmsg4", "sendmsg4", "no IPv4 UDP send policy or audit"},
      {"cgroup/sendmsg6", "sendmsg6", "no IPv6 UDP send policy or audit"},
      {"cgroup_skb/egress", "count_egress", "no bytes-sent accounting"},
      {"cgroup_skb/ingress", "count_ingress", "no bytes-received accounting"},
  };
  for (const auto& h : cgroup_hooks) {
    if (scratch.fd() < 0) {
      out.push_back({h.hook, false, true, scratch.error(), h.consequence});
      continue;
    }
    int fd = scratch.fd();
    out.push_back(probeProgram<airlock_net_policy>(
        h.hook, airlock_net_policy__open, airlock_net_policy__destroy,
        [](airlock_net_policy* s) { return s->obj; }, h.program,
        [fd](bpf_program* p) { return bpf_program__attach_cgroup(p, fd); }, h.consequence));
  }

  out.push_back(probeProgram<airlock_syscall_count>(
      "raw_tp/sys_enter", airlock_syscall_count__open, airlock_syscall_count__destroy,
      [](airlock_syscall_count* s) { return s->obj; }, "count_syscall", global,
      "no per-syscall counts (an opt-in policy switch)"));

  out.push_back(probeProgram<airlock_hook_probe>(
      "BPF LSM (lsm/file_open)", airlock_hook_probe__open, airlock_hook_probe__destroy,
      [](airlock_hook_probe* s) { return s->obj; }, "probe_lsm", global,
      "not used: enforcement relies on seccomp, Landlock, namespaces and cgroup hooks", false));
  out.push_back(probeProgram<airlock_hook_probe>(
      "fentry (fentry/vfs_read)", airlock_hook_probe__open, airlock_hook_probe__destroy,
      [](airlock_hook_probe* s) { return s->obj; }, "probe_fentry", global,
      "not used: audit relies on tracepoints and cgroup hooks", false));
  return out;
}

}  // namespace airlock::audit
