#include "supervisor/sandbox/journal.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "airlock/unique_fd.h"
#include "airlock/whole_file.h"

namespace airlock::sandbox {

namespace {

using Json = nlohmann::json;

constexpr int kJournalVersion = 1;

std::string dirOf(const std::string& state_dir) { return state_dir + "/sandboxes"; }

}  // namespace

Result<> writeJournal(const std::string& state_dir, const JournalRecord& r) {
  Json j = {{"version", kJournalVersion},
            {"id", r.id},
            {"name", r.name},
            {"tenant", r.tenant},
            {"profile", r.profile},
            {"language", r.language},
            {"isolation", r.isolation},
            {"env", r.env},
            {"metadata", r.metadata},
            {"persistent", r.persistent},
            {"workspace_image", r.workspace_image},
            {"mounts", r.mounts},
            {"created_at", r.created_at},
            {"keep_alive_s", r.keep_alive_s},
            {"lifetime_s", r.lifetime_s},
            {"ends_at", r.ends_at},
            {"id_slot", r.id_slot},
            {"agent_pid", r.agent_pid},
            {"agent_start_time", r.agent_start_time},
            {"network_rules", r.network_rules ? Json(*r.network_rules) : Json(nullptr)}};
  std::string text = j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  std::string path = dirOf(state_dir) + "/" + r.id + ".json";
  std::string tmp = dirOf(state_dir) + "/." + r.id + ".json.new";
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return sysError("open", tmp);
  if (write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return sysError("write", tmp);
  fd.reset();
  if (rename(tmp.c_str(), path.c_str()) != 0) return sysError("rename", path);
  return {};
}

std::vector<Result<JournalRecord>> readJournals(const std::string& state_dir) {
  std::vector<Result<JournalRecord>> out;
  std::string dir = dirOf(state_dir);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string file = e->d_name;
    if (file.front() == '.' || !file.ends_with(".json")) continue;
    std::string path = dir + "/" + file;
    Json j = Json::parse(readWholeFile(path).value_or(""), nullptr, false);
    if (j.is_discarded() || !j.is_object() || j.value("version", 0) != kJournalVersion) {
      out.push_back(fail("unreadable sandbox journal", path));
      continue;
    }
    try {
      JournalRecord r;
      r.id = j.at("id").get<std::string>();
      r.name = j.at("name").get<std::string>();
      r.tenant = j.at("tenant").get<std::string>();
      r.profile = j.at("profile").get<std::string>();
      r.language = j.at("language").get<std::string>();
      r.env = j.at("env").get<std::map<std::string, std::string>>();
      r.metadata = j.at("metadata").get<std::map<std::string, std::string>>();
      r.persistent = j.at("persistent").get<bool>();
      r.workspace_image = j.at("workspace_image").get<std::string>();
      r.created_at = j.at("created_at").get<int64_t>();
      r.keep_alive_s = j.at("keep_alive_s").get<int64_t>();
      r.lifetime_s = j.at("lifetime_s").get<int64_t>();
      r.ends_at = j.at("ends_at").get<int64_t>();
      r.id_slot = j.at("id_slot").get<uint32_t>();
      r.agent_pid = j.at("agent_pid").get<int64_t>();
      r.agent_start_time = j.at("agent_start_time").get<uint64_t>();
      // Absent in journals of older supervisors: the profile's isolation and rules.
      r.isolation = j.value("isolation", std::string());
      if (auto m = j.find("mounts"); m != j.end())
        r.mounts = m->get<std::vector<std::tuple<std::string, std::string, bool>>>();
      if (auto rules = j.find("network_rules"); rules != j.end() && !rules->is_null())
        r.network_rules = rules->get<std::vector<std::string>>();
      if (r.id + ".json" != file) {
        out.push_back(fail("sandbox journal names another sandbox", path));
        continue;
      }
      out.push_back(std::move(r));
    } catch (const Json::exception& ex) {
      out.push_back(fail(std::string("sandbox journal: ") + ex.what(), path));
    }
  }
  closedir(d);
  return out;
}

}  // namespace airlock::sandbox
