// Plan: everything the child does after clone, prepared before clone.
//
// The child must not allocate, log or throw (the supervisor may be multi-threaded; after clone
// only async-signal-safe calls are allowed), so the parent turns the sandbox spec into a flat list
// of Steps whose strings it owns. The child walks the list in order (child.cc) and reports a
// failure as {stage, errno, step index}; the parent names the failed step from the same Plan.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include <airlock/result.h>
#include <airlock/unique_fd.h>

#include "stages.h"

namespace airlock::isolation {

enum class StepKind : uint8_t {
  kWaitParent,     // read one byte from the sync pipe: id maps and cgroups are in place
  kSetResGid,      // become gid 0 in the new user namespace
  kSetGroups,      // drop the supervisor's supplementary groups
  kSetResUid,      // become uid 0 in the new user namespace
  kMakePrivate,    // MS_REC|MS_PRIVATE on path: nothing propagates back to the host
  kOpenRoot,       // open(path, O_PATH): the new root, which later mount points are beneath
  kMount,          // mount(source, path, fstype, flags, data)
  kMoveMount,      // move_mount(fd, "", path): attach a tree the parent cloned with open_tree
  kSetAttr,        // mount_setattr(path, attr_set = flags, AT_RECURSIVE when mode != 0)
  kMkdir,          // mkdir(path, mode); an existing directory is fine
  kMkfile,         // an empty file at path as a mount point; an existing one is fine
  kSymlink,        // symlink(source, path)
  kWriteFile,      // path gets source[0..len), mode
  kPivotRoot,      // path becomes "/", the old root is detached
  kSetHostname,    // sethostname(source, len)
  kUnshareNetIpc,  // unshare(CLONE_NEWNET | CLONE_NEWIPC)
  kLoopbackUp,     // IFF_UP on "lo"
  kSetupFds,       // fd 3 = channel, 0..2 = /dev/null, everything else close-on-exec
  kExec,           // execveat(agent fd, "", argv, envp, AT_EMPTY_PATH)
};

struct Step {
  Stage stage;
  StepKind kind;
  const char* path = nullptr;
  const char* source = nullptr;
  const char* fstype = nullptr;
  const char* data = nullptr;
  unsigned long flags = 0;
  size_t len = 0;
  unsigned mode = 0;
  int fd = -1;
  // Set on mounts inside the new root (after kOpenRoot): path and source relative to the root,
  // which the child resolves with openBeneath (beneath.h) instead of by path.
  const char* rel = nullptr;
  const char* source_rel = nullptr;
};

// What the child needs besides the steps: descriptors and the exec vectors.
struct ChildContext {
  int sync_fd = -1;        // read end of the parent→child sync pipe
  int sync_write_fd = -1;  // its write end, in the child's copy of the fd table too: closed there
  int error_fd = -1;       // write end of the child→parent error pipe (O_CLOEXEC)
  int channel_fd = -1;     // becomes fd 3
  int exe_fd = -1;         // O_PATH fd of the agent
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  // MAP_SHARED page: the child stores CLOCK_MONOTONIC ns at the end of each stage (by Stage
  // index), so the parent can report where setup time goes. May be null.
  int64_t* stage_end_ns = nullptr;
};

class Plan {
 public:
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  Plan(Plan&&) = default;
  Plan& operator=(Plan&&) = default;

  // Stores s for the plan's lifetime and returns its stable C string.
  const char* keep(std::string s);
  // Stores a NULL-terminated vector of C strings (argv, envp) for the plan's lifetime.
  char* const* keepVector(const std::vector<std::string>& v);

  // Appends a step; op and subject name it in error messages ("mount(bind)", "/usr").
  void add(const Step& step, std::string op, std::string subject);

  // The child opens `root` (the new root, once it is mounted) and from then on resolves every
  // mount point under it beneath that descriptor, never by path: mount, bind (source too when
  // it is inside the root), bindHost, attachTree and setAttr steps whose path is under `root`
  // get Step::rel. mkdir, mkfile, symlink and writeFile stay by path: they only ever write
  // into the sandbox's own fresh tmpfs, which nobody else can reach.
  void openRoot(Stage st, const std::string& root);

  // Typed helpers for the common steps. Paths are as the child sees them before pivot_root.
  void mkdir(Stage st, const std::string& path, unsigned mode, std::string subject);
  void mkfile(Stage st, const std::string& path, std::string subject);
  void symlink(Stage st, const std::string& target, const std::string& path, std::string subject);
  void writeFile(Stage st, const std::string& path, std::string contents, unsigned mode,
                 std::string subject);
  void mount(Stage st, const char* fstype, const std::string& path, unsigned long flags,
             const std::string& data, std::string subject);
  void bind(Stage st, const std::string& source, const std::string& path, bool recursive,
            std::string subject);
  // Binds a host path the child may not be able to reach itself (a 0700 directory on the way,
  // looked up with the sandbox's unprivileged uid): the parent, as root, clones the tree now
  // with open_tree and sets attrs (MOUNT_ATTR_*) on it; the child only move_mounts it to path.
  Result<void> bindHost(Stage st, const std::string& source, const std::string& path,
                        bool recursive, uint64_t attrs, std::string subject);
  // Attaches a detached tree the caller made (a clone of the root template) at path.
  void attachTree(Stage st, UniqueFd tree, const std::string& path, std::string subject);
  // mount_setattr with attrs (MOUNT_ATTR_*). Adding attributes never clears the flags the
  // kernel locked on mounts inherited from the host (nodev, nosuid, noexec, atime), so unlike
  // MS_REMOUNT it needs no statvfs of the original.
  void setAttr(Stage st, const std::string& path, uint64_t attrs, bool recursive,
               std::string subject);

  std::span<const Step> steps() const { return steps_; }

  // "stage rootfs: mount(bind) '/usr': EPERM (Operation not permitted)" for a child report.
  std::string describe(const FailureRecord& record) const;

 private:
  std::deque<std::string> strings_;  // deque: growing never moves earlier elements
  std::deque<std::vector<char*>> vectors_;
  std::vector<UniqueFd> fds_;  // bindHost trees; inherited by the child, O_CLOEXEC
  // path relative to root_ when it is inside it (after openRoot), else null.
  const char* beneathRoot(const std::string& path);

  std::string root_;  // set by openRoot
  std::vector<Step> steps_;
  std::vector<std::string> ops_;
  std::vector<std::string> subjects_;
};

}  // namespace airlock::isolation
