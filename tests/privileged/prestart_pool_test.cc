// Pre-started interpreters ([profiles.X.lifetime] prestart): one-shot programs served by the
// manager of `airlock serve` from single-use sandboxes whose interpreter already runs, side by
// side with the same programs run cold by the one-shot manager of `airlock run`. Every test
// checks the host is as clean afterwards as before.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "supervisor/sandbox/manager.h"
#include "test_support.h"

namespace airlock::sandbox {
namespace {

using ::testing::HasSubstr;

constexpr const char* kPolicy = R"(schema = 1
[profiles.default]
languages = ["python", "node", "shell"]
[profiles.default.lifetime]
pool_size = 1
prestart = true
preload = ["json", "no_such_module_anywhere"]
)";

// pool_size = 1 for each of python and node, each with and without the preload.
constexpr size_t kFull = 4;

class PrestartPool : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    before_ = airlock::testing::snapshotHostResources();
    auto pol = policy::parse(kPolicy, "prestart.toml");
    ASSERT_TRUE(pol) << pol.error().message();
    served_ = startManager(*pol, ManagerOptions::Mode::kServe);
    cold_ = startManager(*pol, ManagerOptions::Mode::kOneShot);
    ASSERT_TRUE(served_ && cold_);
  }
  void TearDown() override {
    if (served_ == nullptr) return;
    served_.reset();
    cold_.reset();
    EXPECT_EQ(airlock::testing::snapshotHostResources(), before_)
        << "the pools left host resources behind";
  }
  std::unique_ptr<Manager> startManager(const policy::Policy& pol, ManagerOptions::Mode mode) {
    ManagerOptions o;
    o.policy = pol;
    o.plugin_dir = airlock::testing::pluginDir();
    o.agent_path = airlock::testing::agentBinary();
    o.workspace_dir = workspace_root_.path() + "/workspaces";
    o.mode = mode;
    auto m = Manager::start(std::move(o));
    EXPECT_TRUE(m) << m.error().message();
    return m ? std::move(*m) : nullptr;
  }
  // Waits until the served manager's pools hold `n` pre-started interpreters.
  bool waitForPool(size_t n) {
    auto until = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < until) {
      if (served_->prestartedCount() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  RunResult run(Manager& m, RunRequest req) {
    auto r = m.runProgram(req);
    EXPECT_TRUE(r) << r.error().message();
    return r ? *r : RunResult{};
  }
  // The same request cold and from the pool: what the program could observe must match.
  std::pair<RunResult, RunResult> sideBySide(const RunRequest& req) {
    EXPECT_TRUE(waitForPool(kFull)) << "python and node interpreters were not pre-started";
    RunResult warm = run(*served_, req);
    RunResult cold = run(*cold_, req);
    EXPECT_EQ(warm.create_ms, 0) << "served cold, not from the pool";
    EXPECT_GT(cold.create_ms, 0);
    EXPECT_EQ(warm.status, cold.status) << warm.message << " / " << cold.message;
    EXPECT_EQ(warm.exit_code, cold.exit_code);
    EXPECT_EQ(warm.stdout_data, cold.stdout_data);
    EXPECT_EQ(warm.stderr_data, cold.stderr_data);
    return {warm, cold};
  }
  static RunRequest python(std::string code) {
    RunRequest r;
    r.language = "python";
    r.code = std::move(code);
    return r;
  }

  airlock::testing::TempDir workspace_root_;
  airlock::testing::HostResources before_;
  std::unique_ptr<Manager> served_, cold_;
};

TEST_F(PrestartPool, ThePoolHoldsAnInterpreterPerLanguageButNotShell) {
  ASSERT_TRUE(waitForPool(kFull));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(served_->prestartedCount(), kFull)
      << "pool_size = 1 for each of python and node, preloaded and plain";
}

TEST_F(PrestartPool, ProgramsNamingAPreloadedModuleGetAPreloadedInterpreter) {
  // The probe: which json modules the interpreter had imported before the program's own
  // import. Natively (cold) none.
  const std::string probe =
      "import sys\n"
      "print(sorted(m for m in sys.modules if m.startswith('js')))\n";
  ASSERT_TRUE(waitForPool(kFull));
  auto plain = run(*served_, python(probe));
  EXPECT_EQ(plain.create_ms, 0);
  EXPECT_EQ(plain.stdout_data, "[]\n") << "a program naming no preloaded module got a preloaded "
                                          "interpreter";
  ASSERT_TRUE(waitForPool(kFull));
  auto preloaded = run(*served_, python(probe + "import json  # names it\n"));
  EXPECT_EQ(preloaded.create_ms, 0);
  EXPECT_THAT(preloaded.stdout_data, HasSubstr("'json'"))
      << "a program naming json got an interpreter without the preload";
  auto cold = run(*cold_, python(probe + "import json\n"));
  EXPECT_EQ(cold.stdout_data, "[]\n") << "the probe must tell the kinds apart";
}

TEST_F(PrestartPool, FastExitSkipsOnlyTheModuleTeardown) {
  auto pol = policy::parse(std::string(kPolicy) + "fast_exit = true\n", "fast.toml");
  ASSERT_TRUE(pol) << pol.error().message();
  served_.reset();  // one serving manager at a time: the pools share max_sandboxes
  served_ = startManager(*pol, ManagerOptions::Mode::kServe);
  ASSERT_NE(served_, nullptr);
  // Threads are joined, atexit handlers run, buffered output is flushed and the status kept...
  auto same = python(
      "import atexit, sys, threading, time\n"
      "atexit.register(lambda: print('atexit ran'))\n"
      "threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()\n"
      "sys.stdout.write('unflushed')\n"
      "sys.exit(7)\n");
  auto [warm, cold] = sideBySide(same);
  EXPECT_EQ(warm.exit_code, 7);
  EXPECT_EQ(warm.stdout_data, "unflushedthread done\natexit ran\n");
  sideBySide(python("raise ValueError('the traceback is the interpreter\\'s')"));
  // ...but a finalizer that only the module teardown would run does not: the one difference.
  auto finalizer = python(
      "class Noisy:\n"
      "    def __del__(self):\n"
      "        print('finalized at shutdown')\n"
      "kept = Noisy()\n");
  ASSERT_TRUE(waitForPool(kFull));
  auto fast = run(*served_, finalizer);
  auto native = run(*cold_, finalizer);
  EXPECT_EQ(fast.create_ms, 0);
  EXPECT_EQ(native.stdout_data, "finalized at shutdown\n") << "the probe must see a finalizer";
  EXPECT_EQ(fast.stdout_data, "") << "fast_exit did not reach the interpreter";
  EXPECT_EQ(fast.exit_code, 0);
}

TEST_F(PrestartPool, ProgramsSeeWhatACleanInterpreterShows) {
  auto req = python(
      "import sys, json\n"
      "print(sys.argv, __name__, repr(sys.path[0]), '__file__' in globals())\n"
      "print(sorted(k for k in globals() if not k.startswith('__')))\n");
  req.args = {"a", "b c"};
  auto [warm, cold] = sideBySide(req);
  EXPECT_THAT(warm.stdout_data, HasSubstr("['-c', 'a', 'b c'] __main__ '' False"));
  EXPECT_EQ(warm.status, Status::kExited);
}

TEST_F(PrestartPool, ExitCodesTracebacksAndStdinMatch) {
  sideBySide(python("import sys\nsys.exit(3)"));
  auto [warm, cold] = sideBySide(python("def f():\n    raise ValueError('boom')\nf()"));
  EXPECT_EQ(warm.exit_code, 1);
  EXPECT_THAT(warm.stderr_data, HasSubstr("ValueError: boom"));
  auto req = python("import sys\nprint(sys.stdin.read().upper())");
  req.stdin_data = "from stdin\n";
  req.has_stdin_data = true;
  auto [w2, c2] = sideBySide(req);
  EXPECT_EQ(w2.stdout_data, "FROM STDIN\n\n");
  RunRequest node;
  node.language = "node";
  node.code = "console.log(process.argv.length, typeof require); process.exitCode = 4";
  auto [wn, cn] = sideBySide(node);
  EXPECT_EQ(wn.exit_code, 4);
}

TEST_F(PrestartPool, EachInterpreterRunsOneProgramOnly) {
  ASSERT_TRUE(waitForPool(kFull));
  auto first =
      run(*served_, python("open('/tmp/mark', 'w').write('x'); import os; print(os.getpid())"));
  ASSERT_TRUE(waitForPool(kFull)) << "the pool refills after a hand-out";
  auto second = run(*served_, python("import os; print(os.path.exists('/tmp/mark'))"));
  EXPECT_EQ(first.create_ms, 0);
  EXPECT_EQ(second.create_ms, 0);
  EXPECT_NE(first.sandbox_id, second.sandbox_id) << "a pre-started sandbox was used twice";
  EXPECT_EQ(second.stdout_data, "False\n") << "state leaked from one program to the next";
  // Positive control: the marker is visible within one program, so the probe can see it.
  auto control = run(*served_, python("open('/tmp/mark', 'w').write('x'); import os; "
                                      "print(os.path.exists('/tmp/mark'))"));
  EXPECT_EQ(control.stdout_data, "True\n");
}

TEST_F(PrestartPool, TheTimeLimitCountsFromTheProgramNotThePool) {
  ASSERT_TRUE(waitForPool(kFull));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // longer than the limit
  auto quick = python("print('in time')");
  quick.timeout_s = 1;
  auto ok = run(*served_, quick);
  EXPECT_EQ(ok.status, Status::kExited) << ok.message;
  EXPECT_EQ(ok.create_ms, 0);
  auto spin = python("while True: pass");
  spin.timeout_s = 1;
  ASSERT_TRUE(waitForPool(kFull));
  auto timed_out = run(*served_, spin);
  EXPECT_EQ(timed_out.status, Status::kTimeout) << timed_out.message;
  EXPECT_EQ(timed_out.processExitCode(), kExitTimeout);
  EXPECT_LT(timed_out.exec_ms, 8000);
}

TEST_F(PrestartPool, RequestsThatChangeTheSandboxRunCold) {
  ASSERT_TRUE(waitForPool(kFull));
  auto with_env = python("import os; print(os.environ['MODE'])");
  with_env.env = {{"MODE", "fast"}};
  auto r = run(*served_, with_env);
  EXPECT_EQ(r.stdout_data, "fast\n");
  EXPECT_GT(r.create_ms, 0) << "an environment the interpreter was not started with";
  auto with_memory = python("print(1)");
  with_memory.memory_mb = 256;
  auto m = run(*served_, with_memory);
  EXPECT_EQ(m.stdout_data, "1\n");
  EXPECT_GT(m.create_ms, 0) << "limits the pool's sandbox was not created with";
}

}  // namespace
}  // namespace airlock::sandbox
