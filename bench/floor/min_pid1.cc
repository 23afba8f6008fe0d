// The least a sandbox's PID 1 can be: a static binary that spawns one program, waits for it and
// exits with its status. airlock's design has such a process (airlock-agent) between the
// supervisor and the program; timing bwrap with this in front of the program measures what that
// exec'd process costs by itself (bench/README.md "Floors").
//
//   airlock_min_pid1 PROGRAM [ARG...]
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    static const char kUsage[] = "usage: airlock_min_pid1 PROGRAM [ARG...]\n";
    ssize_t n = write(2, kUsage, sizeof kUsage - 1);
    (void)n;
    return 2;
  }
  pid_t pid = vfork();  // the cheapest spawn: no copy of page tables
  if (pid == 0) {
    execv(argv[1], argv + 1);
    _exit(127);
  }
  if (pid < 0) return 126;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
