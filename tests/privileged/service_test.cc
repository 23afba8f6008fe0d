// The supervisor service on real sandboxes, in-process: what `airlock serve` does behind its
// HTTP layer. Every test checks the host is as clean afterwards as before.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "supervisor/sandbox/manager.h"
#include "test_support.h"

namespace airlock::sandbox {
namespace {

using airlock::testing::snapshotHostResources;

std::vector<Json> drain(EventStream& s, int timeout_s = 60) {
  std::vector<Json> events;
  auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  while (!s.done() && Clock::now() < deadline) {
    if (auto e = s.next(deadline)) events.push_back(std::move(*e));
  }
  return events;
}

std::string joined(const std::vector<Json>& events, const std::string& type) {
  std::string out;
  for (const auto& e : events)
    if (e["type"] == type && e.contains("data")) out += e["data"].get<std::string>();
  return out;
}

const Json* find(const std::vector<Json>& events, const std::string& type) {
  for (const auto& e : events)
    if (e["type"] == type) return &e;
  return nullptr;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    before_ = snapshotHostResources();
    start(policy::builtinDefault());
  }
  void TearDown() override {
    if (svc_ == nullptr) return;
    svc_.reset();
    EXPECT_EQ(snapshotHostResources(), before_) << "the service left host resources behind";
  }
  void start(policy::Policy pol) {
    svc_.reset();
    ManagerOptions o;
    o.policy = std::move(pol);
    o.plugin_dir = airlock::testing::pluginDir();
    o.agent_path = airlock::testing::agentBinary();
    o.workspace_dir = workspace_root_.path() + "/workspaces";
    auto s = Manager::start(std::move(o));
    ASSERT_TRUE(s) << s.error().message();
    svc_ = std::move(*s);
  }
  SandboxInfo create(SandboxSpec spec = {}, const Caller& caller = {}) {
    auto r = svc_->createSandbox(caller, spec);
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : SandboxInfo{};
  }
  std::vector<Json> run(const std::string& sb, const std::string& cmd) {
    CommandSpec c;
    c.cmd = cmd;
    auto s = svc_->runCommand({}, sb, c);
    EXPECT_TRUE(s) << s.error().message;
    return s ? drain(**s) : std::vector<Json>{};
  }

  airlock::testing::TempDir workspace_root_;  // declared before svc_: outlives the service
  airlock::testing::HostResources before_;
  std::unique_ptr<Manager> svc_;
};

TEST_F(ServiceTest, CreateGetListDestroy) {
  SandboxSpec spec;
  spec.name = "analysis-1";
  spec.metadata = {{"user", "u1"}};
  auto info = create(spec);
  EXPECT_EQ(info.id.size(), 16u);
  EXPECT_EQ(info.state, "running");
  EXPECT_EQ(info.keep_alive_s, 300);
  EXPECT_EQ(info.ends_at, info.created_at + info.lifetime_s * 1000);
  EXPECT_GE(info.idle_expires_at, info.created_at + 300 * 1000);

  auto by_name = svc_->getSandbox({}, "analysis-1");
  ASSERT_TRUE(by_name) << by_name.error().message;
  EXPECT_EQ(by_name->id, info.id);

  auto dup = svc_->createSandbox({}, spec);
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kConflict) << dup.error().message;

  auto other = create();
  auto filtered = svc_->listSandboxes({}, {{"user", "u1"}});
  ASSERT_TRUE(filtered);
  ASSERT_EQ(filtered->size(), 1u);
  EXPECT_EQ(filtered->front().id, info.id);
  auto all = svc_->listSandboxes({}, {});
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 2u);

  ASSERT_TRUE(svc_->destroySandbox({}, info.id));
  auto gone = svc_->getSandbox({}, info.id);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
  EXPECT_NE(gone.error().message.find(info.id), std::string::npos);
  ASSERT_TRUE(svc_->destroySandbox({}, other.id));
}

// "isolation" in a create request: the profile's own, or one of its isolation_choices; the
// sandbox then really runs there (gVisor's kernel answers uname), and says so.
TEST_F(ServiceTest, ACreateRequestChoosesAnIsolationTheProfileAllows) {
  if (::access("/usr/bin/runsc", X_OK) != 0) {
    if (airlock::testing::privilegeRequired()) FAIL() << "needs runsc (scripts/install-deps.sh)";
    GTEST_SKIP() << "runsc is not installed: no second backend to choose";
  }
  auto pol = policy::parse(
      "schema = 1\n[profiles.default]\nisolation_choices = [\"gvisor\"]\n"
      "[profiles.strict]\n",
      "choices.toml");
  ASSERT_TRUE(pol) << pol.error().message();
  start(std::move(*pol));
  auto kernel = [&](const std::string& sb) {
    std::string out;
    for (const auto& e : run(sb, "uname -r"))
      if (e["type"] == "stdout") out += e["data"].get<std::string>();
    return out;
  };
  SandboxSpec spec;
  spec.isolation = "gvisor";
  auto chosen = create(spec);
  EXPECT_EQ(chosen.isolation, "gvisor");
  EXPECT_EQ(kernel(chosen.id), "4.4.0\n") << "gVisor's sentry answers uname";
  auto plain = create();
  EXPECT_EQ(plain.isolation, "namespaces");
  EXPECT_NE(kernel(plain.id), "4.4.0\n");
  spec.isolation = "namespaces";  // the profile's own: always allowed
  EXPECT_EQ(create(spec).isolation, "namespaces");

  spec.profile = "strict";
  spec.isolation = "gvisor";
  auto refused = svc_->createSandbox({}, spec);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kBadRequest);
  EXPECT_EQ(refused.error().message,
            "isolation 'gvisor': profile 'strict' allows 'namespaces' (its isolation_choices)");
  auto listed = svc_->getSandbox({}, chosen.id);
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->isolation, "gvisor");
}

TEST_F(ServiceTest, ForegroundCommandStreamsOutputAndExit) {
  auto sb = create();
  auto events = run(sb.id, "echo out; echo err >&2; id -u; exit 3");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front()["type"], "start");
  EXPECT_GT(events.front()["pid"].get<int>(), 1);
  EXPECT_EQ(joined(events, "stdout"), "out\n1000\n");
  EXPECT_EQ(joined(events, "stderr"), "err\n");
  const Json* exit = find(events, "exit");
  ASSERT_NE(exit, nullptr);
  EXPECT_EQ((*exit)["exit_code"], 3);
  EXPECT_EQ(events.back()["type"], "exit");

  CommandSpec argv;
  argv.argv = {"printf", "%s", "a b"};  // looked up on PATH, no shell
  auto s = svc_->runCommand({}, sb.id, argv);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(joined(drain(**s), "stdout"), "a b");

  CommandSpec missing;
  missing.argv = {"/no/such/program"};
  auto m = svc_->runCommand({}, sb.id, missing);
  if (m) {
    auto ev = drain(**m);
    const Json* e = find(ev, "exit");
    ASSERT_NE(e, nullptr);
    EXPECT_NE((*e)["exit_code"], 0);
  } else {
    EXPECT_NE(m.error().message.find("/no/such/program"), std::string::npos) << m.error().message;
  }
}

TEST_F(ServiceTest, StateAndFilesPersistAcrossCommands) {
  auto sb = create();
  run(sb.id, "echo 42 > /home/user/n.txt; mkdir -p /tmp/d");
  auto events = run(sb.id, "cat /home/user/n.txt; test -d /tmp/d && echo dir");
  EXPECT_EQ(joined(events, "stdout"), "42\ndir\n");
}

TEST_F(ServiceTest, BackgroundCommandsCanBeListedFedAndSignalled) {
  auto sb = create();
  CommandSpec cat;
  cat.argv = {"/bin/cat"};
  cat.background = true;
  auto started = svc_->runCommand({}, sb.id, cat);
  ASSERT_TRUE(started) << started.error().message;
  auto start_events = drain(**started);
  ASSERT_EQ(start_events.size(), 1u);
  std::string cid = start_events[0]["command_id"];

  CommandSpec sleeper;
  sleeper.cmd = "sleep 60";
  sleeper.background = true;
  auto s2 = svc_->runCommand({}, sb.id, sleeper);
  ASSERT_TRUE(s2);
  std::string sleep_id = drain(**s2)[0]["command_id"];

  auto listed = svc_->listCommands({}, sb.id);
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 2u);
  for (const auto& c : *listed) EXPECT_EQ(c.state, "running") << c.command_id;

  ASSERT_TRUE(svc_->sendStdin({}, sb.id, cid, "hello ", false));
  ASSERT_TRUE(svc_->sendStdin({}, sb.id, cid, "world", true));
  auto attached = svc_->attachCommand({}, sb.id, cid);
  ASSERT_TRUE(attached);
  auto ev = drain(**attached);
  EXPECT_EQ(joined(ev, "stdout"), "hello world");
  ASSERT_NE(find(ev, "exit"), nullptr);
  EXPECT_EQ((*find(ev, "exit"))["exit_code"], 0);

  ASSERT_TRUE(svc_->signalCommand({}, sb.id, sleep_id, SIGTERM));
  auto sleep_events = svc_->attachCommand({}, sb.id, sleep_id);
  ASSERT_TRUE(sleep_events);
  auto se = drain(**sleep_events, 10);
  ASSERT_NE(find(se, "exit"), nullptr);
  EXPECT_EQ((*find(se, "exit"))["signal"], SIGTERM);

  auto unknown = svc_->sendStdin({}, sb.id, "c999", "x", true);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
}

TEST_F(ServiceTest, AbandonedForegroundCommandIsKilled) {
  auto sb = create();
  CommandSpec c;
  c.cmd = "sleep 60";
  {
    auto s = svc_->runCommand({}, sb.id, c);
    ASSERT_TRUE(s);
    auto first = (*s)->next(Clock::now() + std::chrono::seconds(5));
    ASSERT_TRUE(first);
    EXPECT_EQ((*first)["type"], "start");
  }  // the client went away
  auto deadline = Clock::now() + std::chrono::seconds(10);
  bool exited = false;
  while (!exited && Clock::now() < deadline) {
    auto l = svc_->listCommands({}, sb.id);
    ASSERT_TRUE(l);
    exited = !l->empty() && l->front().state == "exited";
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(exited) << "the command of a vanished client kept running";
  // Positive control: nothing named sleep is left in the sandbox.
  EXPECT_EQ(joined(run(sb.id, "pgrep -x sleep || echo none"), "stdout"), "none\n");
}

// Transfers of a served sandbox (docs/transfer.md): an operator's host directory in through the
// transfer API with progress and a final record, an archive uploaded and a directory
// downloaded packed, the list, and the errors that name what refused.
TEST_F(ServiceTest, TransfersMoveArchivesInAndOutOfAServedSandbox) {
  airlock::testing::TempDir host;
  std::filesystem::create_directories(host.file("root/set"));
  host.write("root/set/one.csv", "1\n");
  host.write("root/set/two.csv", "2\n");
  auto pol = policy::builtinDefault();
  pol.transfer.roots["data"] = host.file("root");
  start(pol);
  auto sb = create();

  TransferSpec in;
  in.location = "hostdir:data/set";
  in.path = "/home/user/set";
  auto stream = svc_->startTransfer({}, sb.id, in);
  ASSERT_TRUE(stream) << stream.error().message;
  auto events = drain(**stream);
  ASSERT_FALSE(events.empty());
  const Json& record = events.back();
  EXPECT_EQ(record["type"], "transfer") << record.dump();
  EXPECT_EQ(record["status"], "ok") << record.dump();
  EXPECT_EQ(record["plugin"], "hostdir");
  EXPECT_EQ(record["files"], 2);
  EXPECT_EQ(record["id"], "tr-1");
  EXPECT_EQ(joined(run(sb.id, "cat /home/user/set/one.csv /home/user/set/two.csv"), "stdout"),
            "1\n2\n");

  // Out as an archive body, and back in as an upload into another directory.
  std::string packed;
  auto got = svc_->downloadArchive({}, sb.id, "/home/user/set", "tar", [&](std::string_view c) {
    packed.append(c);
    return true;
  });
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_GT(packed.size(), 1024u);
  size_t at = 0;
  ByteSource src = [&](char* buf, size_t cap) -> SResult<size_t> {
    const size_t n = std::min(cap, packed.size() - at);
    std::memcpy(buf, packed.data() + at, n);
    at += n;
    return n;
  };
  auto up = svc_->uploadArchive({}, sb.id, "/home/user/copy", src);
  ASSERT_TRUE(up) << up.error().message;
  EXPECT_EQ((*up)["files"], 2);
  EXPECT_EQ(joined(run(sb.id, "cat /home/user/copy/two.csv"), "stdout"), "2\n");

  // A local path is the supervisor's own file: never for an API caller.
  TransferSpec local;
  local.location = host.file("root/set/one.csv");
  local.path = "/home/user/x";
  auto refused = svc_->startTransfer({}, sb.id, local);
  ASSERT_TRUE(refused);
  auto last = drain(**refused).back();
  EXPECT_EQ(last["status"], "denied");
  EXPECT_NE(last["error"].get<std::string>().find("upload"), std::string::npos) << last.dump();

  TransferSpec escape;
  escape.location = "hostdir:data/../../etc";
  escape.path = "/home/user/etc";
  auto esc = svc_->startTransfer({}, sb.id, escape);
  ASSERT_TRUE(esc);
  EXPECT_EQ(drain(**esc).back()["status"], "denied");

  auto list = svc_->listTransfers({}, sb.id);
  ASSERT_TRUE(list);
  ASSERT_EQ((*list)["transfers"].size(), 3u) << list->dump();
  EXPECT_EQ((*list)["transfers"][0]["status"], "ok");
  auto cancel = svc_->cancelTransfer({}, sb.id, "tr-1");
  ASSERT_FALSE(cancel);
  EXPECT_EQ(cancel.error().code, ErrorCode::kConflict);
  EXPECT_EQ(svc_->cancelTransfer({}, sb.id, "tr-99").error().code, ErrorCode::kNotFound);
  EXPECT_NE(svc_->metricsText().find("airlock_transfers_total{result=\"ok\"} 3"),
            std::string::npos);
}

// "mounts" in a create request: an operator's directory, opened beneath its root and bound
// read-only, or writable only when its root is in [transfer] writable_roots; every escape is
// refused before anything starts.
TEST_F(ServiceTest, HostDirectoriesAreMountedReadOnlyUnlessTheirRootIsWritable) {
  airlock::testing::TempDir host;
  std::filesystem::create_directories(host.file("data/set"));
  std::filesystem::create_directories(host.file("results"));
  host.write("data/set/one.csv", "1\n");
  host.write("secret.txt", "not for sandboxes\n");
  std::filesystem::create_symlink(host.file("secret.txt"), host.file("data/leak"));
  std::filesystem::create_symlink(host.file("results"), host.file("data/outside"));
  // The sandbox user's host uid is its range's: a shared results directory is world-writable.
  ASSERT_EQ(::chmod(host.file("results").c_str(), 0777), 0);
  auto pol = policy::builtinDefault();
  pol.transfer.roots["data"] = host.file("data");
  pol.transfer.roots["results"] = host.file("results");
  pol.transfer.writable_roots = {"results"};
  const bool gvisor = ::access("/usr/bin/runsc", X_OK) == 0;
  const bool microvm = ::access("/usr/bin/qemu-system-x86_64", X_OK) == 0;
  if (gvisor) pol.profiles["default"].isolation_choices.push_back("gvisor");
  if (microvm) pol.profiles["default"].isolation_choices.push_back("microvm");
  start(pol);

  for (const std::string isolation : {"", "gvisor", "microvm"}) {
    if ((isolation == "gvisor" && !gvisor) || (isolation == "microvm" && !microvm)) {
      if (airlock::testing::privilegeRequired())
        FAIL() << "needs " << isolation << " (scripts/install-deps.sh)";
      continue;
    }
    SCOPED_TRACE("isolation '" + isolation + "'");
    SandboxSpec spec;
    spec.isolation = isolation;
    spec.mounts = {{"hostdir:data/set", "", false}, {"hostdir:results", "/mnt/out", true}};
    auto sb = create(spec);
    ASSERT_EQ(sb.mounts.size(), 2u);
    EXPECT_EQ(sb.mounts[0].path, "/mnt/data/set");
    EXPECT_EQ(sb.mounts[1].path, "/mnt/out");
    EXPECT_EQ(joined(run(sb.id, "cat /mnt/data/set/one.csv"), "stdout"), "1\n");
    // Positive control: the probe reports a write where one is possible.
    const std::string probe = " 2>/dev/null && echo wrote || echo refused";
    EXPECT_EQ(joined(run(sb.id, "echo x > /home/user/w" + probe), "stdout"), "wrote\n");
    EXPECT_EQ(joined(run(sb.id, "echo x > /mnt/data/set/new.csv" + probe), "stdout"), "refused\n");
    EXPECT_FALSE(std::filesystem::exists(host.file("data/set/new.csv")));
    EXPECT_EQ(
        joined(run(sb.id, "echo r" + isolation + " > /mnt/out/r" + isolation + ".txt" + probe),
               "stdout"),
        "wrote\n");
    EXPECT_EQ(airlock::testing::readFile(host.file("results/r" + isolation + ".txt")),
              "r" + isolation + "\n");
    // What the sandbox writes is its user's, seen from inside.
    EXPECT_EQ(joined(run(sb.id, "[ $(stat -c %u /mnt/out/r" + isolation +
                                    ".txt) = $(id -u) ] && echo mine"),
                     "stdout"),
              "mine\n");
    // Live, not a copy: what the host adds after the start is there.
    host.write("data/set/later" + isolation + ".csv", "2\n");
    EXPECT_EQ(joined(run(sb.id, "cat /mnt/data/set/later" + isolation + ".csv"), "stdout"), "2\n");
    // A symlink the host puts in the directory resolves inside the sandbox, never to the host's
    // file; the control reads that file through it on the host.
    const std::string link = "data/set/escape" + isolation;
    std::filesystem::create_symlink(host.file("secret.txt"), host.file(link));
    ASSERT_EQ(airlock::testing::readFile(host.file(link)), "not for sandboxes\n");
    EXPECT_EQ(joined(run(sb.id, "cat /mnt/" + link + " 2>/dev/null; echo end"), "stdout"), "end\n");
    ASSERT_TRUE(svc_->destroySandbox({}, sb.id));
  }

  auto refused = [&](MountSpec m) {
    SandboxSpec spec;
    spec.mounts = {std::move(m)};
    auto r = svc_->createSandbox({}, spec);
    EXPECT_FALSE(r) << spec.mounts[0].source << " was mounted";
    return r ? ServiceError{} : r.error();
  };
  auto e = refused({"hostdir:data/../secret.txt", "", false});
  EXPECT_EQ(e.code, ErrorCode::kBadRequest);
  EXPECT_NE(e.message.find("mounts[0] 'hostdir:data/../secret.txt': escapes its root"),
            std::string::npos)
      << e.message;
  EXPECT_NE(refused({"hostdir:data/leak", "", false}).message.find("a symlink on the way"),
            std::string::npos);
  EXPECT_NE(refused({"hostdir:data/outside", "", false}).message.find("a symlink on the way"),
            std::string::npos);
  EXPECT_NE(refused({"hostdir:nosuch", "", false}).message.find("no root 'nosuch'"),
            std::string::npos);
  EXPECT_NE(refused({"hostdir:data/set", "/home/user/set", false}).message.find("under /mnt"),
            std::string::npos);
  EXPECT_NE(refused({"/etc", "", false}).message.find("not a hostdir: source"), std::string::npos);
  auto w = refused({"hostdir:data/set", "", true});
  EXPECT_EQ(w.code, ErrorCode::kForbidden);
  EXPECT_NE(w.message.find("not in [transfer] writable_roots"), std::string::npos) << w.message;
}

// An archive uploaded through the API is reviewed like any transfer in: by its listing, once it
// is staged inside and before anything moves into place.
TEST_F(ServiceTest, ArchiveUploadsAreReviewedByTheirListing) {
  auto pol = policy::parse(R"(schema = 1
[profiles.default.review]
chain = ["patterns"]
[[profiles.default.review.patterns.rules]]
id = "no-keys"
pattern = '(?m)^file [0-9]+ .*\.pem$'
action = "deny"
reason = "private keys stay out"
languages = ["transfer"]
)",
                           "review.toml");
  ASSERT_TRUE(pol) << pol.error().message();
  start(std::move(*pol));
  auto sb = create();
  airlock::testing::TempDir host;
  std::filesystem::create_directories(host.file("clean"));
  std::filesystem::create_directories(host.file("keys"));
  host.write("clean/readme.txt", "hello\n");
  host.write("keys/readme.txt", "hello\n");
  host.write("keys/server.pem", "-----BEGIN PRIVATE KEY-----\n");
  auto upload = [&](const std::string& dir, const std::string& to) {
    auto t = airlock::testing::runCommand(
        {"/usr/bin/tar", "-cf", host.file(dir + ".tar"), "-C", host.file(dir), "."});
    EXPECT_EQ(t.exit_code, 0) << t.err;
    const std::string bytes = airlock::testing::readFile(host.file(dir + ".tar"));
    size_t at = 0;
    ByteSource src = [&](char* buf, size_t cap) -> SResult<size_t> {
      const size_t n = std::min(cap, bytes.size() - at);
      std::memcpy(buf, bytes.data() + at, n);
      at += n;
      return n;
    };
    return svc_->uploadArchive({}, sb.id, to, src);
  };
  // Positive control: the same probe finds a clean upload in place.
  auto ok = upload("clean", "/home/user/clean");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ((*ok)["review"]["verdict"], "allow") << ok->dump();
  const std::string probe = "ls -A /home/user";
  EXPECT_EQ(joined(run(sb.id, probe), "stdout"), "clean\n");

  auto denied = upload("keys", "/home/user/keys");
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kDeniedByReview);
  EXPECT_NE(denied.error().message.find("private keys stay out"), std::string::npos)
      << denied.error().message;
  EXPECT_EQ(denied.error().review["rule"], "no-keys");
  // Nothing of it landed, and no staging directory is left.
  EXPECT_EQ(joined(run(sb.id, probe), "stdout"), "clean\n");
}

TEST_F(ServiceTest, FilesRoundTripAndStayInsideTheSandbox) {
  auto sb = create();
  std::string payload(3 * 256 * 1024 + 17, 'x');  // several chunks
  for (size_t i = 0; i < payload.size(); i += 7) payload[i] = static_cast<char>(i);
  size_t off = 0;
  ByteSource src = [&](char* buf, size_t cap) -> SResult<size_t> {
    size_t n = std::min(cap, payload.size() - off);
    std::memcpy(buf, payload.data() + off, n);
    off += n;
    return n;
  };
  ASSERT_TRUE(svc_->makeDirectory({}, sb.id, "/home/user/data/in", true));
  auto w = svc_->writeFile({}, sb.id, "/home/user/data/in/blob.bin", 0600, src);
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_EQ(w->size, payload.size());

  std::string back;
  uint64_t announced = 0;
  auto r = svc_->readFile(
      {}, sb.id, "/home/user/data/in/blob.bin", [&](uint64_t n) { announced = n; },
      [&](std::string_view c) {
        back.append(c);
        return true;
      });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(announced, payload.size());
  EXPECT_EQ(back, payload);

  auto st = svc_->statFile({}, sb.id, "/home/user/data/in/blob.bin");
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->type, "file");
  EXPECT_EQ(st->mode, 0600u);
  EXPECT_EQ(st->size, payload.size());

  ASSERT_TRUE(svc_->renameFile({}, sb.id, "/home/user/data/in/blob.bin", "/home/user/b.bin"));
  auto ls = svc_->listFiles({}, sb.id, "/home/user");
  ASSERT_TRUE(ls) << ls.error().message;
  bool seen = false;
  for (const auto& e : *ls) seen |= e.name == "b.bin" && e.type == "file";
  EXPECT_TRUE(seen);
  ASSERT_TRUE(svc_->removeFile({}, sb.id, "/home/user/data", true));
  auto gone = svc_->statFile({}, sb.id, "/home/user/data");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);

  // A symlink planted by sandboxed code resolves inside the sandbox: the host's shadow file
  // (positive control: it exists and is not empty on the host) never comes back.
  ASSERT_FALSE(airlock::testing::readFile("/etc/shadow").empty());
  run(sb.id, "ln -s /etc/shadow /home/user/link");
  std::string leaked;
  auto via_link = svc_->readFile(
      {}, sb.id, "/home/user/link", [](uint64_t) {},
      [&](std::string_view c) {
        leaked.append(c);
        return true;
      });
  EXPECT_FALSE(via_link && leaked.find("root:") != std::string::npos)
      << "read the host's /etc/shadow through a planted symlink";

  auto relative = svc_->statFile({}, sb.id, "home/user");
  ASSERT_FALSE(relative);
  EXPECT_EQ(relative.error().code, ErrorCode::kBadRequest);
}

TEST_F(ServiceTest, WritesPastTheWorkspaceQuotaAre413) {
  auto pol = policy::builtinDefault();
  pol.profiles["default"].limits.workspace_mb = 1;
  start(std::move(pol));
  auto sb = create();
  std::string big(3 << 20, 'q');
  size_t off = 0;
  ByteSource src = [&](char* buf, size_t cap) -> SResult<size_t> {
    size_t n = std::min(cap, big.size() - off);
    std::memcpy(buf, big.data() + off, n);
    off += n;
    return n;
  };
  auto w = svc_->writeFile({}, sb.id, "/home/user/big.bin", 0644, src);
  ASSERT_FALSE(w) << "a 3 MiB file fit in a 1 MiB workspace";
  EXPECT_EQ(w.error().code, ErrorCode::kPayloadTooLarge) << w.error().message;
  EXPECT_NE(w.error().message.find("/home/user/big.bin"), std::string::npos) << w.error().message;
  // Positive control: once the partial file is gone, a small file fits.
  ASSERT_TRUE(svc_->removeFile({}, sb.id, "/home/user/big.bin", false));
  off = 0;
  big.resize(1000);
  EXPECT_TRUE(svc_->writeFile({}, sb.id, "/home/user/small.bin", 0644, src));
}

TEST_F(ServiceTest, IdleSandboxesAreReapedButBusyOnesAreNot) {
  SandboxSpec idle;
  idle.keep_alive_s = 1;
  auto a = create(idle);
  auto b = create(idle);
  // b stays busy with a foreground command longer than its keep-alive.
  CommandSpec c;
  c.cmd = "sleep 2.5; echo done";
  auto s = svc_->runCommand({}, b.id, c);
  ASSERT_TRUE(s);
  auto events = drain(**s);
  EXPECT_EQ(joined(events, "stdout"), "done\n");
  EXPECT_TRUE(svc_->getSandbox({}, b.id)) << "a sandbox running a command was reaped as idle";
  // a idled out 1.5 s ago; the reaper's next pass may come late on a loaded machine.
  auto ga = svc_->getSandbox({}, a.id);
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       ga && std::chrono::steady_clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    ga = svc_->getSandbox({}, a.id);
  ASSERT_FALSE(ga) << "an idle sandbox outlived its keep-alive by 10 s";
  EXPECT_EQ(ga.error().code, ErrorCode::kNotFound);

  auto bad = svc_->keepAlive({}, b.id, 999999, std::nullopt);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kBadRequest);
  auto ok = svc_->keepAlive({}, b.id, 60, std::nullopt);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->keep_alive_s, 60);
}

TEST_F(ServiceTest, QuotasAndTenantsAreEnforced) {
  auto pol = policy::builtinDefault();
  pol.tenants["default"].max_sandboxes = 2;
  policy::Tenant other;
  other.name = "other";
  pol.tenants["other"] = other;
  start(std::move(pol));
  auto a = create();
  create();
  auto third = svc_->createSandbox({}, {});
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().code, ErrorCode::kTooManyRequests);
  EXPECT_NE(third.error().message.find("maximum of 2"), std::string::npos) << third.error().message;

  Caller intruder{"other"};
  auto peek = svc_->getSandbox(intruder, a.id);
  ASSERT_FALSE(peek);
  EXPECT_EQ(peek.error().code, ErrorCode::kNotFound) << "another tenant's sandbox was visible";
  auto kill = svc_->destroySandbox(intruder, a.id);
  ASSERT_FALSE(kill);
  auto listed = svc_->listSandboxes(intruder, {});
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->empty());
  EXPECT_TRUE(svc_->getSandbox({}, a.id)) << "another tenant destroyed our sandbox";
}

TEST_F(ServiceTest, WarmPoolHandsOutReadySandboxesAndRefills) {
  auto pol = policy::builtinDefault();
  pol.profiles["default"].lifetime.pool_size = 2;
  start(std::move(pol));
  auto wait_warm = [&](size_t n) {
    auto deadline = Clock::now() + std::chrono::seconds(30);
    while (svc_->warmCount() < n && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return svc_->warmCount();
  };
  ASSERT_EQ(wait_warm(2), 2u);
  auto t0 = Clock::now();
  auto sb = create();
  double warm_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_EQ(svc_->sandboxCount(), 1u);
  // A warm sandbox works like any other, and the pool fills up again behind it.
  EXPECT_EQ(joined(run(sb.id, "echo warm"), "stdout"), "warm\n");
  EXPECT_EQ(wait_warm(2), 2u);
  auto metrics = svc_->metricsText();
  EXPECT_NE(metrics.find("airlock_sandbox_creates_total{path=\"warm\"} 1"), std::string::npos)
      << metrics;
  std::printf("warm create took %.2f ms\n", warm_ms);
}

TEST_F(ServiceTest, PolicyReloadAppliesToNewSandboxesOnly) {
  auto old_sb = create();
  EXPECT_EQ(old_sb.keep_alive_s, 300);
  auto pol = policy::builtinDefault();
  pol.profiles["default"].lifetime.keep_alive_s = 60;
  pol.profiles["default"].limits.output_bytes = 4096;
  svc_->reloadPolicy(std::move(pol));
  auto new_sb = create();
  EXPECT_EQ(new_sb.keep_alive_s, 60);
  auto again = svc_->getSandbox({}, old_sb.id);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->keep_alive_s, 300);
  // The old sandbox keeps its output cap; the new one has the reloaded one.
  auto big = "head -c 10000 /dev/zero | tr '\\0' a";
  auto old_out = joined(run(old_sb.id, big), "stdout");
  auto new_out = joined(run(new_sb.id, big), "stdout");
  EXPECT_EQ(old_out.size(), 10000u);
  EXPECT_EQ(new_out.size(), 4096u);
}

TEST_F(ServiceTest, ConcurrentClientsCreateRunDestroy) {
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 4; ++i) {
        auto sb = svc_->createSandbox({}, {});
        if (!sb) continue;
        CommandSpec c;
        c.cmd = "echo " + std::to_string(t * 100 + i);
        auto s = svc_->runCommand({}, sb->id, c);
        if (s && joined(drain(**s), "stdout") == std::to_string(t * 100 + i) + "\n") ++ok;
        svc_->destroySandbox({}, sb->id);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 24);
  EXPECT_EQ(svc_->sandboxCount(), 0u);
}

size_t openFds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

long rssKb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.starts_with("VmRSS:")) return std::stol(line.substr(6));
  return 0;
}

// 1,000 create/destroy cycles (every 10th runs a command): fds, memory and host resources stay
// flat. bench/service_bench.py runs the 10,000-cycle version.
TEST_F(ServiceTest, CreateDestroySoakLeavesNothingBehind) {
  constexpr int kCycles = 1000;
  size_t fds_after_warmup = 0;
  long rss_after_warmup = 0;
  for (int i = 0; i < kCycles; ++i) {
    auto sb = svc_->createSandbox({}, {});
    ASSERT_TRUE(sb) << "cycle " << i << ": " << sb.error().message;
    if (i % 10 == 0) {
      CommandSpec c;
      c.argv = {"/bin/true"};
      auto s = svc_->runCommand({}, sb->id, c);
      ASSERT_TRUE(s) << "cycle " << i << ": " << s.error().message;
      auto ev = drain(**s);
      ASSERT_FALSE(ev.empty());
      ASSERT_EQ(ev.back()["exit_code"], 0) << "cycle " << i;
    }
    ASSERT_TRUE(svc_->destroySandbox({}, sb->id)) << "cycle " << i;
    if (i == 99) {
      fds_after_warmup = openFds();
      rss_after_warmup = rssKb();
    }
  }
  EXPECT_EQ(openFds(), fds_after_warmup) << "file descriptors leak per sandbox";
  // Allocator noise is fine; a leak of even 2 KiB per sandbox would show as 1.8 MiB here.
  EXPECT_LT(rssKb() - rss_after_warmup, 1536) << "memory grows with every sandbox";
  EXPECT_EQ(snapshotHostResources(), before_);
}

TEST_F(ServiceTest, CodeContextsKeepStateAndReturnRichResults) {
  SandboxSpec spec;
  spec.language = "python";
  auto sb = create(spec);
  CodeSpec c;
  c.code = "x = 40\nx + 2";
  auto s = svc_->runCode({}, sb.id, c);
  ASSERT_TRUE(s) << s.error().message;
  auto ev = drain(**s);
  const Json* result = find(ev, "result");
  ASSERT_NE(result, nullptr) << Json(ev).dump();
  EXPECT_EQ((*result)["data"]["text/plain"], "42");
  EXPECT_EQ(ev.back()["type"], "end");
  EXPECT_EQ(ev.back()["status"], "ok");

  c.code = "print('x is', x)\n1/0";
  s = svc_->runCode({}, sb.id, c);
  ASSERT_TRUE(s);
  ev = drain(**s);
  EXPECT_EQ(joined(ev, "stdout"), "x is 40\n");
  const Json* err = find(ev, "error");
  ASSERT_NE(err, nullptr);
  EXPECT_EQ((*err)["name"], "ZeroDivisionError");
  EXPECT_EQ(ev.back()["status"], "error");

  c.code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nNone";
  s = svc_->runCode({}, sb.id, c);
  ASSERT_TRUE(s);
  ev = drain(**s);
  const Json* display = find(ev, "display");
  ASSERT_NE(display, nullptr) << Json(ev).dump();
  EXPECT_TRUE((*display)["data"]["image/png"].get<std::string>().starts_with("iVBORw0KGgo"));

  // A run past its timeout is interrupted; the context and its variables survive.
  c.code = "while True: pass";
  c.timeout_s = 1;
  s = svc_->runCode({}, sb.id, c);
  ASSERT_TRUE(s);
  ev = drain(**s);
  EXPECT_EQ(ev.back()["status"], "timeout");
  c.code = "x";
  c.timeout_s.reset();
  s = svc_->runCode({}, sb.id, c);
  ASSERT_TRUE(s);
  ev = drain(**s);
  ASSERT_NE(find(ev, "result"), nullptr) << Json(ev).dump();
  EXPECT_EQ((*find(ev, "result"))["data"]["text/plain"], "40");

  // Node has its own context in the same sandbox.
  CodeSpec js;
  js.language = "node";
  js.code = "let y = 5; y * 2";
  s = svc_->runCode({}, sb.id, js);
  ASSERT_TRUE(s) << s.error().message;
  ev = drain(**s);
  ASSERT_NE(find(ev, "result"), nullptr) << Json(ev).dump();
  EXPECT_EQ((*find(ev, "result"))["data"]["text/plain"], "10");
  auto contexts = svc_->listContexts({}, sb.id);
  ASSERT_TRUE(contexts);
  EXPECT_EQ(contexts->size(), 2u);
  // An explicitly created context is a new one, never the language's default.
  auto fresh = svc_->createContext({}, sb.id, "python");
  ASSERT_TRUE(fresh) << fresh.error().message;
  EXPECT_NE(fresh->context_id, "python");
  CodeSpec in_fresh;
  in_fresh.context_id = fresh->context_id;
  in_fresh.code = "'x' in dir()";
  auto probe = svc_->runCode({}, sb.id, in_fresh);
  ASSERT_TRUE(probe) << probe.error().message;
  auto probe_events = drain(**probe);
  const Json* fresh_result = find(probe_events, "result");
  ASSERT_NE(fresh_result, nullptr);
  EXPECT_EQ((*fresh_result)["data"]["text/plain"], "False") << "the new context shares state";
}

}  // namespace
}  // namespace airlock::sandbox

namespace airlock::sandbox {
namespace {

// Loop devices whose backing file lies under `dir` (the kernel lists it in sysfs).
int loopDevicesUnder(const std::string& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/sys/block")) {
    std::ifstream f(e.path() / "loop" / "backing_file");
    std::string backing;
    if (std::getline(f, backing) && backing.starts_with(dir)) ++n;
  }
  return n;
}

std::string out(const std::vector<Json>& events) { return joined(events, "stdout"); }

// Persistent workspaces: files outlive the sandbox, whatever uid range the next one leases; the
// image's size is the quota; a workspace in use is neither mounted twice nor deleted; nothing is
// left mounted or attached afterwards.
TEST_F(ServiceTest, PersistentWorkspaceOutlivesItsSandboxes) {
  auto pol = policy::builtinDefault();
  pol.profiles.at("default").limits.workspace_mb = 16;
  start(std::move(pol));
  SandboxSpec spec;
  spec.name = "notebook";
  spec.persistent = true;

  auto first = create(spec);
  ASSERT_TRUE(first.persistent);
  auto wrote = run(first.id,
                   "echo kept > /home/user/notes.txt && mkdir -p /home/user/d/e && "
                   "ln -s /etc/shadow /home/user/d/link && ls -A /home/user");
  EXPECT_EQ(out(wrote), "d\nnotes.txt\n") << "a fresh workspace is empty (no lost+found)";
  EXPECT_EQ(loopDevicesUnder(workspace_root_.path()), 1) << "positive control: mounted by loop";
  // One name, one live sandbox: the second is refused before it could mount the image again.
  auto twice = svc_->createSandbox({}, spec);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().code, ErrorCode::kConflict) << twice.error().message;
  auto busy = svc_->deleteWorkspace({}, "notebook");
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, ErrorCode::kConflict) << busy.error().message;
  ASSERT_TRUE(svc_->destroySandbox({}, first.id));
  EXPECT_EQ(loopDevicesUnder(workspace_root_.path()), 0) << "the loop device outlived its sandbox";

  // Another sandbox holds the freed uid range, so this one gets a different range: the files
  // must be re-owned to it.
  auto holder = create();
  auto second = create(spec);
  auto read = run(second.id,
                  "cat /home/user/notes.txt; stat -c '%u %g' /home/user /home/user/notes.txt "
                  "/home/user/d/e; readlink /home/user/d/link; "
                  "echo more >> /home/user/notes.txt && echo appended");
  EXPECT_EQ(out(read), "kept\n1000 1000\n1000 1000\n1000 1000\n/etc/shadow\nappended\n");
  // The re-owning walk ran as host root over sandbox-made files: it never follows a link.
  struct stat shadow {};
  ASSERT_EQ(stat("/etc/shadow", &shadow), 0);
  EXPECT_EQ(shadow.st_uid, 0u) << "the walk followed the planted symlink to the host's file";

  // The quota is the image: a 64 MiB write into 16 MiB fails inside, the host disk is untouched.
  auto fill = run(second.id,
                  "dd if=/dev/zero of=/home/user/big bs=1M count=64 2>&1 | head -1; "
                  "rm -f /home/user/big");
  EXPECT_NE(out(fill).find("No space left on device"), std::string::npos) << out(fill);

  auto list = svc_->listWorkspaces({});
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->front().name, "notebook");
  EXPECT_EQ(list->front().size_bytes, 16u << 20);
  EXPECT_TRUE(list->front().in_use);
  auto other_tenant = svc_->listWorkspaces({.tenant = "someone-else"});
  ASSERT_TRUE(other_tenant);
  EXPECT_TRUE(other_tenant->empty());

  ASSERT_TRUE(svc_->destroySandbox({}, second.id));
  ASSERT_TRUE(svc_->destroySandbox({}, holder.id));
  ASSERT_TRUE(svc_->deleteWorkspace({}, "notebook"));
  auto gone = svc_->deleteWorkspace({}, "notebook");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
  // Deleted means deleted: the next persistent sandbox of that name starts empty.
  auto third = create(spec);
  EXPECT_EQ(out(run(third.id, "ls -A /home/user | wc -l")), "0\n");
  ASSERT_TRUE(svc_->destroySandbox({}, third.id));
  EXPECT_EQ(loopDevicesUnder(workspace_root_.path()), 0);

  SandboxSpec unnamed;
  unnamed.persistent = true;
  auto refused = svc_->createSandbox({}, unnamed);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kBadRequest);
  EXPECT_NE(refused.error().message.find("name"), std::string::npos) << refused.error().message;
}

}  // namespace
}  // namespace airlock::sandbox

namespace airlock::sandbox {
namespace {

// The profile's review chain decides before anything reaches the sandbox: a denied command or
// code run never starts (and its verdict names reviewer and rule); an allowed one carries its
// verdict in the last event; a held one waits for an operator's approve or reject.
TEST_F(ServiceTest, ReviewChainGatesCommandsAndCode) {
  auto pol = policy::parse(R"(schema = 1
[profiles.default.review]
chain = ["patterns"]
hold_deadline_s = 30
[[profiles.default.review.patterns.rules]]
id = "no-rm"
pattern = '\brm\b'
action = "deny"
reason = "deleting files is not allowed"
[[profiles.default.review.patterns.rules]]
id = "ask-curl"
pattern = '\bcurl\b'
action = "hold"
reason = "network tools need an operator"
[[profiles.default.review.patterns.rules]]
id = "py-subprocess"
pattern = '\bsubprocess\b'
action = "deny"
reason = "spawning processes is not allowed"
languages = ["python"]
)",
                           "review-test.toml");
  ASSERT_TRUE(pol) << pol.error().message();
  start(std::move(*pol));
  auto sb = create();

  CommandSpec denied;
  denied.cmd = "touch /home/user/victim && rm /home/user/victim";
  auto refused = svc_->runCommand({}, sb.id, denied);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kDeniedByReview);
  EXPECT_EQ(refused.error().review["rule"], "no-rm");
  EXPECT_EQ(refused.error().review["reviewer"], "patterns");
  EXPECT_NE(refused.error().message.find("deleting files is not allowed"), std::string::npos);
  // Never reached the sandbox: the touch before the rm did not run either.
  EXPECT_EQ(joined(run(sb.id, "ls -A /home/user"), "stdout"), "");

  auto allowed = run(sb.id, "echo fine");
  const Json* exit = find(allowed, "exit");
  ASSERT_NE(exit, nullptr);
  EXPECT_EQ((*exit)["review"]["verdict"], "allow");

  CodeSpec code;
  code.language = "python";
  code.code = "import subprocess\nsubprocess.run(['true'])";
  auto code_refused = svc_->runCode({}, sb.id, code);
  ASSERT_FALSE(code_refused);
  EXPECT_EQ(code_refused.error().review["rule"], "py-subprocess");
  code.code = "print('no child processes')";
  auto ok = svc_->runCode({}, sb.id, code);
  ASSERT_TRUE(ok) << ok.error().message;
  auto events = drain(**ok);
  const Json* end = find(events, "end");
  ASSERT_NE(end, nullptr);
  EXPECT_EQ((*end)["review"]["verdict"], "allow");

  // Held: the request waits until an operator decides. Approve one, reject the next.
  for (bool approve : {true, false}) {
    SCOPED_TRACE(approve ? "approve" : "reject");
    std::optional<SResult<std::unique_ptr<EventStream>>> held;
    std::thread client([&] {
      CommandSpec c;
      c.cmd = "echo curl would run";
      held = svc_->runCommand({}, sb.id, c);
    });
    std::string review_id;
    for (int i = 0; i < 200 && review_id.empty(); ++i) {
      auto list = svc_->listReviews({});
      ASSERT_TRUE(list);
      if (!(*list)["reviews"].empty()) review_id = (*list)["reviews"][0]["review_id"];
      if (review_id.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_FALSE(review_id.empty()) << "the held request never showed up in listReviews";
    auto other = svc_->decideReview({.tenant = "someone-else"}, review_id, true, "");
    ASSERT_FALSE(other);
    EXPECT_EQ(other.error().code, ErrorCode::kNotFound) << "another tenant decided";
    ASSERT_TRUE(svc_->decideReview({}, review_id, approve, "checked by hand"));
    client.join();
    ASSERT_TRUE(held.has_value());
    if (approve) {
      ASSERT_TRUE(*held) << held->error().message;
      EXPECT_EQ(joined(drain(***held), "stdout"), "curl would run\n");
    } else {
      ASSERT_FALSE(*held);
      EXPECT_EQ(held->error().code, ErrorCode::kDeniedByReview);
      EXPECT_EQ(held->error().review["rule"], "operator");
    }
  }
  EXPECT_FALSE(svc_->decideReview({}, "0000000000000000", true, ""));
}

}  // namespace
}  // namespace airlock::sandbox
