// File reads and writes on behalf of the supervisor, with the sandbox user's permissions.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "airlock/protocol/messages.h"
#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::agent {

// Switches the filesystem uid/gid for its lifetime, so the kernel checks permissions (and owns
// created files) as the sandbox user rather than the agent.
class FsCredentials {
 public:
  FsCredentials(uid_t uid, gid_t gid);
  ~FsCredentials();
  FsCredentials(const FsCredentials&) = delete;
  FsCredentials& operator=(const FsCredentials&) = delete;

 private:
  uid_t old_uid_;
  gid_t old_gid_;
  bool setfs_ = true;  // false: the effective ids were switched instead (no setfsuid here)
};

// Open FileWrite transfers, keyed by request id (first chunk opens, last closes).
class FileWriter {
 public:
  static constexpr size_t kMaxOpen = 16;

  // Applies one chunk. Returns true when the transfer is complete (answer Ok).
  Result<bool> write(uint32_t request_id, const protocol::FileWrite& m, uid_t uid, gid_t gid);
  size_t open() const { return open_.size(); }

 private:
  struct OpenFile {
    UniqueFd fd;
    std::string path;
  };
  std::map<uint32_t, OpenFile> open_;
};

// Streams a regular file as FileData chunks through send (which returns false when the channel
// is gone). Errors name the path.
Result<> readFile(const protocol::FileRead& m, uid_t uid, gid_t gid,
                  const std::function<bool(const protocol::FileData&)>& send);

// The operations below resolve paths in the agent's own mount namespace (the sandbox's view) as
// the sandbox user. The last component is never followed: a symlink is listed, stat'ed, removed
// or renamed as itself. Errors carry the errno and name the path that failed.

// Lists a directory (lstat of every entry, in directory order), handing frames of at most
// kMaxListItems entries and kMaxFileEntriesPayload bytes to send; the last frame is flagged.
Result<> listDirectory(const protocol::FileList& m, uid_t uid, gid_t gid,
                       const std::function<bool(const protocol::FileEntries&)>& send);
// lstat of one path; the entry's name is the path asked for.
Result<protocol::FileEntry> statPath(const protocol::FileStat& m, uid_t uid, gid_t gid);
// mkdir, or mkdir -p with parents (an existing directory is then fine).
Result<> makeDirectory(const protocol::FileMkdir& m, uid_t uid, gid_t gid);
// Removes a file, a symlink, an empty directory, or (recursive) a whole tree, walking by
// directory fds with O_NOFOLLOW so a symlink inside the tree is removed, never entered.
Result<> removePath(const protocol::FileRemove& m, uid_t uid, gid_t gid);
// renameat2 without RENAME_EXCHANGE: replaces an existing target like rename(2).
Result<> renamePath(const protocol::FileRename& m, uid_t uid, gid_t gid);

}  // namespace airlock::agent
