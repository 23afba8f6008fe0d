// Floors for B4 (docs/performance.md): how many "create an isolated process, run `true`, tear it
// down" cycles per second this host's kernel allows at all, measured side by side with bwrap's
// loop. No sandbox that starts a process per cycle can beat the first row; none that puts a
// PID 1 of its own in front of the program (as airlock-agent is) can beat the third.
//
//   airlock_floor_bench [--seconds S] [--procs N] [--min-pid1 PATH]
//
// Each row runs N loops in parallel (default: one per CPU) for S seconds (default 10):
//   fork + exec true             a plain child, no isolation
//   clone3, 7 namespaces + true  new user, pid, mount, net, ipc, uts and cgroup namespaces
//   ... + static PID 1 + true    the same, exec'ing airlock_min_pid1, which spawns true
//   bwrap --unshare-all ... true the comparison B4 uses (bench/service_bench.py)
// Needs root or unprivileged user namespaces. Every child is waited for; namespaces end with
// their last process, so nothing is left behind.
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

constexpr uint64_t kAllNamespaces = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET |
                                    CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;

// One cycle: a child made with clone3(flags) execs argv; true when it exited 0.
bool cycle(uint64_t flags, const std::vector<char*>& argv) {
  clone_args args{};
  args.flags = flags;
  args.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) {
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (pid < 0) return false;
  int status = 0;
  while (waitpid(static_cast<pid_t>(pid), &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Cycles per second of `procs` loops running in parallel for `seconds`; -1 if a cycle failed.
double loop(uint64_t flags, const std::vector<std::string>& command, int procs, double seconds) {
  std::vector<std::string> words = command;
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  if (!cycle(flags, argv)) return -1;  // once, untimed: it must work before it is timed
  int counts[2];
  if (pipe(counts) != 0) return -1;
  std::vector<pid_t> workers;
  const double end = now() + seconds;
  for (int i = 0; i < procs; ++i) {
    pid_t w = fork();
    if (w == 0) {
      long n = 0;
      while (now() < end) {
        if (!cycle(flags, argv)) {
          n = -1;
          break;
        }
        ++n;
      }
      ssize_t r = write(counts[1], &n, sizeof n);
      _exit(r == sizeof n ? 0 : 1);
    }
    if (w > 0) workers.push_back(w);
  }
  close(counts[1]);
  long total = 0;
  bool failed = workers.size() != static_cast<size_t>(procs);
  for (size_t i = 0; i < workers.size(); ++i) {
    long n = 0;
    if (read(counts[0], &n, sizeof n) != sizeof n || n < 0) failed = true;
    total += n;
  }
  close(counts[0]);
  for (pid_t w : workers) {
    int status;
    while (waitpid(w, &status, 0) < 0 && errno == EINTR) {
    }
  }
  return failed ? -1 : static_cast<double>(total) / seconds;
}

std::string besideSelf(const char* name) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return name;
  std::string dir(self, static_cast<size_t>(n));
  return dir.substr(0, dir.rfind('/') + 1) + name;
}

std::string which(const char* program) {
  for (const char* dir : {"/usr/bin", "/bin", "/usr/local/bin"}) {
    std::string path = std::string(dir) + "/" + program;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10;
  long procs = sysconf(_SC_NPROCESSORS_ONLN);
  std::string min_pid1 = besideSelf("airlock_min_pid1");
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (a == "--procs" && i + 1 < argc) {
      procs = std::atol(argv[++i]);
    } else if (a == "--min-pid1" && i + 1 < argc) {
      min_pid1 = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: airlock_floor_bench [--seconds S] [--procs N] [--min-pid1 PATH]\n");
      return 2;
    }
  }
  if (seconds <= 0 || procs < 1) {
    std::fprintf(stderr, "floor: --seconds and --procs must be positive\n");
    return 2;
  }
  const std::string truth = which("true");
  if (truth.empty()) {
    std::fprintf(stderr, "floor: no true(1) in /usr/bin, /bin or /usr/local/bin\n");
    return 2;
  }
  const std::string bwrap = which("bwrap");
  struct Row {
    const char* name;
    uint64_t flags;
    std::vector<std::string> command;
    std::string unavailable;
    double rate = -1;
  };
  std::vector<Row> rows = {
      {"fork + exec true", 0, {truth}, ""},
      {"clone3, 7 namespaces + true", kAllNamespaces, {truth}, ""},
      {"... + static PID 1 + true",
       kAllNamespaces,
       {min_pid1, truth},
       access(min_pid1.c_str(), X_OK) == 0 ? "" : "no " + min_pid1},
      {"bwrap --unshare-all ... true",
       0,
       {bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev",
        "--proc", "/proc", "--tmpfs", "/tmp", "--", truth},
       bwrap.empty() ? "bwrap is not installed" : ""},
  };
  std::printf("Floors for B4: cycles of create -> true -> destroy, %ld loops for %.0f s each\n",
              procs, seconds);
  bool failed = false;
  for (auto& row : rows) {
    if (!row.unavailable.empty()) continue;
    row.rate = loop(row.flags, row.command, static_cast<int>(procs), seconds);
    if (row.rate < 0) {
      row.unavailable = "a cycle failed (no user namespaces here?)";
      failed = true;
    }
  }
  const double bwrap_rate = rows.back().rate;
  std::printf("%-30s %12s %9s\n", "loop", "cycles/s", "x bwrap");
  for (const auto& row : rows) {
    if (!row.unavailable.empty()) {
      std::printf("%-30s %12s %9s  (%s)\n", row.name, "-", "-", row.unavailable.c_str());
    } else if (bwrap_rate > 0) {
      std::printf("%-30s %12.1f %9.2f\n", row.name, row.rate, row.rate / bwrap_rate);
    } else {
      std::printf("%-30s %12.1f %9s\n", row.name, row.rate, "-");
    }
  }
  if (rows[2].rate > 0)
    std::printf("B4 target: airlock's cold cycle >= 0.6x the static PID 1 row = %.1f cycles/s\n",
                0.6 * rows[2].rate);
  return failed ? 1 : 0;
}
