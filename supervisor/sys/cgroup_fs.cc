// The cgroupfs helpers both drivers and the sandbox handle share (cgroup_driver.h): control files,
// directories, and the processes of a subtree: listing, killing, waiting for them, removing it.
#include "supervisor/sys/cgroup_driver.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <thread>

namespace airlock::sys::cgroup_detail {

Result<> writeControl(const std::string& path, std::string_view value) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (!fd) return sysError("open", path);
  ssize_t n = ::write(fd.get(), value.data(), value.size());
  if (n < 0) return sysError("write(" + std::string(value) + ")", path);
  if (static_cast<size_t>(n) != value.size()) return fail("short write", path);
  return {};
}

Result<std::string> readControl(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sysError("open", path);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sysError("read", path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool fileExists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

std::optional<uint64_t> parseU64(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<uint64_t> keyedValue(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    size_t sp = line.find(' ');
    if (sp != std::string_view::npos && line.substr(0, sp) == key) {
      return parseU64(line.substr(sp + 1));
    }
  }
  return std::nullopt;
}

Result<> ensureDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return sysError("mkdir", path);
  return {};
}

Result<> makeCgroupDir(const std::string& path, const CgroupFakeKernel* fake) {
  // mkdir in cgroupfs creates a cgroup; the kernel populates its control files.
  if (::mkdir(path.c_str(), 0755) != 0) return sysError("mkdir", path);
  if (fake != nullptr && fake->after_mkdir) fake->after_mkdir(path);
  return {};
}

namespace {

template <typename F>
Result<> forEachSubdir(const std::string& dir, F&& f) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return {};
    return sysError("opendir", dir);
  }
  std::vector<std::string> subs;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st;
      is_dir =
          ::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    }
    if (is_dir) subs.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  for (const auto& s : subs) {
    if (auto r = f(s); !r) return r;
  }
  return {};
}

Result<> collectProcs(const std::string& dir, std::vector<pid_t>& out) {
  auto text = readControl(dir + "/cgroup.procs");
  if (!text) {
    if (text.error().errnum() == ENOENT) return {};
    return Unexpected(text.error());
  }
  std::string_view t = *text;
  while (!t.empty()) {
    size_t eol = t.find('\n');
    if (auto v = parseU64(t.substr(0, eol)); v && *v > 0) out.push_back(static_cast<pid_t>(*v));
    t = eol == std::string_view::npos ? std::string_view() : t.substr(eol + 1);
  }
  return forEachSubdir(dir, [&](const std::string& s) { return collectProcs(s, out); });
}

}  // namespace

Result<std::vector<pid_t>> listProcsRecursive(const std::string& dir) {
  std::vector<pid_t> out;
  if (auto r = collectProcs(dir, out); !r) return Unexpected(r.error());
  return out;
}

Result<> killLoop(const std::vector<std::string>& dirs) {
  for (int round = 0; round < 16; ++round) {
    bool any = false;
    for (const auto& dir : dirs) {
      auto pids = listProcsRecursive(dir);
      // Copied, not moved out of `pids`: GCC 12 inlines this file's small unit far enough to
      // report a false -Wfree-nonheap-object for the move.
      if (!pids) return Unexpected(pids.error().wrap("kill cgroup"));
      for (pid_t p : *pids) {
        // Only members of the sandbox's cgroup are signalled; ESRCH means it already exited.
        if (::kill(p, SIGKILL) == 0) any = true;
      }
    }
    if (!any) break;
  }
  return {};
}

void Backoff::wait() {
  std::this_thread::sleep_for(next_);
  next_ = std::min<std::chrono::microseconds>(next_ * 2, std::chrono::milliseconds(5));
}

Result<> waitProcsEmpty(const std::string& dir, Clock::time_point deadline) {
  Backoff backoff;
  for (;;) {
    auto pids = listProcsRecursive(dir);
    if (!pids) return Unexpected(pids.error());
    if (pids->empty()) return {};
    if (Clock::now() >= deadline) {
      return fail("processes still in cgroup after kill (" + std::to_string(pids->size()) + ")",
                  dir);
    }
    for (pid_t p : *pids) ::kill(p, SIGKILL);
    backoff.wait();
  }
}

Result<> removeTree(const std::string& dir, Clock::time_point deadline,
                    const CgroupFakeKernel* fake) {
  auto rmdir = [&] {
    return fake != nullptr && fake->rmdir ? fake->rmdir(dir) : ::rmdir(dir.c_str());
  };
  // A sandbox's cgroup has no children as a rule (its code cannot write cgroupfs), so rmdir
  // first and list the directory only when the kernel refuses: 5 syscalls less per hierarchy.
  if (rmdir() == 0 || errno == ENOENT) return {};
  if (errno != EBUSY && errno != ENOTEMPTY) return sysError("rmdir", dir);
  auto sub =
      forEachSubdir(dir, [&](const std::string& s) { return removeTree(s, deadline, fake); });
  if (!sub) return sub;
  Backoff backoff;
  for (;;) {
    // rmdir releases the cgroup; it fails with EBUSY while a dying task still pins it.
    if (rmdir() == 0 || errno == ENOENT) return {};
    if (errno != EBUSY || Clock::now() >= deadline) return sysError("rmdir", dir);
    backoff.wait();
  }
}

}  // namespace airlock::sys::cgroup_detail
