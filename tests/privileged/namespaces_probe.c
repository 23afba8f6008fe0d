/* Stand-in for airlock-agent in the namespaces plugin tests: a static program exec'd as the
 * sandbox's PID 1 that reports its view of the world on fd 3, one "key value" line each, ends
 * with "END", then waits for EOF on fd 3 and exits.
 *
 * argv[1] is echoed; argv[2..] are extra checks: read:PATH, write:PATH, exists:PATH,
 * readlink:PATH. argv[1] == "quick" skips the report (for timing runs). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

static FILE* out;

static const char* errname(int e) {
  const char* n = strerrorname_np(e);
  return n != NULL ? n : "E?";
}

static void statusLines(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == NULL) return;
  char line[512];
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "Uid:", 4) == 0 || strncmp(line, "Gid:", 4) == 0 ||
        strncmp(line, "Groups:", 7) == 0 || strncmp(line, "CapEff:", 7) == 0 ||
        strncmp(line, "SigBlk:", 7) == 0 || strncmp(line, "SigCgt:", 7) == 0)
      fprintf(out, "status %s", line);
  }
  fclose(f);
}

static void dumpFile(const char* key, const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    fprintf(out, "%s %s\n", key, errname(errno));
    return;
  }
  char line[1024];
  while (fgets(line, sizeof line, f) != NULL) fprintf(out, "%s %s", key, line);
  fclose(f);
}

static void listDir(const char* key, const char* path, int numeric_only) {
  DIR* d = opendir(path);
  if (d == NULL) {
    fprintf(out, "%s %s\n", key, errname(errno));
    return;
  }
  struct dirent* e;
  fprintf(out, "%s", key);
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (numeric_only && (e->d_name[0] < '0' || e->d_name[0] > '9')) continue;
    fprintf(out, " %s", e->d_name);
  }
  fprintf(out, "\n");
  closedir(d);
}

static void readCheck(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fprintf(out, "read %s %s\n", path, errname(errno));
    return;
  }
  char buf[256];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n < 0) {
    fprintf(out, "read %s %s\n", path, errname(errno));
    return;
  }
  buf[n] = '\0';
  for (ssize_t i = 0; i < n; ++i)
    if (buf[i] == '\n') buf[i] = '|';
  fprintf(out, "read %s OK:%zd:%s\n", path, n, buf);
}

static void writeCheck(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    fprintf(out, "write %s %s\n", path, errname(errno));
    return;
  }
  ssize_t n = write(fd, "probe\n", 6);
  int e = errno;
  close(fd);
  fprintf(out, "write %s %s\n", path, n == 6 ? "OK" : errname(e));
}

static void existsCheck(const char* path) {
  struct stat st;
  if (lstat(path, &st) != 0) {
    fprintf(out, "exists %s %s\n", path, errname(errno));
    return;
  }
  const char* type = S_ISDIR(st.st_mode)   ? "dir"
                     : S_ISLNK(st.st_mode) ? "link"
                     : S_ISCHR(st.st_mode) ? "chr"
                     : S_ISREG(st.st_mode) ? "file"
                                           : "other";
  fprintf(out, "exists %s %s:%o:%u:%u\n", path, type, st.st_mode & 07777, st.st_uid, st.st_gid);
}

static void readlinkCheck(const char* path) {
  char buf[512];
  ssize_t n = readlink(path, buf, sizeof buf - 1);
  if (n < 0) {
    fprintf(out, "readlink %s %s\n", path, errname(errno));
    return;
  }
  buf[n] = '\0';
  fprintf(out, "readlink %s %s\n", path, buf);
}

static void check(const char* c) {
  if (strncmp(c, "read:", 5) == 0)
    readCheck(c + 5);
  else if (strncmp(c, "write:", 6) == 0)
    writeCheck(c + 6);
  else if (strncmp(c, "exists:", 7) == 0)
    existsCheck(c + 7);
  else if (strncmp(c, "readlink:", 9) == 0)
    readlinkCheck(c + 9);
  else
    fprintf(out, "unknown %s\n", c);
}

static void loopback(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strcpy(ifr.ifr_name, "lo");
  if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0) {
    fprintf(out, "lo_up %s\n", errname(errno));
  } else {
    fprintf(out, "lo_up %d\n", (ifr.ifr_flags & IFF_UP) != 0);
  }
  if (s >= 0) close(s);
  listDir("netdevs", "/sys/class/net", 0);
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "quick") == 0) return 0;
  /* Listed before fdopen's dup: what the sandbox inherited, nothing of the probe's own. */
  char fds[256] = "";
  DIR* d = opendir("/proc/self/fd");
  struct dirent* e;
  while (d != NULL && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d)) continue;
    strncat(fds, " ", sizeof fds - strlen(fds) - 1);
    strncat(fds, e->d_name, sizeof fds - strlen(fds) - 1);
  }
  if (d != NULL) closedir(d);
  int fd = dup(3);
  out = fdopen(fd, "w");
  if (out == NULL) return 2;
  fprintf(out, "argv1 %s\n", argc > 1 ? argv[1] : "");
  fprintf(out, "pid %d\n", (int)getpid());
  fprintf(out, "path %s\n", getenv("PATH") != NULL ? getenv("PATH") : "");
  statusLines();
  struct utsname u;
  uname(&u);
  fprintf(out, "hostname %s\n", u.nodename);
  loopback();
  fprintf(out, "fds%s\n", fds);
  listDir("procpids", "/proc", 1);
  listDir("dev", "/dev", 0);
  dumpFile("mnt", "/proc/self/mountinfo");
  dumpFile("passwd", "/etc/passwd");
  const char* std_checks[] = {"exists:/etc/shadow",
                              "exists:/sys",
                              "exists:/proc/kcore",
                              "exists:/home/user",
                              "exists:/usr/bin",
                              "exists:/dev/null",
                              "exists:/dev/ptmx",
                              "exists:/dev/shm",
                              "readlink:/bin",
                              "readlink:/dev/ptmx",
                              "read:/proc/keys",
                              "read:/proc/timer_list",
                              "read:/etc/hostname",
                              "read:/dev/null",
                              "write:/probe",
                              "write:/usr/probe",
                              "write:/etc/probe",
                              "write:/dev/probe",
                              "write:/home/user/probe",
                              "write:/tmp/probe",
                              "write:/dev/shm/probe",
                              "write:/dev/null",
                              "write:/proc/sys/net/ipv4/ip_forward",
                              "write:/proc/sys/kernel/core_pattern",
                              "exists:/proc/acpi",
                              "read:/proc/acpi",
                              NULL};
  for (int i = 0; std_checks[i] != NULL; ++i) check(std_checks[i]);
  for (int i = 2; i < argc; ++i) check(argv[i]);
  fprintf(out, "END\n");
  fflush(out);
  char b;
  while (read(3, &b, 1) > 0) {
  }
  return 0;
}
