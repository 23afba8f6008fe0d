// B6: what eBPF auditing costs a syscall-heavy Python workload (docs/performance.md).
//
// Runs bench/b6_workload.py in a cgroup v2 directory, round-robin in three modes, and prints
// the median wall time of each:
//   off      no audit engine loaded at all;
//   audit    engine loaded and attached: exec, connect/sendmsg (policy open, loopback allowed by
//            a rule), cgroup_skb bytes: what every sandbox gets;
//   +raw     the same plus the raw sys_enter per-syscall counter (opt-in, taxes the whole host).
// Interleaving the modes spreads the noise of a shared machine evenly over them.
//
// Usage (root): b6_audit [--rounds N] [--iterations N] [--execs N] [--connects N]
//                        [--python /usr/bin/python3] [--workload bench/b6_workload.py]
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "supervisor/audit/engine.h"
#include "supervisor/sys/cgroup.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace airlock;

struct Options {
  int rounds = 7;
  int iterations = 250000;  // × 4 syscalls ≈ 1e6 syscalls
  int execs = 20;
  int connects = 200;
  std::string python = "/usr/bin/python3";
  std::string workload = AIRLOCK_B6_WORKLOAD;
};

// Wall seconds of one workload run inside `cg`, or a negative value on failure.
double runWorkload(const Options& o, sys::SandboxCgroup& cg) {
  std::string it = std::to_string(o.iterations), ex = std::to_string(o.execs),
              co = std::to_string(o.connects);
  const char* argv[] = {o.python.c_str(), o.workload.c_str(), it.c_str(),
                        ex.c_str(),       co.c_str(),         nullptr};
  int gate[2];
  if (::pipe2(gate, O_CLOEXEC) != 0) return -1;
  auto start = Clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(gate[1]);
    char c;
    if (::read(gate[0], &c, 1) != 1) ::_exit(120);
    ::execv(argv[0], const_cast<char**>(argv));
    ::_exit(127);
  }
  ::close(gate[0]);
  if (auto r = cg.attachAll(pid); !r) {
    std::cerr << "b6: " << r.error().message() << "\n";
    ::kill(pid, SIGKILL);
  }
  char go = 'g';
  if (::write(gate[1], &go, 1) != 1) ::kill(pid, SIGKILL);
  ::close(gate[1]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::cerr << "b6: workload failed (status " << status << ")\n";
    return -1;
  }
  return secs;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int run(const Options& o) {
  auto host = sys::CgroupHost::detect();
  if (!host || host->v2_mount.empty()) {
    std::cerr << "b6: needs cgroup2 mounted\n";
    return 1;
  }
  auto cg = sys::SandboxCgroup::create(*host, "b6-" + std::to_string(::getpid()), {});
  if (!cg) {
    std::cerr << "b6: " << cg.error().message() << "\n";
    return 1;
  }
  audit::NetPolicy net{audit::NetMode::kOpen, {*audit::NetRule::parse("allow tcp 127.0.0.1 *")}};
  std::vector<double> off, on, raw;
  audit::AuditSummary last_on, last_raw;
  for (int round = 0; round < o.rounds; ++round) {
    double t = runWorkload(o, *cg);
    if (t < 0) return 1;
    off.push_back(t);
    // The engine is loaded per round, outside the timed part, so "off" has no hook at all.
    auto engine = audit::AuditEngine::load();
    if (!engine) {
      std::cerr << "b6: " << engine.error().message() << "\n";
      return 1;
    }
    for (bool syscalls : {false, true}) {
      audit::AttachOptions a;
      a.cgroup_v2_path = cg->v2Path();
      a.sandbox_id = cg->name();
      a.network = net;
      a.count_syscalls = syscalls;
      auto handle = (*engine)->attach(a);
      if (!handle) {
        std::cerr << "b6: " << handle.error().message() << "\n";
        return 1;
      }
      (*handle)->beginExecution("b6");
      t = runWorkload(o, *cg);
      auto summary = (*handle)->endExecution();
      if (t < 0 || !summary) return 1;
      (syscalls ? raw : on).push_back(t);
      (syscalls ? last_raw : last_on) = *summary;
    }
    std::fprintf(stderr, "round %d: off %.3f s, audit %.3f s, +raw %.3f s\n", round + 1, off.back(),
                 on.back(), raw.back());
  }
  if (auto r = cg->destroy(std::chrono::seconds(5)); !r) {
    std::cerr << "b6: " << r.error().message() << "\n";
  }
  double m_off = median(off), m_on = median(on), m_raw = median(raw);
  uint64_t syscalls = 0;
  for (const auto& [name, n] : last_raw.syscalls) syscalls += n;
  std::printf(
      "B6 audit cost: %d rounds, workload = %d×(stat+open+read+close), %d execs, "
      "%d connects of 10 kB each way\n\n",
      o.rounds, o.iterations, o.execs, o.connects);
  // Overhead of medians, and of minimums: on a shared machine the fastest run of each mode is
  // the one least disturbed by neighbours.
  double min_off = *std::min_element(off.begin(), off.end());
  std::printf("%-34s %10s %10s %10s %11s %11s\n", "mode", "median s", "min s", "max s", "overhead",
              "(of mins)");
  auto row = [&](const char* name, const std::vector<double>& v) {
    double m = median(v), lo = *std::min_element(v.begin(), v.end());
    std::printf("%-34s %10.3f %10.3f %10.3f %+10.1f%% %+10.1f%%\n", name, m, lo,
                *std::max_element(v.begin(), v.end()), (m / m_off - 1) * 100,
                (lo / min_off - 1) * 100);
  };
  row("off (no eBPF)", off);
  row("audit: exec+connect+bytes", on);
  row("audit + raw sys_enter counts", raw);
  std::printf(
      "\nrecorded per run (audit): %llu processes, %llu connections allowed, "
      "%llu denied, %llu bytes sent, %llu received, %llu dropped\n",
      (unsigned long long)last_on.processes_started,
      (unsigned long long)last_on.connections_allowed,
      (unsigned long long)last_on.connections_denied, (unsigned long long)last_on.bytes_sent,
      (unsigned long long)last_on.bytes_received, (unsigned long long)last_on.events_dropped);
  std::printf("recorded per run (+raw): %llu syscalls counted, %llu dropped\n",
              (unsigned long long)syscalls, (unsigned long long)last_raw.events_dropped);
  double target = 3.0;
  double over = (m_on / m_off - 1) * 100;
  std::printf(
      "\nB6 target: audit overhead <= %.0f%%: %s (%.1f%%); raw mode is opt-in and "
      "reported separately (%.1f%%)\n",
      target, over <= target ? "met" : "NOT met", over, (m_raw / m_off - 1) * 100);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "b6: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--rounds")
      o.rounds = std::atoi(next().c_str());
    else if (a == "--iterations")
      o.iterations = std::atoi(next().c_str());
    else if (a == "--execs")
      o.execs = std::atoi(next().c_str());
    else if (a == "--connects")
      o.connects = std::atoi(next().c_str());
    else if (a == "--python")
      o.python = next();
    else if (a == "--workload")
      o.workload = next();
    else {
      std::cerr << "b6: unknown option " << a
                << " (--rounds, --iterations, --execs, --connects, --python, --workload)\n";
      return 2;
    }
  }
  if (o.rounds < 1) {
    std::cerr << "b6: --rounds must be at least 1\n";
    return 2;
  }
  return run(o);
}
