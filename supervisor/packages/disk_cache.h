// The on-disk cache every sandbox and supervisor process shares:
//   <dir>/blobs/<sha256>   file contents, named by their sha256 (only ever verified bytes)
//   <dir>/urls/<sha256 of the upstream URL>   the sha256 of what that URL served
//   <dir>/pages/<sha256 of kind, URL and Accept>   the last upstream index page or packument
//   <dir>/tmp/             files being written; each lands with rename(2), so readers (any
//                          process) see a whole file or none
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::packages {

class DiskCache {
 public:
  static Result<DiskCache> open(const std::string& dir);

  // The path of the blob with this sha256 when it is cached, with its size.
  std::optional<std::pair<std::string, uint64_t>> blob(const std::string& sha256) const;
  // The sha256 an upstream URL served before, if it is remembered and its blob is still there.
  std::optional<std::string> blobOfUrl(const std::string& url) const;

  // A file being written under tmp/: commit() renames it to blobs/<sha256>, and remembers the
  // URL; destroyed uncommitted, it is removed.
  class Incoming {
   public:
    Incoming(Incoming&&) noexcept;
    ~Incoming();
    Result<> write(std::string_view bytes);
    Result<std::string> commit(const std::string& sha256, const std::string& url);  // blob path
   private:
    friend class DiskCache;
    Incoming(const DiskCache* cache, UniqueFd fd, std::string path);
    const DiskCache* cache_;
    UniqueFd fd_;
    std::string path_;
  };
  Result<Incoming> incoming() const;

  std::optional<std::string> page(std::string_view key) const;
  void storePage(std::string_view key, std::string_view body) const;  // best effort

  const std::string& dir() const { return dir_; }

 private:
  explicit DiskCache(std::string dir) : dir_(std::move(dir)) {}
  Result<> writeAtomically(const std::string& path, std::string_view bytes) const;
  std::string dir_;
};

// Lowercase hex sha256 of `bytes`.
std::string sha256Hex(std::string_view bytes);

}  // namespace airlock::packages
