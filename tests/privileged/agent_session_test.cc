// airlock-agent features for long-lived sandboxes: Started before output, the control pipe and
// its ordering, uncapped output, the session kill scope with concurrent executions, and no fd
// or memory growth over hundreds of executions.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "agent_harness.h"
#include "test_support.h"

namespace airlock::agent::testing {
namespace {

namespace proto = airlock::protocol;
using ::testing::HasSubstr;

class AgentSession : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ok = agent_.configure(AgentProcess::defaultConfigure());
    ASSERT_EQ(ok.first.type, proto::MsgType::kOk);
  }
  AgentProcess agent_;
};

proto::Exec sessionShell(const std::string& script) {
  auto e = shell(script);
  e.kill_scope = proto::ExecKillScope::kSession;
  return e;
}

bool alive(pid_t pid) {
  // A zombie still answers kill(pid, 0); it counts as gone.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

// Waits up to timeout for pid to be gone (SIGKILL delivery and reaping take a moment).
bool goneWithin(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (alive(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Reads output lines of execution id until n newline-terminated lines have arrived.
std::vector<std::string> readLines(AgentProcess& agent, uint32_t id, size_t n) {
  std::string buf;
  while (static_cast<size_t>(std::count(buf.begin(), buf.end(), '\n')) < n) {
    auto o = agent.nextOutput(id);
    if (!o) break;
    buf += o->data;
  }
  std::vector<std::string> lines;
  std::istringstream in(buf);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

TEST_F(AgentSession, StartedCarriesThePidAndPrecedesOutput) {
  for (uint32_t i = 0; i < 30; ++i) {
    auto r = agent_.run(100 + i, shell("echo $$; echo err >&2"));
    ASSERT_TRUE(r.exited);
    ASSERT_TRUE(r.started_pid) << "no Started frame";
    EXPECT_FALSE(r.started_after_output);
    EXPECT_EQ(r.order.front(), proto::MsgType::kStarted);
    EXPECT_EQ(static_cast<pid_t>(*r.started_pid), std::atoi(r.out.c_str()));
  }
}

TEST_F(AgentSession, FailedExecHasNoStarted) {
  proto::Exec e;
  e.argv = {"/nonexistent/bin"};
  e.cwd = "/";
  auto r = agent_.run(130, e);
  ASSERT_TRUE(r.exited);
  EXPECT_FALSE(r.started_pid);
  EXPECT_EQ(r.exited->exit_code, 127);
}

TEST_F(AgentSession, ControlPipeIsFd3OnlyWhenAsked) {
  auto e = shell("ls /proc/$$/fd; readlink /proc/$$/fd/3");
  e.control_pipe = true;
  auto r = agent_.run(140, e);
  ASSERT_TRUE(r.exited);
  EXPECT_THAT(r.out, ::testing::StartsWith("0\n1\n2\n3\npipe:"));
  auto plain = agent_.run(141, shell("echo x >&3"));
  ASSERT_TRUE(plain.exited);
  EXPECT_NE(plain.exited->exit_code, 0) << "fd 3 exists without control_pipe";
  EXPECT_TRUE(plain.control.empty());
}

// Every control message "cN" must arrive after the stdout line "lineN" written before it.
TEST_F(AgentSession, ControlBytesFollowEarlierOutput) {
  auto e = shell(
      "i=0; while [ $i -lt 300 ]; do echo line$i; echo err$i >&2; echo c$i >&3; i=$((i+1)); "
      "done");
  e.control_pipe = true;
  agent_.send(150, e);
  std::string out, err, control;
  int control_frames = 0;
  for (;;) {
    auto f = agent_.nextFor(150);
    ASSERT_TRUE(f);
    if (f->first.type == proto::MsgType::kExited) break;
    if (f->first.type != proto::MsgType::kOutput) continue;
    auto o = proto::decodeOutput(f->second);
    ASSERT_TRUE(o);
    if (o->stream == proto::Stream::kStdout) out += o->data;
    if (o->stream == proto::Stream::kStderr) err += o->data;
    if (o->stream != proto::Stream::kControl) continue;
    ++control_frames;
    control += o->data;
    std::istringstream msgs(o->data);
    for (std::string m; std::getline(msgs, m);) {
      std::string n = m.substr(1);
      ASSERT_THAT(out, HasSubstr("line" + n + "\n")) << "control " << m << " before its stdout";
      ASSERT_THAT(err, HasSubstr("err" + n + "\n")) << "control " << m << " before its stderr";
    }
  }
  EXPECT_GT(control_frames, 0);
  EXPECT_THAT(control, ::testing::StartsWith("c0\nc1\n"));
  EXPECT_THAT(control, ::testing::EndsWith("c299\n"));
}

// More output than one read takes is already in the pipe when the control bytes arrive (the
// driver grew its stdout pipe): all of it must still come first.
TEST_F(AgentSession, ControlWaitsForLargeBufferedOutput) {
  AIRLOCK_REQUIRE(access("/usr/bin/python3", X_OK) == 0, "needs /usr/bin/python3");
  proto::Exec e;
  e.argv = {"/usr/bin/python3", "-c",
            "import fcntl, os\n"
            "fcntl.fcntl(1, fcntl.F_SETPIPE_SZ, 1 << 20)\n"
            "for i in range(3):\n"
            "    data = b'x' * 900000\n"
            "    while data: data = data[os.write(1, data):]\n"
            "    os.write(2, b'e' * 1000)\n"
            "    os.write(3, b'done%d\\n' % i)\n"};
  e.cwd = "/";
  e.control_pipe = true;
  agent_.send(155, e);
  size_t out = 0, err = 0;
  std::string control;
  for (;;) {
    auto f = agent_.nextFor(155);
    ASSERT_TRUE(f);
    if (f->first.type == proto::MsgType::kExited) break;
    if (f->first.type != proto::MsgType::kOutput) continue;
    auto o = proto::decodeOutput(f->second);
    ASSERT_TRUE(o);
    if (o->stream == proto::Stream::kStdout) out += o->data.size();
    if (o->stream == proto::Stream::kStderr) err += o->data.size();
    if (o->stream == proto::Stream::kControl) {
      control += o->data;
      // Output written after a report may come before it; output written before never after.
      size_t dones = static_cast<size_t>(std::count(control.begin(), control.end(), '\n'));
      EXPECT_GE(out, 900000u * dones) << "control bytes overtook buffered stdout";
      EXPECT_GE(err, 1000u * dones) << "control bytes overtook buffered stderr";
    }
  }
  EXPECT_EQ(control, "done0\ndone1\ndone2\n");
  EXPECT_EQ(out, 2700000u);
}

TEST_F(AgentSession, ControlIsNotCappedByStdoutCap) {
  auto e = shell("head -c 100000 /dev/zero; head -c 300000 /dev/zero | tr '\\0' c >&3");
  e.control_pipe = true;
  e.stdout_cap = 10;
  auto r = agent_.run(160, e);
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.out.size(), 10u);
  EXPECT_TRUE(r.exited->stdout_truncated);
  EXPECT_EQ(r.control, std::string(300000, 'c'));
  EXPECT_EQ(r.exited->control_bytes, 300000u);
  EXPECT_FALSE(r.exited->control_truncated);
}

TEST_F(AgentSession, CapZeroMeansUnlimited) {
  auto e = shell("head -c 3000000 /dev/zero; head -c 2000000 /dev/zero >&2");
  e.stdout_cap = 0;
  e.stderr_cap = 0;
  auto r = agent_.run(170, e);
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.out.size(), 3000000u);
  EXPECT_EQ(r.err.size(), 2000000u);
  EXPECT_FALSE(r.exited->stdout_truncated);
  EXPECT_FALSE(r.exited->stderr_truncated);
  EXPECT_EQ(r.exited->stdout_bytes, 3000000u);
}

// Three long-lived executions share the agent; killing one leaves the others and their
// background processes untouched, and each execution's Exited reports its own outcome.
TEST_F(AgentSession, SessionScopeKillsOnlyItsOwnExecution) {
  std::vector<pid_t> main_pids, bg_pids;
  for (uint32_t id : {200u, 201u, 202u}) {
    auto e = sessionShell("sleep 1000 & echo $!; echo $$; echo out" + std::to_string(id) +
                          "; read line; echo got $line; exit 7");
    e.stdin_pipe = true;
    agent_.send(id, e);
  }
  for (uint32_t id : {200u, 201u, 202u}) {
    auto lines = readLines(agent_, id, 3);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[2], "out" + std::to_string(id));
    bg_pids.push_back(std::atoi(lines[0].c_str()));
    main_pids.push_back(std::atoi(lines[1].c_str()));
  }
  for (pid_t p : bg_pids) ASSERT_TRUE(alive(p));

  agent_.send(201, proto::Signal{SIGKILL});
  auto killed = agent_.collect(201, 10000);
  ASSERT_TRUE(killed.exited);
  EXPECT_EQ(killed.exited->signal, SIGKILL);
  EXPECT_TRUE(goneWithin(bg_pids[1], std::chrono::seconds(2)));
  EXPECT_TRUE(goneWithin(main_pids[1], std::chrono::seconds(2)));
  for (size_t i : {0u, 2u}) {
    EXPECT_TRUE(alive(main_pids[i])) << "execution " << i << " died with another";
    EXPECT_TRUE(alive(bg_pids[i])) << "background process of execution " << i << " died";
  }

  // Execution 200 ends normally: its background sleep (orphaned, still in its session) dies.
  agent_.send(200, proto::Stdin{"hello\n", true});
  auto r200 = agent_.collect(200, 10000);
  ASSERT_TRUE(r200.exited);
  EXPECT_EQ(r200.exited->exit_code, 7);
  EXPECT_EQ(r200.out, "got hello\n");
  EXPECT_TRUE(goneWithin(bg_pids[0], std::chrono::seconds(2)));
  EXPECT_TRUE(alive(main_pids[2]));
  EXPECT_TRUE(alive(bg_pids[2]));

  agent_.send(202, proto::Stdin{"bye\n", true});
  auto r202 = agent_.collect(202, 10000);
  ASSERT_TRUE(r202.exited);
  EXPECT_EQ(r202.exited->exit_code, 7);
  EXPECT_EQ(r202.out, "got bye\n");
  EXPECT_TRUE(goneWithin(bg_pids[2], std::chrono::seconds(2)));
}

// A process that moved to its own process group stays in the session: the process-group kill
// misses it, the session scan does not.
TEST_F(AgentSession, SessionScopeReachesOtherProcessGroupsOfTheSession) {
  AIRLOCK_REQUIRE(access("/usr/bin/python3", X_OK) == 0, "needs /usr/bin/python3");
  auto e = sessionShell(
      "python3 -c 'import os, time\n"
      "if os.fork() == 0:\n"
      "    os.setpgid(0, 0); print(os.getpid(), os.getpgid(0), os.getsid(0), flush=True)\n"
      "    time.sleep(1000)\n"
      "time.sleep(0.3)'");
  auto start = std::chrono::steady_clock::now();
  auto r = agent_.run(210, e, 20000);
  ASSERT_TRUE(r.exited);
  // Killed as the execution ends, not found later by the 2 s drain deadline.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
  std::istringstream in(r.out);
  pid_t pid = 0, pgid = 0, sid = 0;
  in >> pid >> pgid >> sid;
  ASSERT_GT(pid, 1) << r.out;
  EXPECT_EQ(pgid, pid) << "the grandchild did not leave the execution's process group";
  EXPECT_EQ(sid, static_cast<pid_t>(*r.started_pid)) << "the grandchild left the session";
  EXPECT_TRUE(goneWithin(pid, std::chrono::seconds(2)))
      << "grandchild " << pid << " in its own process group survived the execution";
}

TEST_F(AgentSession, SessionScopeTimeoutLeavesOthersRunning) {
  agent_.send(220, sessionShell("echo $$; sleep 1000"));
  auto other = readLines(agent_, 220, 1);
  ASSERT_EQ(other.size(), 1u);
  pid_t other_pid = std::atoi(other[0].c_str());
  auto e = sessionShell("sleep 1000 & echo $!; sleep 1000");
  e.timeout_ms = 300;
  auto r = agent_.run(221, e, 20000);
  ASSERT_TRUE(r.exited);
  EXPECT_TRUE(r.exited->timed_out);
  EXPECT_TRUE(goneWithin(std::atoi(r.out.c_str()), std::chrono::seconds(2)));
  EXPECT_TRUE(alive(other_pid));
  agent_.send(220, proto::Signal{SIGTERM});
  auto r220 = agent_.collect(220, 10000);
  ASSERT_TRUE(r220.exited);
  EXPECT_EQ(r220.exited->signal, SIGTERM);
}

size_t fdCount(pid_t pid) {
  size_t n = 0;
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (d == nullptr) return 0;
  while (dirent* de = readdir(d))
    if (de->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

long rssKb(pid_t pid) {
  return std::atol(
      procStatusField(::airlock::testing::readFile("/proc/" + std::to_string(pid) + "/status"),
                      "VmRSS")
          .c_str());
}

// A sandbox lives for many executions: the agent's fds and memory must not grow with them.
TEST_F(AgentSession, FiveHundredExecutionsLeakNoFdsOrMemory) {
  AIRLOCK_REQUIRE_ROOT();  // the agent is not dumpable: only root reads its /proc/<pid>/fd
  ::airlock::testing::TempDir dir;
  auto cycle = [&](uint32_t id) {
    auto e = sessionShell("read x; echo $x; echo c >&3");
    e.control_pipe = true;
    e.stdin_pipe = true;
    e.timeout_ms = 10000;
    agent_.send(id, e);
    agent_.send(id, proto::Stdin{"v\n", true});
    auto r = agent_.collect(id, 10000);
    ASSERT_TRUE(r.exited);
    ASSERT_EQ(r.out, "v\n");
    ASSERT_EQ(r.control, "c\n");
    agent_.send(id + 1, proto::FileList{dir.path()});
    auto l = agent_.nextFor(id + 1);
    ASSERT_TRUE(l);
    ASSERT_EQ(l->first.type, proto::MsgType::kFileEntries);
  };
  // The agent is single-threaded: once a FileStat is answered, the handler of the FileList
  // before it has returned and closed its directory.
  auto settle = [&](uint32_t id) {
    agent_.send(id, proto::FileStat{dir.path()});
    ASSERT_TRUE(agent_.nextFor(id));
  };
  for (uint32_t i = 0; i < 20; ++i) cycle(1000 + 2 * i);  // warm up allocator caches
  settle(1999);
  size_t fds_before = fdCount(agent_.pid());
  long rss_before = rssKb(agent_.pid());
  ASSERT_GT(fds_before, 0u);
  for (uint32_t i = 0; i < 500; ++i) {
    cycle(2000 + 2 * i);
    if (HasFatalFailure()) return;
  }
  settle(2999);
  EXPECT_EQ(fdCount(agent_.pid()), fds_before);
  EXPECT_LT(rssKb(agent_.pid()) - rss_before, 2048) << "agent RSS grew over 500 executions";
}

}  // namespace
}  // namespace airlock::agent::testing
