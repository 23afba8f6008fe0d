#include "exec_watch.h"

#include <fcntl.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "exec_records.h"

namespace airlock::isolation::microvm {
namespace {

std::string readSmall(const std::string& path, size_t cap) {
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  ssize_t n;
  while (out.size() < cap && (n = ::read(fd, buf, sizeof buf)) > 0)
    out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (out.size() > cap) out.resize(cap);
  return out;
}

void writeAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::_Exit(0);  // the port is gone: the VM is ending
    done += static_cast<size_t>(n);
  }
}

// What the process that just exec'd is; it may already be gone (then only its pid is known).
ExecRecord describe(pid_t pid) {
  ExecRecord r;
  r.kind = 'E';
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  r.time_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  r.pid = static_cast<uint32_t>(pid);
  const std::string dir = "/proc/" + std::to_string(pid);
  r.comm = readSmall(dir + "/comm", 64);
  while (!r.comm.empty() && r.comm.back() == '\n') r.comm.pop_back();
  char exe[4096];
  ssize_t n = ::readlink((dir + "/exe").c_str(), exe, sizeof exe - 1);
  if (n > 0) r.path.assign(exe, static_cast<size_t>(n));
  const std::string cmdline = readSmall(dir + "/cmdline", kMaxArgvBytes);
  size_t from = 0;
  while (from < cmdline.size()) {
    size_t z = cmdline.find('\0', from);
    if (z == std::string::npos) z = cmdline.size();
    r.argv.push_back(cmdline.substr(from, z - from));
    from = z + 1;
  }
  // The name it was exec'd by, as the host's exec hook records it (/usr/bin/python3, not the
  // python3.11 its symlink leads to): argv[0], directly or through PATH, when it is that file.
  struct stat image {};
  if (!r.argv.empty() && !r.argv[0].empty() && ::stat((dir + "/exe").c_str(), &image) == 0) {
    const std::string& a0 = r.argv[0];
    std::vector<std::string> candidates;
    if (a0[0] == '/') {
      candidates.push_back(a0);
    } else if (a0.find('/') == std::string::npos) {
      for (const char* d :
           {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"})
        candidates.push_back(std::string(d) + "/" + a0);
    }
    for (const auto& c : candidates) {
      struct stat st {};
      if (::stat(c.c_str(), &st) == 0 && st.st_dev == image.st_dev && st.st_ino == image.st_ino) {
        r.path = c;
        break;
      }
    }
  }
  // Effective uid: the second field of "Uid:".
  const std::string status = readSmall(dir + "/status", 4096);
  if (size_t at = status.find("\nUid:"); at != std::string::npos) {
    char* end = nullptr;
    std::strtoul(status.c_str() + at + 5, &end, 10);
    r.uid = static_cast<uint32_t>(std::strtoul(end, nullptr, 10));
  }
  return r;
}

[[noreturn]] void watch(int sock, int port) {
  uint32_t lost = 0;
  alignas(nlmsghdr) char buf[16384];
  for (;;) {
    ssize_t n = ::recv(sock, buf, sizeof buf, 0);
    if (n < 0) {
      // The socket's buffer overflowed: some execs were not seen. Say so with the next record.
      if (errno == ENOBUFS) ++lost;
      continue;
    }
    for (auto* nl = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(nl, static_cast<size_t>(n));
         nl = NLMSG_NEXT(nl, n)) {
      auto* cn = static_cast<cn_msg*>(NLMSG_DATA(nl));
      auto* ev = reinterpret_cast<proc_event*>(cn->data);
      if (ev->what != proc_event::PROC_EVENT_EXEC) continue;
      const pid_t pid = ev->event_data.exec.process_tgid;
      if (pid == 1) continue;  // the agent's own start
      if (lost != 0) {
        ExecRecord l;
        l.kind = 'L';
        l.lost = lost;
        writeAll(port, encodeRecord(l));
        lost = 0;
      }
      writeAll(port, encodeRecord(describe(pid)));
    }
  }
}

}  // namespace

bool startExecWatch(int port_fd) {
  int sock = ::socket(PF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_CONNECTOR);
  if (sock < 0) return false;
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = CN_IDX_PROC;
  if (::bind(sock, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(sock);
    return false;
  }
  // nlmsghdr, cn_msg (whose data[] is the operation), the operation: one buffer, since cn_msg
  // ends in a flexible array.
  alignas(nlmsghdr) char msg[NLMSG_SPACE(sizeof(cn_msg) + sizeof(proc_cn_mcast_op))] = {};
  auto* nl = reinterpret_cast<nlmsghdr*>(msg);
  nl->nlmsg_len = NLMSG_LENGTH(sizeof(cn_msg) + sizeof(proc_cn_mcast_op));
  nl->nlmsg_type = NLMSG_DONE;
  auto* cn = static_cast<cn_msg*>(NLMSG_DATA(nl));
  cn->id.idx = CN_IDX_PROC;
  cn->id.val = CN_VAL_PROC;
  cn->len = sizeof(proc_cn_mcast_op);
  const proc_cn_mcast_op op = PROC_CN_MCAST_LISTEN;
  std::memcpy(cn->data, &op, sizeof op);
  if (::send(sock, msg, nl->nlmsg_len, 0) != static_cast<ssize_t>(nl->nlmsg_len)) {
    ::close(sock);
    return false;
  }
  // Bursts (a shell loop, a build) queue here while the watcher reads /proc.
  int rcvbuf = 4 << 20;
  ::setsockopt(sock, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(sock);
    return false;
  }
  if (pid == 0) {
    // Its own session: the agent ends an execution by signalling the execution's session, never
    // this one. Named, so `ps` inside says what it is.
    ::setsid();
    ::prctl(PR_SET_NAME, "airlock-audit", 0, 0, 0);
    watch(sock, port_fd);
  }
  ::close(sock);
  return true;
}

}  // namespace airlock::isolation::microvm
