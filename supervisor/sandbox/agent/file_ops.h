// File operations on a served sandbox, carried out by its agent inside the sandbox's own view
// (as the sandbox user), so paths and symlinks resolve only to the sandbox's files.
#pragma once

#include "supervisor/sandbox/agent/connection.h"
#include "supervisor/sandbox/service.h"

namespace airlock::sandbox::files {

// Absolute, normalized, no NUL: the checks every path from a client passes first.
SResult<std::string> checkPath(const std::string& path, const char* field = "path");

SResult<FileEntry> write(AgentConnection& conn, const std::string& path, uint32_t mode,
                         const ByteSource& source);
SResult<> read(AgentConnection& conn, const std::string& path, uint64_t max_bytes,
               const std::function<void(uint64_t)>& on_size, const ByteSink& sink);
// More than max_entries entries is an error (bounds a hostile agent).
SResult<std::vector<FileEntry>> list(AgentConnection& conn, const std::string& path,
                                     size_t max_entries = 1000000);
SResult<FileEntry> stat(AgentConnection& conn, const std::string& path);
SResult<> mkdir(AgentConnection& conn, const std::string& path, bool parents);
SResult<> remove(AgentConnection& conn, const std::string& path, bool recursive);
SResult<> rename(AgentConnection& conn, const std::string& from, const std::string& to);

}  // namespace airlock::sandbox::files
