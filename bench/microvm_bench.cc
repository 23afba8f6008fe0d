// B7, microVM boot (docs/performance.md): QEMU's start to the agent's handshake, as the backend
// boots a sandbox (kernel, initramfs, the /usr and root images, virtio-serial ports), against
// the floor: a bare QEMU boot of the same kernel and initramfs to a marker printed by the
// first instruction of /init (target: boot ≤ 1.2× the floor); and a sandbox resumed from a
// snapshot of a booted guest (snapshot.h), as the backend starts every sandbox after the first
// of a configuration. Also the idle host memory of a booted and of a resumed VM. Interleaved
// rounds in one run, so all sides see the same machine.
//
// Usage: airlock_microvm_bench [--rounds N] [--accel tcg|kvm] [--memory-mb M]
// Needs root (the cache under /var/cache/airlock/microvm is root's) and `airlock image prepare`.
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "airlock/policy/microvm.h"
#include "artifacts.h"
#include "vm.h"

namespace mvm = airlock::isolation::microvm;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

double rssMib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("VmRSS:")) return std::strtod(line.c_str() + 6, nullptr) / 1024;
  return 0;
}

std::string agentPath() {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string exe(self, n > 0 ? static_cast<size_t>(n) : 0);
  // build/bench/airlock_microvm_bench → build/libexec/airlock/airlock-agent
  return exe.substr(0, exe.rfind("/bench/")) + "/libexec/airlock/airlock-agent";
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  uint64_t memory_mb = 512;
  std::string accel = "tcg";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc)
      rounds = std::atoi(argv[++i]);
    else if (a == "--accel" && i + 1 < argc)
      accel = argv[++i];
    else if (a == "--memory-mb" && i + 1 < argc)
      memory_mb = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr,
                   "usage: airlock_microvm_bench [--rounds N] [--accel tcg|kvm] [--memory-mb M]\n");
      return 2;
    }
  }
  const airlock::policy::Microvm defaults;
  const std::string agent = agentPath();
  auto kernel = mvm::prepareKernel(defaults.cache_dir, "");
  if (!kernel) return std::fprintf(stderr, "b7: %s\n", kernel.error().message().c_str()), 1;
  auto initramfs =
      mvm::prepareInitramfs(defaults.cache_dir, *kernel, mvm::initBesideAgent(agent), agent);
  if (!initramfs) return std::fprintf(stderr, "b7: %s\n", initramfs.error().message().c_str()), 1;
  auto usr = mvm::prepareDirectoryImage(defaults.cache_dir, "/usr");
  if (!usr) return std::fprintf(stderr, "b7: %s\n", usr.error().message().c_str()), 1;
  mvm::RootSpec rs;
  rs.copied = {"/etc/ld.so.cache", "/etc/alternatives"};
  rs.etc_files = {{"passwd", "root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n"},
                  {"hostname", "sandbox\n"}};
  rs.mount_points = {"/home/user", "/tmp", "/dev", "/proc", "/sys", "/run", "/usr"};
  auto root = mvm::prepareRootImage(defaults.cache_dir, rs);
  if (!root) return std::fprintf(stderr, "b7: %s\n", root.error().message().c_str()), 1;

  mvm::Boot b;
  b.qemu = defaults.qemu;
  b.accel = accel;
  b.memory_mb = memory_mb;
  b.vmlinux = kernel->vmlinux;
  b.initramfs = *initramfs;
  b.root_image = *root;
  b.images = {{*usr, "/usr"}};
  char dir[] = "/tmp/airlock-b7-microvm.XXXXXX";
  if (::mkdtemp(dir) == nullptr) return 1;
  b.console_log = std::string(dir) + "/console.log";
  b.qemu_log = std::string(dir) + "/qemu.log";

  // side 0: the floor; 1: a boot; 2: a resume from `snapshot`, which a first boot saves.
  const std::string snapshot = std::string(dir) + "/guest.vmstate";
  uint64_t snapshot_bytes = 0;
  auto start = [&](const mvm::Launch& proto, double& seconds, double& rss_mib) -> bool {
    int sp[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) return false;
    mvm::Launch l = proto;
    l.agent_channel_fd = sp[1];
    l.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    const auto t0 = std::chrono::steady_clock::now();
    auto vm = mvm::bootVm(b, l);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (vm) {
      snapshot_bytes = std::max(snapshot_bytes, vm->snapshot_bytes);
      if (!vm->snapshot_error.empty())
        std::fprintf(stderr, "b7: snapshot: %s\n", vm->snapshot_error.c_str());
      ::usleep(1000 * 1000);  // settled: the agent waits for its first frame
      rss_mib = rssMib(vm->pid);
      ::syscall(SYS_pidfd_send_signal, vm->pidfd.get(), SIGKILL, nullptr, 0);
      ::waitpid(vm->pid, nullptr, 0);
    } else {
      std::fprintf(stderr, "b7: boot: %s\n", vm.error().message().c_str());
    }
    ::close(sp[0]);
    ::close(sp[1]);
    return static_cast<bool>(vm);
  };
  {
    mvm::Launch save;
    save.snapshot_to = snapshot;
    double s = 0, m = 0;
    if (!start(save, s, m) || snapshot_bytes == 0) return 1;
  }
  std::vector<double> floor_s, boot_s, rss, resume_s, resume_rss;
  for (int r = 0; r < rounds; ++r) {
    std::vector<int> sides = {0, 1, 2};
    std::rotate(sides.begin(), sides.begin() + r % 3, sides.end());
    for (int side : sides) {
      if (side == 0) {
        auto s = mvm::probeBoot(b, std::chrono::seconds(60));
        if (!s) return std::fprintf(stderr, "b7: floor: %s\n", s.error().message().c_str()), 1;
        floor_s.push_back(*s);
        continue;
      }
      mvm::Launch l;
      if (side == 2) l.restore_from = snapshot;
      double s = 0, m = 0;
      if (!start(l, s, m)) return 1;
      (side == 1 ? boot_s : resume_s).push_back(s);
      (side == 1 ? rss : resume_rss).push_back(m);
    }
  }
  ::unlink(snapshot.c_str());
  ::unlink(b.console_log.c_str());
  ::unlink(b.qemu_log.c_str());
  ::rmdir(dir);
  const double base = median(floor_s);
  std::printf("B7 microVM boot, accel %s, -m %lluM, %d interleaved rounds (%ld CPUs)\n",
              accel.c_str(), static_cast<unsigned long long>(memory_mb), rounds,
              ::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("%-34s %10s %10s %10s %8s\n", "what", "median_s", "p10_s", "p90_s", "ratio");
  std::printf("%-34s %10.3f %10.3f %10.3f %8s\n", "bare qemu boot to /init's marker", base,
              pct(floor_s, 0.1), pct(floor_s, 0.9), "1.00");
  std::printf("%-34s %10.3f %10.3f %10.3f %8.2f\n", "airlock boot to agent handshake",
              median(boot_s), pct(boot_s, 0.1), pct(boot_s, 0.9), median(boot_s) / base);
  std::printf("%-34s %10.3f %10.3f %10.3f %8.2f\n", "airlock resume to agent handshake",
              median(resume_s), pct(resume_s, 0.1), pct(resume_s, 0.9), median(resume_s) / base);
  std::printf("snapshot: %.0f MiB; resume / boot: %.2f\n",
              static_cast<double>(snapshot_bytes) / (1 << 20), median(resume_s) / median(boot_s));
  std::printf(
      "idle VM host RSS: booted %.0f MiB, resumed %.0f MiB (QEMU, guest RAM touched, TCG "
      "cache)\n",
      median(rss), median(resume_rss));
  return 0;
}
