// libbpf diagnostics capture and cgroup attachment.
#include "supervisor/audit/bpf_handles.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace airlock::audit {

namespace {

thread_local std::string t_messages;
constexpr size_t kKeepBytes = 2048;

int collect(libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  char buf[1024];
  int n = std::vsnprintf(buf, sizeof buf, format, args);
  if (n > 0) {
    t_messages.append(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
    if (t_messages.size() > 4 * kKeepBytes) t_messages.erase(0, t_messages.size() - kKeepBytes);
  }
  return n;
}

}  // namespace

void captureLibbpfMessages() {
  static std::once_flag once;
  std::call_once(once, [] { libbpf_set_print(collect); });
}

std::string takeLibbpfMessages() {
  std::string out = std::move(t_messages);
  t_messages.clear();
  if (out.size() > kKeepBytes) out = "..." + out.substr(out.size() - kKeepBytes);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

Unexpected libbpfError(int negative_ret, std::string op, std::string subject) {
  std::string said = takeLibbpfMessages();
  if (!said.empty()) op += " [libbpf: " + said + "]";
  return kernelError(negative_ret < 0 ? negative_ret : -EINVAL, std::move(op), std::move(subject));
}

Result<BpfLink> attachToCgroup(bpf_program* prog, int cgroup_fd, const std::string& cgroup_path) {
  bpf_link* link = bpf_program__attach_cgroup(prog, cgroup_fd);
  if (link == nullptr) {
    return libbpfError(-errno, std::string("attach ") + bpf_program__section_name(prog),
                       cgroup_path);
  }
  return BpfLink(link);
}

}  // namespace airlock::audit
