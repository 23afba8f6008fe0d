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

}  // namespace airlock::agent
