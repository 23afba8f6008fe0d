#include "supervisor/sandbox/workspace_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "airlock/unique_fd.h"

extern char** environ;

namespace airlock::sandbox {

namespace {

constexpr const char* kSuffix = ".ext4";

// Tenant names come from policy keys and may hold anything; a path component must not.
std::string pathComponent(const std::string& s) {
  bool plain = !s.empty() && s.size() <= 64;
  for (char c : s)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-');
  if (plain) return s;
  std::string hex = "x-";
  char b[3];
  for (unsigned char c : s) {
    std::snprintf(b, sizeof b, "%02x", c);
    hex += b;
  }
  return hex;
}

Result<> ensureDir(const std::string& path) {
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return sysError("mkdir", path);
  return {};
}

const char* mkfsPath() {
  for (const char* p : {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"})
    if (access(p, X_OK) == 0) return p;
  return nullptr;
}

// mkfs.ext4 of a sparse file: ≈ 15 ms, and it takes disk only as files are written.
Result<> makeImage(const std::string& path, uint64_t size_bytes) {
  const char* mkfs = mkfsPath();
  if (mkfs == nullptr) return fail("mkfs.ext4 not found (install e2fsprogs)", path);
  {
    UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) return sysError("create", path);
    if (ftruncate(fd.get(), static_cast<off_t>(size_bytes)) != 0) return sysError("truncate", path);
  }
  // No reserved blocks: the quota is all the sandbox's. The journal keeps the files intact
  // through a crash of the host.
  const char* argv[] = {mkfs, "-q", "-F", "-m", "0", "-L", "airlock-ws", path.c_str(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, mkfs, &actions, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    errno = rc;
    return sysError("spawn mkfs.ext4", path);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return fail("mkfs.ext4 failed with status " + std::to_string(status), path);
  return {};
}

}  // namespace

std::string WorkspaceStore::tenantDir(const std::string& tenant) const {
  return root_ + "/" + pathComponent(tenant);
}

Result<std::string> WorkspaceStore::imageFor(const std::string& tenant, const std::string& name,
                                             uint64_t size_bytes) {
  // The policy's state_dir may not exist yet on a fresh host: make it, then keep the
  // workspaces themselves root-only.
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(root_).parent_path(), ec);
  if (ec) return fail("mkdir: " + ec.message(), root_);
  if (auto r = ensureDir(root_); !r) return Unexpected(r.error());
  std::string dir = tenantDir(tenant);
  if (auto r = ensureDir(dir); !r) return Unexpected(r.error());
  std::string path = dir + "/" + name + kSuffix;
  if (access(path.c_str(), F_OK) == 0) return path;
  // Made under a temporary name and renamed, so a crash never leaves a half-made image behind
  // under the real name.
  std::string tmp = dir + "/.new-" + std::to_string(getpid()) + "-" + name + kSuffix;
  unlink(tmp.c_str());
  if (auto r = makeImage(tmp, size_bytes); !r) {
    unlink(tmp.c_str());
    return Unexpected(std::move(r.error()).wrap("workspace '" + name + "'"));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    auto e = sysError("rename", path);
    unlink(tmp.c_str());
    return e;
  }
  return path;
}

int WorkspaceStore::removeHalfMade() const {
  int removed = 0;
  std::error_code ec;
  for (auto t = std::filesystem::directory_iterator(root_, ec);
       !ec && t != std::filesystem::directory_iterator(); t.increment(ec)) {
    std::error_code tec;
    for (auto f = std::filesystem::directory_iterator(t->path(), tec);
         !tec && f != std::filesystem::directory_iterator(); f.increment(tec)) {
      // .new-<pid>-<name>.ext4 (imageFor), of a pid that no longer runs: a live one may be
      // making it right now (another airlock process sharing the state directory).
      const std::string file = f->path().filename().string();
      if (!file.starts_with(".new-") || !file.ends_with(kSuffix)) continue;
      const pid_t pid = static_cast<pid_t>(std::strtol(file.c_str() + 5, nullptr, 10));
      if (pid <= 0 || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;
      if (unlink(f->path().c_str()) == 0) ++removed;
    }
  }
  return removed;
}

Result<std::vector<WorkspaceInfo>> WorkspaceStore::list(const std::string& tenant) const {
  std::vector<WorkspaceInfo> out;
  std::string dir = tenantDir(tenant);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;
    return sysError("opendir", dir);
  }
  while (dirent* e = readdir(d)) {
    std::string file = e->d_name;
    if (file.front() == '.' && file.starts_with(".new-")) continue;
    if (file == "." || file == ".." || !file.ends_with(kSuffix)) continue;
    std::string path = dir + "/" + file;
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    WorkspaceInfo w;
    w.name = file.substr(0, file.size() - std::string_view(kSuffix).size());
    w.size_bytes = static_cast<uint64_t>(st.st_size);
    w.used_bytes = static_cast<uint64_t>(st.st_blocks) * 512;
    w.modified_at = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    w.in_use = fd && flock(fd.get(), LOCK_SH | LOCK_NB) != 0;
    out.push_back(std::move(w));
  }
  closedir(d);
  return out;
}

Result<> WorkspaceStore::remove(const std::string& tenant, const std::string& name) {
  std::string path = tenantDir(tenant) + "/" + name + kSuffix;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return sysError("open", path);
  // Unlinked while we hold the lock: a sandbox starting now either has it already (refused
  // here) or finds no image and makes a fresh one.
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    errno = EBUSY;
    return sysError("remove", path);
  }
  if (unlink(path.c_str()) != 0) return sysError("unlink", path);
  return {};
}

}  // namespace airlock::sandbox
