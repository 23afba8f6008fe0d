// The sandbox's files (docs/api.md, Files), read and written by the agent inside the sandbox as
// the sandbox user. Paths are absolute paths inside the sandbox.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/client/error.h"

namespace airlock::sdk {

class Http;

struct EntryInfo {
  std::string name;
  std::string path;
  std::string type;  // file, dir, symlink or other
  uint64_t size = 0;
  uint32_t mode = 0;
  int64_t mtime_ms = 0;
};

class Files {
 public:
  Files(std::shared_ptr<const Http> http, std::string sandbox_target);

  // Any bytes, streamed (no size limit but the workspace quota, kTooLarge past it).
  Result<> write(const std::string& path, std::string_view bytes, uint32_t mode = 0644) const;
  // The whole file's bytes.
  Result<std::string> read(const std::string& path) const;
  // A local file in or out, streamed, never all in memory.
  Result<> upload(const std::string& local_path, const std::string& path) const;
  Result<> download(const std::string& path, const std::string& local_path) const;

  Result<std::vector<EntryInfo>> list(const std::string& path) const;
  Result<EntryInfo> stat(const std::string& path) const;
  Result<bool> exists(const std::string& path) const;
  Result<> mkdir(const std::string& path, bool parents = true) const;
  Result<> remove(const std::string& path, bool recursive = false) const;
  Result<> rename(const std::string& from, const std::string& to) const;

 private:
  std::string target(const std::string& route, const std::string& path) const;
  std::shared_ptr<const Http> http_;
  std::string sandbox_target_;
};

}  // namespace airlock::sdk
