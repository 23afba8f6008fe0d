// Crash chaos (issue 22): `airlock serve` is killed with SIGKILL a hundred times in a row, each
// time at a random moment while clients create sandboxes (persistent, networked or plain), stream
// a command's output, run code in a live Python context, upload files and destroy persistent
// sandboxes (their workspace is saved), and sometimes while it is still adopting the last one's
// sandboxes. After every restart: the sandboxes it lists are alive and run commands, their
// contexts kept every variable (a counter each code run increments, the run the kill cut off
// counted or not, never lost twice), and nothing else is left: each journal, lock
// file, cgroup, workspace mount, sandbox process, uid range lease, network link and nftables
// element belongs to a listed sandbox. At the end, every persistent workspace holds each file
// whose upload was acknowledged, passes e2fsck, and the host is as the test found it.
//
// AIRLOCK_CHAOS_ROUNDS lowers the number of kills for a quick local run (CI runs 100);
// AIRLOCK_CHAOS_SEED replays a run's choices (the kill delays still meet different timings).
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "serve_harness.h"
#include "test_support.h"

namespace airlock::testing {
namespace {

const std::string kRunDir = "/run/airlock";  // `airlock serve --state-dir`'s default
constexpr uint32_t kIdBase = 1u << 28;       // supervisor/sandbox/host/id_range.h
constexpr uint32_t kIdRangeSize = 65536;
const std::vector<std::string> kWorkspaces = {"ws0", "ws1", "ws2", "ws3"};
constexpr size_t kMaxLive = 5;

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

std::set<std::string> filesIn(const std::string& dir) {
  std::set<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.insert(n);
  }
  closedir(d);
  return out;
}

// Inodes (of the file system holding `dir`) that some process holds a flock() on.
std::set<ino_t> flockedInodes(const std::string& dir) {
  std::set<ino_t> out;
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return out;
  std::ifstream f("/proc/locks");
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string n, kind, advisory, mode, pid, where;
    in >> n >> kind;
    if (kind == "->") in >> kind;  // a waiter
    in >> advisory >> mode >> pid >> where;
    unsigned maj = 0, min = 0;
    unsigned long ino = 0;
    if (kind != "FLOCK" || std::sscanf(where.c_str(), "%x:%x:%lu", &maj, &min, &ino) != 3) continue;
    if (makedev(maj, min) == st.st_dev) out.insert(static_cast<ino_t>(ino));
  }
  return out;
}

// Names in `dir` whose file is flock()ed by some process.
std::set<std::string> heldLocks(const std::string& dir, const std::string& suffix) {
  std::set<std::string> out;
  auto held = flockedInodes(dir);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.ends_with(suffix) && held.contains(e->d_ino))
      out.insert(n.substr(0, n.size() - suffix.size()));
  }
  closedir(d);
  return out;
}

// Everything on the host that belongs to some sandbox, by whom it belongs to.
struct Footprint {
  std::set<std::string> journals, lock_files, home_dirs, stray_files;  // /run/airlock/sandboxes
  std::set<std::string> cgroups;                                       // sandbox ids
  std::set<std::string> workspace_mounts;                              // sandbox ids (<id>.home)
  int other_airlock_mounts = 0;
  std::set<uint32_t> process_slots;  // uid range slots of processes with a sandbox uid
  std::set<uint32_t> leased_slots;   // uid range lock files held
  std::set<std::string> links;       // al-*
  std::set<std::string> nft_links;   // al-* names in the elements of airlock's nftables sets
  bool nft_table = false;
};

void collectLinkNames(const Json& j, std::set<std::string>& out) {
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s.starts_with("al-")) out.insert(s);
  } else if (j.is_structured()) {
    for (const auto& v : j) collectLinkNames(v, out);
  }
}

Footprint footprint() {
  Footprint f;
  for (const auto& n : filesIn(kRunDir + "/sandboxes")) {
    if (n.starts_with("."))
      f.stray_files.insert(n);
    else if (n.ends_with(".json"))
      f.journals.insert(n.substr(0, n.size() - 5));
    else if (n.ends_with(".lock"))
      f.lock_files.insert(n.substr(0, n.size() - 5));
    else if (n.ends_with(".home"))  // a persistent workspace's mount point
      f.home_dirs.insert(n.substr(0, n.size() - 5));
    else
      f.stray_files.insert(n);
  }
  for (const auto& ctrl : filesIn("/sys/fs/cgroup"))
    for (const auto& id : filesIn("/sys/fs/cgroup/" + ctrl + "/airlock"))
      if (id.size() == 16 && id.find_first_not_of("0123456789abcdef") == std::string::npos)
        f.cgroups.insert(id);
  {
    std::ifstream m("/proc/self/mountinfo");
    std::string line;
    const std::string home = kRunDir + "/sandboxes/";
    while (std::getline(m, line)) {
      size_t at = line.find(home);
      if (at != std::string::npos && line.compare(at + home.size() + 16, 6, ".home ") == 0)
        f.workspace_mounts.insert(line.substr(at + home.size(), 16));
      else if (line.find("airlock") != std::string::npos)
        ++f.other_airlock_mounts;
    }
  }
  for (const auto& pid : filesIn("/proc")) {
    struct stat st {};
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (stat(("/proc/" + pid).c_str(), &st) == 0 && st.st_uid >= kIdBase &&
        st.st_uid != static_cast<uid_t>(-1))
      f.process_slots.insert((st.st_uid - kIdBase) / kIdRangeSize);
  }
  for (const auto& slot : heldLocks("/run/lock/airlock-idmap", ".lock"))
    f.leased_slots.insert(static_cast<uint32_t>(std::stoul(slot)));
  for (const auto& l : filesIn("/sys/class/net"))
    if (l.starts_with("al-")) f.links.insert(l);
  auto nft = runCommand({"/usr/sbin/nft", "-j", "list", "table", "inet", "airlock"}, "", 30);
  f.nft_table = nft.exit_code == 0;
  if (f.nft_table) {
    Json j = Json::parse(nft.out, nullptr, false);
    if (j.is_object())
      for (const auto& item : j.value("nftables", Json::array()))
        for (const char* kind : {"set", "map"})
          if (item.contains(kind)) collectLinkNames(item[kind].value("elem", Json()), f.nft_links);
  }
  return f;
}

// The journal's uid range slot of each sandbox.
std::map<std::string, uint32_t> journalSlots() {
  std::map<std::string, uint32_t> out;
  for (const auto& n : filesIn(kRunDir + "/sandboxes")) {
    if (n.starts_with(".") || !n.ends_with(".json")) continue;
    Json j = Json::parse(readFile(kRunDir + "/sandboxes/" + n), nullptr, false);
    if (j.is_object() && j.contains("id_slot"))
      out[n.substr(0, n.size() - 5)] = j["id_slot"].get<uint32_t>();
  }
  return out;
}

struct Box {
  std::string id;
  bool persistent = false;
  bool networked = false;
  std::string link;  // the host end of a networked sandbox's veth
};

enum class Op { kCreate, kStream, kWrite, kDestroy, kCode };

// Each code run adds one to the context's counter and answers it.
constexpr const char* kCountRun = R"({"code": "n = globals().get('n', 0) + 1\nn", )"
                                  R"("language": "python", "stream": false})";

// One client request of a round, run in its own thread while the supervisor may be killed.
struct Request {
  Op op;
  std::string target;  // sandbox name
  std::string method, path, body, content_type = "application/json";
  std::string content;  // kWrite: the bytes uploaded
  bool persistent = false, networked = false;
  int lines = 0;  // kStream: lines of output
  Response response;
};

const char* opName(Op op) {
  switch (op) {
    case Op::kCreate:
      return "create";
    case Op::kStream:
      return "stream";
    case Op::kWrite:
      return "write";
    case Op::kDestroy:
      return "destroy";
    case Op::kCode:
      return "code";
  }
  return "?";
}

class ServeChaos : public ServeTest {
 protected:
  void SetUp() override {
    ServeTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (testIsolation() != "namespaces")
      GTEST_SKIP() << "the chaos run is the namespaces backend's: crash recovery is the same "
                      "code on every backend, and ServeTest covers each backend's adoption";
    before_fp_ = footprint();
  }

  // The sandboxes the running supervisor lists, by name, with their links.
  std::map<std::string, Box> listed() {
    std::map<std::string, Box> out;
    auto r = http(serve_->sock(), "GET", "/v1/sandboxes");
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return out;
    const Json all = Json::parse(r.body);
    for (const auto& s : all["sandboxes"]) {
      Box b;
      b.id = s["id"].get<std::string>();
      b.persistent = s.value("persistent", false);
      b.networked = s.value("profile", "") == "net";
      if (b.networked) {
        auto n = http(serve_->sock(), "GET", "/v1/sandboxes/" + b.id + "/network");
        Json nj = Json::parse(n.body, nullptr, false);
        if (n.status == 200 && nj.is_object() && nj["link"].is_object())
          b.link = nj["link"]["host_link"].get<std::string>();
      }
      out[s["name"].get<std::string>()] = b;
    }
    return out;
  }

  // What is on the host beyond what the listed sandboxes account for; "" when nothing.
  std::string leaks(const std::map<std::string, Box>& live) {
    std::set<std::string> ids, persistent_ids, links;
    for (const auto& [name, b] : live) {
      ids.insert(b.id);
      if (b.persistent) persistent_ids.insert(b.id);
      if (b.networked) links.insert(b.link);
    }
    auto slots_by_id = journalSlots();
    std::set<uint32_t> slots;
    for (const auto& [id, slot] : slots_by_id)
      if (ids.contains(id)) slots.insert(slot);
    Footprint f = footprint();
    std::ostringstream out;
    auto check = [&](const auto& got, const auto& want, const char* what) {
      if (got == want) return;
      out << what << ": have {";
      for (const auto& x : got) out << " " << x;
      out << " } want {";
      for (const auto& x : want) out << " " << x;
      out << " }; ";
    };
    check(f.journals, ids, "journals");
    check(f.lock_files, ids, "lock files");
    check(f.stray_files, before_fp_.stray_files, "other files in /run/airlock/sandboxes");
    check(f.cgroups, ids, "cgroups");
    check(f.workspace_mounts, persistent_ids, "workspace mounts");
    check(f.home_dirs, persistent_ids, "workspace mount points");
    check(f.leased_slots, slots, "uid range leases");
    check(f.links, links, "network links");
    check(f.nft_links, links, "nftables elements");
    // airlock's table exists while some sandbox is online (or when another airlock made it).
    if (f.nft_table != (before_fp_.nft_table || !links.empty()))
      out << "the nftables table inet airlock " << (f.nft_table ? "exists" : "is missing") << "; ";
    std::set<uint32_t> stray_processes;
    for (uint32_t s : f.process_slots)
      if (!slots.contains(s)) stray_processes.insert(s);
    check(stray_processes, std::set<uint32_t>{}, "processes in the uid ranges of no sandbox");
    if (f.other_airlock_mounts != before_fp_.other_airlock_mounts)
      out << "other mounts mentioning airlock: " << f.other_airlock_mounts << " (before "
          << before_fp_.other_airlock_mounts << "); ";
    return out.str();
  }

  // leaks(), given time for the host's init to reap what a killed supervisor's sandboxes left.
  std::string settledLeaks(const std::map<std::string, Box>& live) {
    std::string l = leaks(live);
    for (int i = 0; i < 100 && !l.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      l = leaks(live);
    }
    return l;
  }

  std::string logTail() {
    std::string log;
    std::istringstream all(readFile(dir_.file("serve.log")));
    for (std::string line; std::getline(all, line);)
      if (line.find(" info api.request ") == std::string::npos) log += line + "\n";
    return log.size() > 4000 ? log.substr(log.size() - 4000) : log;
  }

  Footprint before_fp_;
  std::unique_ptr<Serve> serve_;
};

TEST_F(ServeChaos, HundredKillNinesLeaveNothingBehindAndLoseNoAcknowledgedWrite) {
  const int rounds = envInt("AIRLOCK_CHAOS_ROUNDS", 100);
  const char* replay = std::getenv("AIRLOCK_CHAOS_SEED");
  const uint32_t seed = replay != nullptr && *replay != '\0'
                            ? static_cast<uint32_t>(std::strtoul(replay, nullptr, 10))
                            : std::random_device{}();
  std::cout << "[ chaos ] " << rounds << " rounds, seed " << seed
            << " (replay with AIRLOCK_CHAOS_SEED=" << seed << ")\n";
  std::mt19937 rng(seed);
  auto chance = [&](double p) { return std::uniform_real_distribution<>(0, 1)(rng) < p; };
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };

  const std::string persist = dir_.file("persist");
  const std::string policy = "state_dir = \"" + persist + "\"\n" +
                             "[profiles.default]\n"
                             "[profiles.net]\nextends = \"default\"\n"
                             "[profiles.net.network]\nmode = \"open\"\n";
  serve_ = std::make_unique<Serve>(dir_, policy, dir_.file("serve.log"));
  ASSERT_FALSE(HasFatalFailure()) << logTail();

  std::map<std::string, Box> live;                                  // by name
  std::map<std::string, std::map<std::string, std::string>> acked;  // workspace -> file -> bytes
  std::map<std::string, int> counted;  // sandbox name -> its context's counter, as last answered
  int contexts_checked = 0;            // context counters read back after a restart
  int restarts = 0, killed_in_recovery = 0, adopted = 0, reclaimed = 0, leak_rounds = 0;
  std::map<std::string, int> ops_sent, ops_cut;  // requests sent, and those the kill cut off
  const auto t0 = std::chrono::steady_clock::now();

  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round) + " (seed " + std::to_string(seed) + ")");
    // 1..3 requests on distinct sandboxes, chosen here so the threads share nothing.
    std::vector<Request> reqs;
    std::set<std::string> busy;  // names a request of this round targets
    auto free_of = [&](auto pred) {
      std::vector<std::string> names;
      for (const auto& [name, b] : live)
        if (!busy.contains(name) && pred(b)) names.push_back(name);
      return names;
    };
    const size_t n_reqs = 1 + pick(3);
    for (size_t i = 0; i < n_reqs; ++i) {
      Op op = std::array{Op::kCreate, Op::kStream, Op::kWrite, Op::kDestroy, Op::kCode}[pick(5)];
      if (live.size() >= kMaxLive) op = Op::kDestroy;
      Request q;
      q.op = op;
      if (op == Op::kCreate) {
        std::vector<std::string> ws;
        for (const auto& w : kWorkspaces)
          if (!live.contains(w) && !busy.contains(w)) ws.push_back(w);
        q.persistent = !ws.empty() && chance(0.5);
        q.networked = !q.persistent && chance(0.3);
        q.target = q.persistent ? ws[pick(ws.size())]
                                : "t" + std::to_string(round) + "-" + std::to_string(i);
        Json spec = {{"name", q.target}, {"keep_alive_s", 900}};
        if (q.persistent) spec["persistent"] = true;
        if (q.networked) spec["profile"] = "net";
        q.method = "POST";
        q.path = "/v1/sandboxes";
        q.body = spec.dump();
      } else {
        // Uploads go mostly to persistent workspaces, where they must outlive everything.
        const bool persistent_only =
            (op == Op::kDestroy && live.size() < kMaxLive) || (op == Op::kWrite && chance(0.8));
        auto names = free_of([&](const Box& b) { return !persistent_only || b.persistent; });
        if (names.empty()) continue;
        q.target = names[pick(names.size())];
        if (op == Op::kStream) {
          q.method = "POST";
          q.path = "/v1/sandboxes/" + q.target + "/commands";
          q.lines = 1 + static_cast<int>(pick(400));
          q.body = R"({"cmd": "i=0; while [ $i -lt )" + std::to_string(q.lines) +
                   R"( ]; do echo line-$i; i=$((i+1)); sleep 0.001; done"})";
        } else if (op == Op::kCode) {
          q.method = "POST";
          q.path = "/v1/sandboxes/" + q.target + "/code";
          q.body = kCountRun;
        } else if (op == Op::kWrite) {
          // Up to 4 MiB, so that a kill lands mid-upload too.
          const size_t size = 16 + pick(4 << 20);
          q.content.resize(size);
          for (auto& c : q.content) c = static_cast<char>('a' + pick(26));
          q.method = "PUT";
          q.path = "/v1/sandboxes/" + q.target + "/files?path=/home/user/r" +
                   std::to_string(round) + "-" + std::to_string(i) + ".dat";
          q.body = q.content;
          q.content_type = "application/octet-stream";
        } else {
          q.method = "DELETE";
          q.path = "/v1/sandboxes/" + q.target;
        }
      }
      busy.insert(q.target);
      reqs.push_back(std::move(q));
    }

    std::vector<std::thread> clients;
    for (auto& q : reqs)
      clients.emplace_back([&q, sock = serve_->sock()] {
        q.response = http(sock, q.method, q.path, q.body, q.content_type);
      });
    // Half the kills within 60 ms, where creates and uploads are still under way.
    std::this_thread::sleep_for(std::chrono::milliseconds(chance(0.5) ? pick(61) : pick(301)));
    serve_->stop(SIGKILL);
    for (auto& t : clients) t.join();
    ++restarts;

    // What the client was told before the kill.
    std::set<std::string> maybe_gone, maybe_new, maybe_counted;
    for (const auto& q : reqs) {
      const Response& r = q.response;
      ++ops_sent[opName(q.op)];
      if (!r.complete) ++ops_cut[opName(q.op)];
      SCOPED_TRACE(std::string(opName(q.op)) + " " + q.target);
      switch (q.op) {
        case Op::kCreate:
          if (r.complete) {
            ASSERT_EQ(r.status, 201) << r.body;
            live[q.target] = {Json::parse(r.body)["id"].get<std::string>(), q.persistent,
                              q.networked, ""};
          } else {
            maybe_new.insert(q.target);
          }
          break;
        case Op::kStream:
          if (r.complete) {
            ASSERT_EQ(r.status, 200) << r.body;
            auto events = ndjson(r.body);
            ASSERT_FALSE(events.empty());
            EXPECT_EQ(events.back()["type"], "exit") << r.body.substr(0, 2000);
            EXPECT_EQ(events.back()["exit_code"], 0) << r.body.substr(0, 2000);
            std::string out;
            for (const auto& e : events)
              if (e["type"] == "stdout") out += e["data"].get<std::string>();
            EXPECT_TRUE(out.ends_with("line-" + std::to_string(q.lines - 1) + "\n")) << out;
          }
          break;
        case Op::kWrite:
          if (r.complete) {
            ASSERT_EQ(r.status, 201) << r.body;
            if (live[q.target].persistent)
              acked[q.target][q.path.substr(q.path.find("path=") + 5)] = q.content;
          }
          break;
        case Op::kCode:
          if (r.complete) {
            ASSERT_EQ(r.status, 200) << r.body;
            auto answer = Json::parse(r.body);
            ASSERT_EQ(answer["status"], "ok") << r.body;
            ASSERT_FALSE(answer["results"].empty()) << r.body;
            const int n = std::stoi(answer["results"][0]["text/plain"].get<std::string>());
            EXPECT_EQ(n, counted[q.target] + 1) << "the context lost its counter: " << r.body;
            counted[q.target] = n;
          } else {
            maybe_counted.insert(q.target);  // the run may finish under the next supervisor
          }
          break;
        case Op::kDestroy:
          if (r.complete) {
            ASSERT_EQ(r.status, 204) << r.body;
            live.erase(q.target);
            counted.erase(q.target);
          } else {
            maybe_gone.insert(q.target);
          }
          break;
      }
    }

    // Sometimes the next supervisor is killed too, while it adopts and reclaims.
    const std::set<std::string> orphans = footprint().lock_files;
    if (chance(0.1)) {
      serve_->start(/*wait=*/false);
      std::this_thread::sleep_for(std::chrono::milliseconds(pick(151)));
      serve_->stop(SIGKILL);
      ++restarts;
      ++killed_in_recovery;
    }
    serve_->start();
    ASSERT_FALSE(HasFatalFailure()) << logTail();

    // The restarted supervisor lists exactly the sandboxes the clients know of, plus any whose
    // create or delete the kill cut off (either way), and each of them works.
    auto now = listed();
    for (const auto& [name, b] : live) {
      if (maybe_gone.contains(name)) continue;
      EXPECT_TRUE(now.contains(name) && now[name].id == b.id)
          << "sandbox " << name << " (" << b.id << ") was not adopted\n"
          << logTail();
    }
    for (const auto& [name, b] : now) {
      EXPECT_TRUE(live.contains(name) || maybe_new.contains(name))
          << "an unknown sandbox " << name << " was listed";
      auto ran = http(serve_->sock(), "POST", "/v1/sandboxes/" + b.id + "/commands",
                      R"({"cmd": "echo ok", "stream": false})");
      ASSERT_EQ(ran.status, 200) << name << ": " << ran.body << "\n" << logTail();
      EXPECT_EQ(Json::parse(ran.body)["stdout"], "ok\n") << name;
      // The context kept its counter across the kill; a run the kill cut off may have counted
      // (it finishes under the new supervisor, so wait while the context is busy with it).
      if (!counted.contains(name) && !maybe_counted.contains(name)) continue;
      Response n;
      for (int i = 0; i < 200; ++i) {
        n = http(serve_->sock(), "POST", "/v1/sandboxes/" + b.id + "/code",
                 R"j({"code": "globals().get('n', 0)", "language": "python", "stream": false})j");
        if (n.status != 409) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      ASSERT_EQ(n.status, 200) << name << ": " << n.body << "\n" << logTail();
      auto answer = Json::parse(n.body);
      ASSERT_FALSE(answer["results"].empty()) << n.body;
      const int now_n = std::stoi(answer["results"][0]["text/plain"].get<std::string>());
      const int before = counted[name];
      EXPECT_TRUE(now_n == before || (maybe_counted.contains(name) && now_n == before + 1))
          << name << ": counter " << now_n << " after the restart, " << before
          << " acknowledged before it" << (maybe_counted.contains(name) ? " (+1 cut off)" : "");
      EXPECT_EQ(answer["context_restarted"], false) << n.body;
      counted[name] = now_n;
      ++contexts_checked;
    }
    for (auto it = counted.begin(); it != counted.end();)
      it = now.contains(it->first) ? std::next(it) : counted.erase(it);
    adopted += static_cast<int>(now.size());
    for (const auto& id : orphans) {
      bool kept = false;
      for (const auto& [name, b] : now) kept = kept || b.id == id;
      reclaimed += kept ? 0 : 1;
    }
    live = now;

    // Nothing on the host but what those sandboxes hold.
    std::string leaked = settledLeaks(live);
    EXPECT_EQ(leaked, "") << logTail();
    if (!leaked.empty()) ++leak_rounds;
    if (HasFailure()) break;  // one round's report is enough to go on
  }

  // Every persistent workspace mounts again and holds every acknowledged upload, byte for byte.
  for (const auto& ws : kWorkspaces) {
    SCOPED_TRACE("workspace " + ws);
    if (!live.contains(ws)) {
      auto made = http(serve_->sock(), "POST", "/v1/sandboxes",
                       Json{{"name", ws}, {"persistent", true}}.dump());
      ASSERT_EQ(made.status, 201) << made.body << "\n" << logTail();
    }
    for (const auto& [path, content] : acked[ws]) {
      auto got = http(serve_->sock(), "GET", "/v1/sandboxes/" + ws + "/files?path=" + path);
      ASSERT_EQ(got.status, 200) << path << ": " << got.body;
      EXPECT_TRUE(got.body == content)
          << path << ": " << got.body.size() << " bytes, wrote " << content.size();
    }
  }
  for (const auto& [name, b] : listed())
    EXPECT_EQ(http(serve_->sock(), "DELETE", "/v1/sandboxes/" + b.id).status, 204) << name;
  int st = serve_->stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
  serve_.reset();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  EXPECT_EQ(settledHostResources(), before_) << logTail();
  std::string leaked = settledLeaks({});
  EXPECT_EQ(leaked, "");
  if (!leaked.empty()) ++leak_rounds;
  EXPECT_EQ(footprint().nft_table, before_fp_.nft_table) << "airlock's nftables table";
  // Each image is a clean ext4 file system, and nothing half-made is left beside them.
  size_t images = 0;
  for (const auto& f : filesIn(persist + "/workspaces/default")) {
    EXPECT_TRUE(f.ends_with(".ext4") && !f.starts_with(".")) << "left in the workspaces: " << f;
    auto fsck = runCommand({"/usr/sbin/e2fsck", "-fn", persist + "/workspaces/default/" + f});
    EXPECT_EQ(fsck.exit_code, 0) << f << ":\n" << fsck.out << fsck.err;
    ++images;
  }
  EXPECT_EQ(images, kWorkspaces.size());

  size_t acked_files = 0;
  for (const auto& [ws, files] : acked) acked_files += files.size();
  std::cout << "[ chaos ] " << restarts << " restarts (" << killed_in_recovery
            << " killed while recovering), " << adopted << " sandboxes adopted, " << reclaimed
            << " reclaimed, " << leak_rounds << " leaks, " << acked_files
            << " acknowledged workspace writes intact, " << contexts_checked
            << " live contexts' counters kept; requests (cut off by the kill):";
  for (const auto& [op, n] : ops_sent)
    std::cout << " " << op << " " << n << " (" << ops_cut[op] << ")";
  std::cout << ", " << seconds << " s\n";
  std::cout << "chaos: " << restarts << " restarts, " << adopted << " sandboxes adopted, "
            << reclaimed << " reclaimed, " << leak_rounds << " leaks\n";
}

}  // namespace
}  // namespace airlock::testing
