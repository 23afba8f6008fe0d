#include "vm.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <sstream>

#include <airlock/protocol/channel.h>
#include <airlock/run_bounded.h>
#include <airlock/whole_file.h>

#include "common/spawn_monitor.h"
#include "snapshot.h"

namespace airlock::isolation::microvm {
namespace {

// The console file's cap: enough for a kernel's panic and the init's errors, while a guest
// that writes to its console forever cannot fill the host's disk.
constexpr rlim_t kConsoleCapBytes = 1 << 20;

// TCG's translated-code cache, MiB: QEMU's default (a quarter of guest RAM, up to 1 GiB) would
// count in the sandbox's cgroup; 64 MiB measured the same speed for Python and pandas.
constexpr int kTcgCodeCacheMb = 64;

// By pidfd: the pid may already be reaped (and reused) when QEMU exited on its own.
void reap(pid_t pid, int pidfd) {
  ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

std::string oneLine(std::string text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) out += (out.empty() ? "" : "; ") + line;
    start = end + 1;
  }
  return out;
}

// A value in QEMU's option syntax, where a comma is written twice.
std::string qemuOptionValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    out += c;
    if (c == ',') out += ',';
  }
  return out;
}

Result<sockaddr_un> unixAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path)
    return fail("the monitor socket's path is longer than " +
                    std::to_string(sizeof addr.sun_path - 1) + " bytes; use a shorter state_dir",
                path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// QEMU's monitor socket: bound by the plugin (as root, in the sandbox's private scratch
// directory), inherited by QEMU, which accepts one client at a time.
Result<UniqueFd> listenAt(const std::string& path) {
  auto addr = unixAddress(path);
  if (!addr) return Unexpected(addr.error());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return sysError("socket", path);
  ::unlink(path.c_str());
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&*addr), sizeof *addr) != 0)
    return sysError("bind", path);
  if (::listen(fd.get(), 1) != 0) return sysError("listen", path);
  return fd;
}

Result<UniqueFd> connectTo(const std::string& path) {
  auto addr = unixAddress(path);
  if (!addr) return Unexpected(addr.error());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return sysError("socket", path);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&*addr), sizeof *addr) != 0)
    return sysError("connect", path);
  return fd;
}

}  // namespace

unsigned long hostTscKhz() {
  std::istringstream in(readWholeFile("/proc/cpuinfo").value_or(""));
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("cpu MHz")) {
      size_t colon = line.find(':');
      if (colon != std::string::npos)
        return static_cast<unsigned long>(std::strtod(line.c_str() + colon + 1, nullptr) * 1000);
    }
  }
  return 0;
}

std::string fileTail(const std::string& path, size_t lines) {
  // The end of the file only: a console may have grown to the sandbox's file size limit.
  constexpr off_t kTailBytes = 64 << 10;
  std::string tail;
  if (UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)); fd) {
    struct stat st {};
    if (::fstat(fd.get(), &st) == 0) {
      const off_t from = std::max<off_t>(0, st.st_size - kTailBytes);
      tail.resize(static_cast<size_t>(st.st_size - from));
      ssize_t n = ::pread(fd.get(), tail.data(), tail.size(), from);
      tail.resize(n > 0 ? static_cast<size_t>(n) : 0);
      if (from > 0 && tail.find('\n') != std::string::npos) tail.erase(0, tail.find('\n') + 1);
    }
  }
  std::istringstream in(tail);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string text;
  for (const auto& l : last) text += l + "\n";
  return oneLine(text);
}

std::vector<std::string> qemuArgv(const Boot& b) {
  std::string append =
      "console=ttyS0 quiet panic=-1 reboot=t cryptomgr.notests random.trust_cpu=on";
  if (b.accel == "tcg") {
    // An emulated CPU's TSC is the host's: trust it rather than calibrating (measured here: TCG
    // boots hang or run their clock slow without).
    if (unsigned long khz = hostTscKhz(); khz != 0)
      append += " tsc_early_khz=" + std::to_string(khz);
    append += " tsc=reliable";
  }
  if (b.marker) {
    append += " airlock.marker";
  } else {
    std::string mounts;
    for (const auto& [image, at] : b.images) mounts += (mounts.empty() ? "" : ",") + at;
    if (!mounts.empty()) append += " airlock.mounts=" + mounts;
    if (b.network) append += " airlock.net";
    if (!b.image_layer.empty()) append += " airlock.image";
    if (!b.workspace_image.empty()) append += " airlock.workspace";
    if (!b.shares.empty()) append += " airlock.shares=" + std::to_string(b.shares.size());
    append += " airlock.user=" + std::to_string(b.uid) + ":" + std::to_string(b.gid) +
              " airlock.home=" + std::to_string(b.home_bytes) +
              " airlock.tmp=" + std::to_string(b.tmp_bytes);
  }
  std::vector<std::string> a = {
      b.qemu, "-M", "microvm", "-accel",
      b.accel == "tcg" ? "tcg,tb-size=" + std::to_string(kTcgCodeCacheMb) : std::string("kvm"),
      // TCG's "max" has every feature QEMU emulates (RDRAND for the guest's entropy); KVM's
      // "host" is the host's CPU.
      "-cpu", b.accel == "tcg" ? "max" : "host", "-smp", std::to_string(b.vcpus), "-m",
      std::to_string(b.memory_mb) + "M", "-nodefaults", "-no-user-config", "-display", "none",
      "-no-reboot", "-kernel", b.vmlinux, "-initrd", b.initramfs, "-append", append, "-serial",
      b.console_log.empty() ? std::string("stdio") : "file:" + b.console_log,
      // QEMU's own seccomp filter: no exec or fork, no scheduler or affinity changes, no
      // obsolete calls. Not elevateprivileges=deny: QEMU 7.2 installs the filter before -runas
      // drops to the sandbox's id, so setuid must stay allowed; once dropped it has nothing to
      // elevate to, and it cannot exec a setuid program.
      "-sandbox", "on,obsolete=deny,spawn=deny,resourcecontrol=deny"};
  if (!b.marker) {
    for (const auto& [id, fd] : {std::pair<const char*, int>{"agent", kAgentFd},
                                 {"status", kStatusFd},
                                 {"events", kEventsFd},
                                 {"qmp", kQmpFd}}) {
      // The monitor listens: each supervisor in turn connects to it (reconnectPorts). Without
      // a path (a bare boot, B7's), it is one end of a socket pair.
      a.insert(a.end(), {"-chardev",
                         std::string("socket,id=") + id + ",fd=" + std::to_string(fd) +
                             (fd == kQmpFd && !b.qmp_socket.empty() ? ",server=on,wait=off" : "")});
    }
    a.insert(a.end(), {"-mon", "chardev=qmp,mode=control"});
    a.insert(a.end(), {"-device", "virtio-serial-device", "-device",
                       "virtserialport,chardev=agent,name=airlock.agent", "-device",
                       "virtserialport,chardev=status,name=airlock.status", "-device",
                       "virtserialport,chardev=events,name=airlock.events"});
    std::vector<std::string> disks = {b.root_image};
    if (!b.image_layer.empty()) disks.push_back(b.image_layer);
    for (const auto& [image, at] : b.images) disks.push_back(image);
    for (size_t i = 0; i < disks.size(); ++i) {
      const std::string id = "disk" + std::to_string(i);
      a.insert(a.end(),
               {"-drive",
                "id=" + id + ",file=" + disks[i] + ",format=raw,if=none,readonly=on,cache=unsafe",
                "-device", "virtio-blk-device,drive=" + id});
    }
    if (!b.workspace_image.empty()) {
      // Written back through the host's page cache; the guest's flushes (the agent's syncfs
      // after each execution and file change) reach the file with fdatasync.
      a.insert(a.end(), {"-drive",
                         "id=home,file=" + b.workspace_image +
                             ",format=raw,if=none,cache=writeback,discard=unmap",
                         "-device", "virtio-blk-device,drive=home"});
    }
  }
  if (!b.marker) {
    // QEMU's 9p server ("local"): it opens the directory at start, before -runas, and then
    // walks every path beneath that fd one component at a time without following symlinks, as
    // the sandbox's host id. mapped-xattr keeps the guest's owners and modes in user.virtfs.*
    // xattrs of what the guest creates (owned on the host by that id, 0644 and 0755), so the
    // guest's user owns its files whatever its id is on the host.
    for (size_t i = 0; i < b.shares.size(); ++i) {
      const std::string id = "share" + std::to_string(i);
      a.insert(a.end(), {"-fsdev",
                         "local,id=" + id + ",path=" + qemuOptionValue(b.shares[i].path) +
                             ",security_model=mapped-xattr,fmode=0644,dmode=0755" +
                             (b.shares[i].writable ? "" : ",readonly=on"),
                         "-device", "virtio-9p-device,fsdev=" + id + ",mount_tag=" + id});
    }
  }
  if (b.network && !b.marker) {
    // User-mode networking: QEMU itself makes the guest's connections, as sockets of its own in
    // the sandbox's network namespace and cgroup, so the host's connect policy, audit and link
    // filter see them as they see any sandbox's. No host services: the gateway's address maps
    // to that namespace's own loopback, where nothing listens.
    a.insert(a.end(),
             {"-netdev", "user,id=net0,net=10.0.2.0/24,ipv6-net=fd00:a1::/64,ipv6-host=fd00:a1::2",
              "-device", "virtio-net-device,netdev=net0"});
  }
  if (b.runas_uid >= 0)
    a.insert(a.end(), {"-runas", std::to_string(b.runas_uid) + ":" + std::to_string(b.runas_gid)});
  return a;
}

Result<Running> bootVm(const Boot& boot, const Launch& launch) {
  int status[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, status) != 0)
    return sysError("socketpair", "status port");
  UniqueFd status_ours(status[0]), status_theirs(status[1]);
  int events[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, events) != 0)
    return sysError("socketpair", "events port");
  UniqueFd events_ours(events[0]), events_theirs(events[1]);
  UniqueFd qmp_ours, qmp_theirs;
  if (boot.qmp_socket.empty()) {
    int qmp[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, qmp) != 0)
      return sysError("socketpair", "qmp");
    qmp_ours.reset(qmp[0]);
    qmp_theirs.reset(qmp[1]);
  } else {
    auto listening = listenAt(boot.qmp_socket);
    if (!listening) return Unexpected(listening.error());
    qmp_theirs = std::move(*listening);
    auto connected = connectTo(boot.qmp_socket);
    if (!connected) return Unexpected(connected.error());
    qmp_ours = std::move(*connected);
  }
  UniqueFd incoming;
  if (!launch.restore_from.empty()) {
    incoming.reset(::open(launch.restore_from.c_str(), O_RDONLY | O_CLOEXEC));
    if (!incoming) return sysError("open", launch.restore_from);
  }
  UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!null) return sysError("open", "/dev/null");
  // Fresh files per boot: the tails in an error are this boot's.
  ::unlink(boot.console_log.c_str());
  UniqueFd out(boot.qemu_log.empty()
                   ? ::open("/dev/null", O_WRONLY | O_CLOEXEC)
                   : ::open(boot.qemu_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!out) return sysError("open", boot.qemu_log);

  MonitorSpawn m;
  m.argv = qemuArgv(boot);
  if (incoming) m.argv.insert(m.argv.end(), {"-incoming", "fd:" + std::to_string(kIncomingFd)});
  m.fds = {{null.get(), 0},
           {out.get(), 1},
           {out.get(), 2},
           {launch.agent_channel_fd, kAgentFd},
           {status_theirs.get(), kStatusFd},
           {events_theirs.get(), kEventsFd},
           {qmp_theirs.get(), kQmpFd}};
  if (incoming) m.fds.push_back({incoming.get(), kIncomingFd});
  m.cgroup_v2_fd = launch.cgroup_v2_fd;
  m.attach_cgroups = launch.attach_cgroups;
  m.attach_ctx = launch.attach_ctx;
  m.netns_fd = launch.netns_fd;
  m.file_size_limit = kConsoleCapBytes;
  if (!boot.workspace_image.empty()) {
    // RLIMIT_FSIZE refuses any write past the limit's offset, so the workspace's disk needs it at
    // its size: the console and QEMU's log may then grow as large (the workspace's own quota).
    struct stat st {};
    if (::stat(boot.workspace_image.c_str(), &st) != 0)
      return sysError("stat", boot.workspace_image);
    m.file_size_limit = std::max<rlim_t>(kConsoleCapBytes, static_cast<rlim_t>(st.st_size));
  }
  // QEMU writes the guest's files into a writable share: each up to the sandbox's own file
  // size limit, and the logs may then grow as large (as with a workspace's disk).
  if (std::any_of(boot.shares.begin(), boot.shares.end(),
                  [](const Share& s) { return s.writable; }))
    m.file_size_limit =
        std::max<rlim_t>(m.file_size_limit, static_cast<rlim_t>(boot.share_file_bytes));
  m.name = "microvm";
  auto spawned = spawnMonitor(m);
  if (!spawned) return Unexpected(spawned.error());
  out.reset();
  status_theirs.reset();
  events_theirs.reset();
  qmp_theirs.reset();
  incoming.reset();

  Running r;
  r.pid = spawned->pid;
  r.pidfd = std::move(spawned->pidfd);
  const std::string_view ready(protocol::kAgentReadyLine, sizeof protocol::kAgentReadyLine - 1);
  const std::string_view paused = "airlock-vm-init: paused\n";
  // errnum ETIMEDOUT marks the one failure worth another try (the boot watchdog's).
  auto failure = [&](const std::string& why, int errnum = 0) -> Result<Running> {
    reap(r.pid, r.pidfd.get());
    std::string text = why;
    if (auto q = boot.qemu_log.empty() ? "" : fileTail(boot.qemu_log, 8); !q.empty())
      text += "; qemu: " + q;
    if (auto s = oneLine(r.said); !s.empty()) text += "; guest: " + s;
    if (auto c = fileTail(boot.console_log, 8); !c.empty()) text += "; console: " + c;
    return Unexpected(Error(text, "", errnum));
  };
  // The guest waits at its pause point for this line (guest/init.cc): a restored guest has
  // been waiting since its snapshot was taken, so it goes at once.
  auto go = [&]() -> Result<> {
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    unsigned char seed[32];
    if (::getrandom(seed, sizeof seed, 0) != static_cast<ssize_t>(sizeof seed))
      return sysError("getrandom", "the guest's entropy");
    char hex[2 * sizeof seed + 1];
    for (size_t i = 0; i < sizeof seed; ++i) std::snprintf(hex + 2 * i, 3, "%02x", seed[i]);
    std::string line = "go " + std::to_string(now.tv_sec) + " " + std::to_string(now.tv_nsec) +
                       " " + boot.hostname + " " + hex + " " +
                       std::to_string(boot.reattach_grace_ms);
    // Then each share's place, in device order: 'r' or 'w' and the path, in hex (a path may
    // hold any byte but NUL).
    for (const auto& s : boot.shares) {
      line += s.writable ? " w" : " r";
      for (unsigned char c : s.as) {
        char two[3];
        std::snprintf(two, sizeof two, "%02x", c);
        line += two;
      }
    }
    line += "\n";
    if (::send(status_ours.get(), line.data(), line.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(line.size()))
      return sysError("send", "the go line");
    return {};
  };
  bool waiting_for_pause = true;
  if (!launch.restore_from.empty()) {
    // Not before the guest runs: until the snapshot is loaded, its port does not take input.
    Qmp q(qmp_ours.get());
    if (auto running = awaitRunning(q, launch.deadline); !running)
      return failure("resuming the snapshot: " + running.error().message(),
                     running.error().errnum());
    if (auto g = go(); !g) return failure(g.error().message());
    waiting_for_pause = false;
  }
  bool status_open = true;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        launch.deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return failure(waiting_for_pause ? "the guest did not reach its pause point in time"
                                       : "the guest did not reach the agent's handshake in time",
                     ETIMEDOUT);
    pollfd p[2] = {{status_open ? status_ours.get() : -1, POLLIN, 0}, {r.pidfd.get(), POLLIN, 0}};
    int n = ::poll(p, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return failure(std::string("poll: ") + std::strerror(errno));
    if (n == 0) continue;
    if ((p[0].revents & (POLLIN | POLLHUP)) != 0) {
      char buf[4096];
      ssize_t got = ::read(status_ours.get(), buf, sizeof buf);
      if (got > 0) {
        r.said.append(buf, static_cast<size_t>(got));
        if (auto at = r.said.find(paused); waiting_for_pause && at != std::string::npos) {
          r.said.erase(at, paused.size());
          waiting_for_pause = false;
          if (!launch.snapshot_to.empty()) {
            Qmp q(qmp_ours.get());
            auto saved = q.handshake(launch.deadline);
            auto bytes = saved ? saveSnapshot(q, launch.snapshot_to, launch.deadline)
                               : Result<uint64_t>(Unexpected(saved.error()));
            if (bytes)
              r.snapshot_bytes = *bytes;
            else
              r.snapshot_error = bytes.error().message();
          }
          if (auto g = go(); !g) return failure(g.error().message());
        }
        if (auto at = r.said.find(ready); !waiting_for_pause && at != std::string::npos) {
          r.said.erase(at);
          break;
        }
        if (r.said.size() > 16384) r.said.erase(0, r.said.size() - 16384);
      } else if (got == 0) {
        status_open = false;  // QEMU let go of the port: its exit follows on the pidfd
      }
    }
    if ((p[1].revents & POLLIN) != 0) {
      // QEMU is gone: a bad argument, a missing file, a snapshot it cannot load, or the guest
      // powered off (init failed).
      int st = 0;
      ::waitpid(r.pid, &st, WNOHANG);
      return failure(WIFSIGNALED(st)
                         ? "qemu was killed by signal " + std::to_string(WTERMSIG(st))
                         : "qemu exited with status " + std::to_string(WEXITSTATUS(st)) +
                               " before the agent was ready");
    }
  }
  r.events = std::move(events_ours);
  return r;
}

Result<Reconnected> reconnectPorts(const std::string& qmp_socket,
                                   std::chrono::steady_clock::time_point deadline) {
  auto monitor = connectTo(qmp_socket);
  if (!monitor) return Unexpected(monitor.error());
  Qmp q(monitor->get());
  if (auto r = q.handshake(deadline); !r) return Unexpected(r.error());
  Reconnected out;
  for (const char* port : {"agent", "events"}) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0)
      return sysError("socketpair", std::string(port) + " port");
    UniqueFd ours(pair[0]), theirs(pair[1]);
    const std::string name = std::string("airlock-") + port;
    if (auto r = q.execute(R"({"execute":"getfd","arguments":{"fdname":")" + name + R"("}})",
                           deadline, theirs.get());
        !r)
      return Unexpected(
          std::move(r.error()).wrap(std::string("qmp getfd for the ") + port + " port"));
    // The supervisor's end of the agent's channel blocks like the one start() gets.
    if (std::string_view(port) == "agent")
      ::fcntl(ours.get(), F_SETFL, ::fcntl(ours.get(), F_GETFL) & ~O_NONBLOCK);
    const std::string change =
        R"({"execute":"chardev-change","arguments":{"id":")" + std::string(port) +
        R"(","backend":{"type":"socket","data":{"addr":{"type":"fd","data":{"str":")" + name +
        R"("}},"server":false}}}})";
    if (auto r = q.execute(change, deadline); !r)
      return Unexpected(
          std::move(r.error()).wrap(std::string("qmp chardev-change for the ") + port + " port"));
    (std::string_view(port) == "agent" ? out.agent_channel : out.events) = std::move(ours);
  }
  return out;
}

Result<double> probeBoot(const Boot& boot, std::chrono::milliseconds limit) {
  Boot b = boot;
  b.marker = true;
  b.console_log.clear();  // the console is QEMU's stdout, which runBounded collects
  const auto t0 = std::chrono::steady_clock::now();
  auto r = runBounded(qemuArgv(b), limit);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r) return Unexpected(r.error());
  if (r->out.find("airlock-vm-init: marker") != std::string::npos) return s;
  if (r->timed_out)
    return fail("no marker within " + std::to_string(limit.count()) + " ms" +
                (r->out.empty() ? std::string() : ": " + oneLine(r->out).substr(0, 300)));
  std::string out = oneLine(r->out);
  if (out.size() > 300) out = "..." + out.substr(out.size() - 300);
  return fail("qemu exited with status " + std::to_string(r->status) + " before the marker" +
              (out.empty() ? std::string() : ": " + out));
}

}  // namespace airlock::isolation::microvm
