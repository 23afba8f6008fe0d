// The journal of served sandboxes: what the next supervisor needs to adopt them after this one
// dies, even by kill -9.
//
// One JSON file per sandbox, <state_dir>/sandboxes/<id>.json, next to the sandbox's lock file
// (sandbox/orphans.h). The lock file is made before any resource of the sandbox, so a crash at
// any point leaves at least it; this record is written (atomically: temporary file, rename) once
// the sandbox is handed to a client, and again whenever its lifetime changes. Removing the lock
// file removes the record too.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "airlock/result.h"

namespace airlock::sandbox {

struct JournalRecord {
  std::string id;
  std::string name;
  std::string tenant;
  std::string profile;
  std::string language;
  std::string isolation;  // the backend it runs on ("" in older journals: the profile's)
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> metadata;
  bool persistent = false;
  std::string workspace_image;  // persistent: the image mounted at /home/user
  // Host directories shown inside, [[source, path, writable]]: listed again after adoption.
  std::vector<std::tuple<std::string, std::string, bool>> mounts;
  // Network rules replaced through the API (LiveSandbox::network_rules); absent: the profile's.
  std::optional<std::vector<std::string>> network_rules;
  int64_t created_at = 0;  // Unix ms
  int64_t keep_alive_s = 0;
  int64_t lifetime_s = 0;
  int64_t ends_at = 0;  // Unix ms
  // How to find the sandbox's agent again (sandbox::AdoptOptions).
  uint32_t id_slot = 0;
  int64_t agent_pid = 0;
  uint64_t agent_start_time = 0;
};

Result<> writeJournal(const std::string& state_dir, const JournalRecord& record);
// Every record in state_dir; a record that does not parse is reported by its path.
std::vector<Result<JournalRecord>> readJournals(const std::string& state_dir);

}  // namespace airlock::sandbox
