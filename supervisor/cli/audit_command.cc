// airlock audit tail|query: the audit log (docs/audit.md) read back, filtered, as JSON lines.
// airlock audit unload: the host's pinned eBPF engine removed, unless a running airlock uses it.
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <boost/program_options.hpp>
#include <chrono>
#include <csignal>
#include <deque>
#include <functional>
#include <iostream>
#include <thread>

#include "airlock/policy/policy.h"
#include "supervisor/audit/engine.h"
#include "supervisor/audit/engine_objects.h"
#include "supervisor/audit/log_reader.h"
#include "supervisor/cli/cli.h"
#include "supervisor/cli/default_policy.h"
#include "supervisor/sandbox/run_result.h"
#include "supervisor/sys/cgroup.h"
#include "supervisor/sys/lock_file.h"

namespace airlock::cli {

namespace po = boost::program_options;

namespace {

constexpr const char* kAuditUsage = R"(Usage:
  airlock audit tail [--follow] [--lines N] [--sandbox ID] [--execution ID] [--type T] [--log FILE]
  airlock audit query [--sandbox ID] [--execution ID] [--type T] [--since WHEN] [--log FILE]
  airlock audit unload

Prints audit log records (docs/audit.md) as JSON lines. `tail` shows the last records of the
current file (and, with --follow, new ones as they are written, across rotations); `query`
searches every file, rotated ones included, oldest first. T is exec, net, connect (net records
of connect calls), execution, review, transfer, package, port or sandbox. WHEN is an RFC 3339 UTC time (2025-01-31T12:00:00Z, or
a prefix such as 2025-01-31) or a duration ago (90s, 15m, 2h, 7d). The log is --log FILE, else
the [audit] log of --policy FILE (default: the installed policy), else, with no policy
installed, /var/log/airlock/audit.jsonl (said on stderr).

`unload` removes the eBPF engine the first airlock process pinned for every later one
(/sys/fs/bpf/airlock, docs/audit.md): each version no running airlock process uses is unpinned,
its exec hook detached and its network programs taken off the sandboxes' cgroup parent
(<cgroup v2>/airlock, then removed when no sandbox is in it). A version in use is kept and named,
and the exit status is 1. The next airlock process that audits loads the engine again.

Options)";

const char* const kDefaultPolicy = defaultPolicyPath();

uint64_t nowNs() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

void print(const nlohmann::json& record) {
  std::cout << record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

std::atomic<bool> g_stop{false};

// --follow: new lines of the current file, reopening it when it is rotated away.
int follow(const std::string& path, uint64_t offset, const audit::RecordFilter& filter,
           const std::function<void(uint64_t)>& bad) {
  std::signal(SIGINT, [](int) { g_stop = true; });
  std::signal(SIGTERM, [](int) { g_stop = true; });
  struct stat st {};
  ino_t inode = ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  while (!g_stop) {
    std::cout.flush();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (::stat(path.c_str(), &st) != 0) continue;  // between rename and the new file
    if (st.st_ino != inode) {
      // Rotated: finish the old file (now <path>.1), then start the new one from its start.
      if (inode != 0) (void)audit::scanFile(path + ".1", offset, filter, print, bad);
      inode = st.st_ino;
      offset = 0;
    }
    if (static_cast<uint64_t>(st.st_size) <= offset) continue;
    auto next = audit::scanFile(path, offset, filter, print, bad);
    if (!next) {
      printError(next.error().message());
      return sandbox::kExitAirlockError;
    }
    offset = *next;
  }
  return 0;
}

// Versions pinned under `root` right now.
std::vector<std::string> pinnedVersions(const std::string& root) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(root.c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    ::closedir(d);
  }
  return out;
}

int unloadCommand() {
  const std::string root = audit::kEnginePinRoot;
  const std::string locks = audit::EngineOptions{}.lock_dir;
  // Under the loaders' lock: no version is being pinned while we look.
  auto locked = sys::lockFileIn(locks, "load.lock", LOCK_EX);
  if (!locked)
    return printError("audit unload: " + locked.error().message()), sandbox::kExitAirlockError;
  auto removed = audit::unpinUnusedEngines(root, locks);
  if (!removed) {
    return printError("audit unload: " + removed.error().message()), sandbox::kExitAirlockError;
  }
  for (const auto& v : *removed) std::cout << "unpinned " << root << "/" << v << "\n";
  auto kept = pinnedVersions(root);
  for (const auto& v : kept)
    std::cout << "kept " << root << "/" << v << ": in use by a running airlock process\n";
  if (kept.empty()) {
    ::rmdir(root.c_str());  // empty now; the next load makes it again
    // The engine's programs were attached to the sandboxes' shared cgroup, which sandboxes leave
    // in place for them; with them gone it goes too when no sandbox is in it.
    if (auto host = sys::CgroupHost::detect(); host && !host->v2_mount.empty())
      sys::removeUnusedV2Parent(host->v2_mount + "/airlock", std::chrono::seconds(2));
    if (removed->empty()) std::cout << "no audit engine is pinned on this host\n";
    return 0;
  }
  return 1;
}

}  // namespace

int auditCommand(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "unload") {
    if (args.size() > 1 && (args[1] == "--help" || args[1] == "-h")) {
      std::cout << kAuditUsage << "\n";
      return 0;
    }
    if (args.size() > 1) {
      printError("audit unload: unexpected argument '" + args[1] + "' (it takes none)");
      return sandbox::kExitAirlockError;
    }
    return unloadCommand();
  }
  if (args.empty() || (args[0] != "tail" && args[0] != "query")) {
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
      std::cout << kAuditUsage << "\n";
      return 0;
    }
    printError(
        "audit: expected `airlock audit tail`, `airlock audit query` or `airlock audit unload` "
        "(--help)");
    return sandbox::kExitAirlockError;
  }
  const bool tail = args[0] == "tail";
  std::string log, policy_file, since;
  audit::RecordFilter filter;
  size_t lines = 10;
  po::options_description opts(kAuditUsage);
  opts.add_options()("help,h", "this text")("log", po::value(&log), "the audit log file")(
      "policy", po::value(&policy_file), "read the log's path from this policy's [audit] log")(
      "sandbox", po::value(&filter.sandbox), "only records of this sandbox id")(
      "execution", po::value(&filter.execution), "only records of this execution id")(
      "type", po::value(&filter.type),
      "exec, net, connect, execution, review, transfer, package, port or sandbox");
  if (tail) {
    opts.add_options()("follow,f", "keep printing records as they are written")(
        "lines,n", po::value(&lines)->default_value(10), "how many past records to show first");
  } else {
    opts.add_options()("since", po::value(&since), "only records at or after WHEN");
  }
  po::variables_map vm;
  std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    po::store(po::command_line_parser(rest).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    printError("audit " + args[0] + ": " + e.what());
    return sandbox::kExitAirlockError;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (!filter.type.empty() && !audit::knownRecordType(filter.type)) {
    printError(
        "audit: --type '" + filter.type +
        "': expected exec, net, connect, execution, review, transfer, package, port or sandbox");
    return sandbox::kExitAirlockError;
  }
  if (!since.empty()) {
    auto s = audit::parseSince(since, nowNs());
    if (!s) return printError("audit query: " + s.error().message()), sandbox::kExitAirlockError;
    filter.since = *s;
  }
  if (log.empty()) {
    if (policy_file.empty() && ::access(kDefaultPolicy, R_OK) == 0) policy_file = kDefaultPolicy;
    if (policy_file.empty()) {
      // No policy to ask: the default log, named so the reader knows which file this is.
      log = audit::kDefaultAuditLog;
      if (audit::logFiles(log).empty()) {
        printError("audit: no log at " + log + " (the default path; no installed policy at " +
                   std::string(kDefaultPolicy) +
                   " names another); give --log FILE or --policy FILE");
        return sandbox::kExitAirlockError;
      }
      printError("audit: reading " + log + " (the default path; no installed policy at " +
                 std::string(kDefaultPolicy) + ")");
    } else {
      auto pol = policy::loadFile(policy_file);
      if (!pol) return printError(pol.error().message()), sandbox::kExitAirlockError;
      if (pol->audit.log.empty()) {
        printError("audit: policy " + policy_file +
                   " has no [audit] log: the supervisor keeps none");
        return sandbox::kExitAirlockError;
      }
      log = pol->audit.log;
    }
  }

  std::string current_file;
  auto bad = [&](uint64_t offset) {
    printError("audit: " + current_file + ": the line at byte " + std::to_string(offset) +
               " is not a JSON object; skipped");
  };
  if (!tail) {
    auto files = audit::logFiles(log);
    if (files.empty()) {
      printError("audit: no log at " + log);
      return sandbox::kExitAirlockError;
    }
    for (const auto& f : files) {
      current_file = f;
      auto r = audit::scanFile(f, 0, filter, print, bad);
      if (!r) return printError(r.error().message()), sandbox::kExitAirlockError;
    }
    return 0;
  }
  // tail: the last `lines` matching records of the current file, then maybe follow it.
  current_file = log;
  std::deque<nlohmann::json> last;
  auto keep = [&](const nlohmann::json& record) {
    last.push_back(record);
    if (last.size() > lines) last.pop_front();
  };
  auto end = audit::scanFile(log, 0, filter, keep, bad);
  if (!end) return printError(end.error().message()), sandbox::kExitAirlockError;
  for (const auto& record : last) print(record);
  if (!vm.count("follow")) return 0;
  return follow(log, *end, filter, bad);
}

}  // namespace airlock::cli
