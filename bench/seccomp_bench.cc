// What installing the sandbox's seccomp program costs each program started: the kernel checks the
// classic BPF, converts it and JIT-compiles it on every seccomp(SECCOMP_SET_MODE_FILTER). The
// range-tree layout airlock uses, side by side with libseccomp's own layout of the same profile
// and with a two-instruction program (the fixed cost of any filter), interleaved in one run.
//
//   airlock_seccomp_bench [--rounds N]   (default 400 per row)
//
// Each round forks a child that sets no_new_privs, times the seccomp() call alone with
// CLOCK_MONOTONIC and reports it through a pipe. Needs no privileges.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "supervisor/sys/seccomp_filter.h"

namespace {

double nowUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// Microseconds one seccomp() install of `bpf` took in a fresh child; -1 on failure.
double installOnce(const std::string& bpf) {
  int p[2];
  if (::pipe(p) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    sock_fprog prog{static_cast<unsigned short>(bpf.size() / sizeof(sock_filter)),
                    reinterpret_cast<sock_filter*>(const_cast<char*>(bpf.data()))};
    double us = -1;
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0) {
      double t0 = nowUs();
      if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0) us = nowUs() - t0;
    }
    (void)!::write(p[1], &us, sizeof us);
    ::_exit(0);
  }
  ::close(p[1]);
  double us = -1;
  if (pid < 0 || ::read(p[0], &us, sizeof us) != sizeof us) us = -1;
  ::close(p[0]);
  if (pid > 0) ::waitpid(pid, nullptr, 0);
  return us;
}

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 400;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--rounds N]\n", argv[0]);
      return 2;
    }
  }
  using airlock::sys::SeccompCodegen;
  auto tree = airlock::sys::buildSeccompFilter({}, SeccompCodegen::kRangeTree);
  auto lib = airlock::sys::buildSeccompFilter({}, SeccompCodegen::kLibseccompOnly);
  if (!tree || !lib) {
    std::fprintf(stderr, "compile: %s\n", (!tree ? tree.error() : lib.error()).message().c_str());
    return 1;
  }
  sock_filter allow[] = {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
                         BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  std::string trivial(reinterpret_cast<const char*>(allow), sizeof allow);

  struct Row {
    const char* name;
    const std::string* bpf;
    std::vector<double> us;
  } rows[] = {{"range tree (airlock)", &*tree, {}},
              {"libseccomp layout", &*lib, {}},
              {"2-instruction program", &trivial, {}}};
  for (int r = 0; r < rounds; ++r) {
    for (auto& row : rows) {
      double us = installOnce(*row.bpf);
      if (us < 0) {
        std::fprintf(stderr, "seccomp install failed (%s)\n", row.name);
        return 1;
      }
      row.us.push_back(us);
    }
  }
  std::printf("seccomp install per program started, %d interleaved rounds\n", rounds);
  std::printf("%-24s %8s %10s %10s %12s\n", "program", "insns", "p50 us", "p90 us", "x libseccomp");
  const double lib_p50 = pct(rows[1].us, 50);
  for (const auto& row : rows) {
    std::printf("%-24s %8zu %10.1f %10.1f %12.2f\n", row.name,
                row.bpf->size() / sizeof(sock_filter), pct(row.us, 50), pct(row.us, 90),
                pct(row.us, 50) / lib_p50);
  }
  return 0;
}
