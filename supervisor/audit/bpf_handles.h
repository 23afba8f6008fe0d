// Owning handles for libbpf objects (skeletons, links) and libbpf's diagnostics.
#pragma once

#include <bpf/libbpf.h>

#include <memory>
#include <string>

#include "airlock/result.h"

namespace airlock::audit {

// A skeleton from `bpftool gen skeleton`: BpfSkel<airlock_net_policy, airlock_net_policy__destroy>.
template <typename T, void (*Destroy)(T*)>
struct SkelDeleter {
  void operator()(T* skel) const { Destroy(skel); }
};
template <typename T, void (*Destroy)(T*)>
using BpfSkel = std::unique_ptr<T, SkelDeleter<T, Destroy>>;

struct LinkDeleter {
  // Destroying a link detaches its program (cgroup attachments included).
  void operator()(bpf_link* link) const { bpf_link__destroy(link); }
};
using BpfLink = std::unique_ptr<bpf_link, LinkDeleter>;

// Routes libbpf's warnings into a per-thread buffer instead of stderr (installed once). The
// verifier's complaint is what explains a failed load, so errors quote it.
void captureLibbpfMessages();
// The warnings libbpf printed on this thread since the last call (then cleared), trimmed to the
// last few lines.
std::string takeLibbpfMessages();

// kernelError for a libbpf call that returned a negative errno, with libbpf's last words.
Unexpected libbpfError(int negative_ret, std::string op, std::string subject = {});

// Attaches `prog` to the cgroup directory fd with a BPF link (detached when the link goes).
Result<BpfLink> attachToCgroup(bpf_program* prog, int cgroup_fd, const std::string& cgroup_path);

}  // namespace airlock::audit
