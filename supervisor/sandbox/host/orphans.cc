#include "supervisor/sandbox/host/orphans.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "airlock/whole_file.h"
#include "supervisor/sandbox/host/host_mounts.h"
#include "supervisor/sandbox/host/sandbox.h"
#include "supervisor/sandbox/host/workspace_mount.h"
#include "supervisor/sys/cgroup.h"

namespace airlock::sandbox {

namespace {

std::string lockDir(const std::string& state_dir) { return state_dir + "/sandboxes"; }

// Temporary files of a process that died between making and renaming them: a sandbox's lock
// file (flock()ed by its maker from the start) and its journal (written only while the
// sandbox's lock is held).
void removeStaleTemporaries(const std::string& dir, const std::set<std::string>& live) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.front() != '.' || !name.ends_with(".new")) continue;
    const std::string path = dir + "/" + name;
    if (name.ends_with(".json.new")) {  // .<id>.json.new
      if (!live.contains(name.substr(1, name.size() - 10))) unlink(path.c_str());
      continue;
    }
    UniqueFd fd(open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));  // .<id>.new
    if (fd && flock(fd.get(), LOCK_EX | LOCK_NB) == 0) unlink(path.c_str());
  }
  closedir(d);
}

}  // namespace

Result<UniqueFd> lockSandbox(const std::string& state_dir, const std::string& id) {
  std::string dir = lockDir(state_dir);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return sysError("mkdir", dir);
  std::string tmp = dir + "/." + id + ".new";
  std::string path = dir + "/" + id + ".lock";
  UniqueFd fd(open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return sysError("open", tmp);
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return sysError("flock", tmp);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    auto e = sysError("rename", path);
    unlink(tmp.c_str());
    return e;
  }
  return fd;
}

void unlockSandbox(const std::string& state_dir, const std::string& id, UniqueFd lock) {
  // Unlink while still holding the lock, so nobody can lock the stale file in between.
  unlink((lockDir(state_dir) + "/" + id + ".json").c_str());
  unlink((lockDir(state_dir) + "/" + id + ".lock").c_str());
  lock.reset();
}

// The journal names the agent; it still waits for a supervisor while that very process lives.
bool agentAwaitsSupervisor(const std::string& dir, const std::string& id) {
  auto text = readWholeFile(dir + "/" + id + ".json");
  if (!text) return false;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object()) return false;
  auto pid = j.value("agent_pid", int64_t{0});
  auto start = j.value("agent_start_time", uint64_t{0});
  return pid > 0 && start != 0 && processStartTime(static_cast<pid_t>(pid)) == start;
}

std::set<std::string> liveSandboxes(const std::string& state_dir) {
  std::set<std::string> live;
  std::string dir = lockDir(state_dir);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return live;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (!name.ends_with(".lock") || name.front() == '.') continue;
    UniqueFd fd(open((dir + "/" + name).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
    // Taken through another open file, even one of this process: its holder lives.
    if (fd && flock(fd.get(), LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
      live.insert(name.substr(0, name.size() - 5));
  }
  closedir(d);
  return live;
}

Result<int> reclaimOrphans(const std::string& state_dir, Reclaim which) {
  std::string dir = lockDir(state_dir);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return errno == ENOENT ? Result<int>(0) : Result<int>(sysError("opendir", dir));
  int reclaimed = 0;
  Result<int> first_error = 0;
  std::optional<Result<sys::CgroupHost>> host;  // detected only when there is an orphan
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (!name.ends_with(".lock") || name.front() == '.') continue;
    std::string id = name.substr(0, name.size() - 5);
    std::string path = dir + "/" + name;
    UniqueFd fd(open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
    if (!fd || flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // alive, or just removed
    if (which == Reclaim::kSparingAdoptable && agentAwaitsSupervisor(dir, id)) continue;
    if (!host) host = sys::CgroupHost::detect();
    if (*host) {
      if (auto cg = sys::SandboxCgroup::adopt(**host, id); cg) {
        if (auto r = cg->destroy(std::chrono::seconds(5)); !r) {
          if (first_error) first_error = Unexpected(std::move(r.error()).wrap("orphan " + id));
          continue;  // keep the lock file: the next run tries again
        }
      }
    }
    // Its processes are gone: a persistent workspace it had mounted can go too (the image on
    // disk is kept; only the host mount and its loop device are released).
    unmountWorkspace(dir + "/" + id + ".home");
    // Host directories it was being given when its supervisor died mid-create.
    releaseStagedMounts(state_dir, id);
    // And so can its backend's files (plugin ABI 1.5: <scratch_dir>/<id>, plain files only).
    std::error_code ec;
    std::filesystem::remove_all(backendScratchDir(state_dir) + "/" + id, ec);
    unlockSandbox(state_dir, id, std::move(fd));
    ++reclaimed;
  }
  closedir(d);
  removeStaleTemporaries(dir, liveSandboxes(state_dir));
  if (!first_error) return first_error;
  return reclaimed;
}

}  // namespace airlock::sandbox
