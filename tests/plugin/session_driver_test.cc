// The Python and Node session drivers, started with the command their plugin builds (so the
// embedding is tested too) as plain host processes wired the way the agent wires them: stdin a
// pipe, stdout/stderr pipes, the control pipe on fd 3, their own process group for SIGINT.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "airlock/unique_fd.h"
#include "plugin_test_util.h"
#include "supervisor/plugin/registry.h"

extern char** environ;

namespace airlock::plugin::test {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// A pipe whose ends are close-on-exec and above the stdio range, so dup2 onto 0..3 in the child
// always makes a fresh inheritable copy.
struct Pipe {
  UniqueFd r, w;
  static Pipe make() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    Pipe p;
    p.r.reset(::fcntl(fds[0], F_DUPFD_CLOEXEC, 10));
    p.w.reset(::fcntl(fds[1], F_DUPFD_CLOEXEC, 10));
    ::close(fds[0]);
    ::close(fds[1]);
    return p;
  }
};

ino_t inodeOf(int fd) {
  struct stat st {};
  ::fstat(fd, &st);
  return st.st_ino;
}

// What one request produced.
struct Run {
  std::vector<json> events;  // everything before done
  json done;
  std::string out, err;  // stdout/stderr bytes present when done arrived
  double ms = 0;         // request written to done read
  std::vector<json> of(const std::string& type) const {
    std::vector<json> r;
    for (const auto& e : events)
      if (e.value("type", "") == type) r.push_back(e);
    return r;
  }
  std::optional<std::string> text() const {  // the result's text/plain
    auto r = of("result");
    if (r.size() != 1) return std::nullopt;
    return r[0]["data"].value("text/plain", "");
  }
  std::string status() const { return done.value("status", ""); }
};

class Driver {
 public:
  Driver(const Language::Command& command, const std::string& cwd) {
    Pipe in = Pipe::make(), out = Pipe::make(), err = Pipe::make(), control = Pipe::make();
    stdin_inode_ = inodeOf(in.r.get());
    control_inode_ = inodeOf(control.r.get());
    stdout_inode_ = inodeOf(out.r.get());
    std::vector<std::string> env = command.env;
    env.push_back("PATH=/usr/bin:/bin");
    env.push_back("HOME=" + cwd);
    env.push_back("LANG=C.UTF-8");
    std::vector<char*> argv, envp;
    for (const auto& a : command.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in.r.get(), 0);
    posix_spawn_file_actions_adddup2(&actions, out.w.get(), 1);
    posix_spawn_file_actions_adddup2(&actions, err.w.get(), 2);
    posix_spawn_file_actions_adddup2(&actions, control.w.get(), 3);
    posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setpgroup(&attr, 0);  // its own group: the supervisor signals the group
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    started_ = Clock::now();
    int rc = ::posix_spawn(&pid_, argv[0], &actions, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    EXPECT_EQ(rc, 0) << "posix_spawn " << argv[0];
    if (rc != 0) pid_ = -1;
    stdin_ = std::move(in.w);
    stdout_ = std::move(out.r);
    stderr_ = std::move(err.r);
    control_ = std::move(control.r);
    for (int fd : {stdout_.get(), stderr_.get(), control_.get()})
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }

  ~Driver() { close(); }

  // Closes the command stream and reaps the driver, killing its group after 5 s. Returns
  // whether it exited by itself with status 0.
  bool close() {
    if (pid_ <= 0) return false;
    stdin_.reset();  // EOF on the command stream: the driver exits
    auto deadline = Clock::now() + std::chrono::seconds(5);
    int status = 0;
    bool clean = true;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        clean = false;
        break;
      }
      drain(50);
    }
    ::kill(-pid_, SIGKILL);  // whatever the code left running in the group
    pid_ = -1;
    return clean && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

  pid_t pid() const { return pid_; }
  ino_t stdinInode() const { return stdin_inode_; }
  ino_t controlInode() const { return control_inode_; }
  ino_t stdoutInode() const { return stdout_inode_; }

  // Waits for the next control event; nullopt on timeout or when the control pipe closes.
  std::optional<json> event(int timeout_ms = 30000) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      auto nl = control_buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = control_buf_.substr(0, nl);
        control_buf_.erase(0, nl + 1);
        json e = json::parse(line, nullptr, false);
        EXPECT_FALSE(e.is_discarded()) << "control line is not JSON: " << line;
        return e;
      }
      int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      if (left <= 0 || control_closed_) return std::nullopt;
      drain(left);
    }
  }

  std::optional<json> ready(double* ms = nullptr) {
    auto e = event();
    if (ms != nullptr) *ms = msSince(started_);
    return e;
  }

  void send(const std::string& line) {
    std::string data = line + "\n";
    ASSERT_EQ(::write(stdin_.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  }

  Run request(const std::string& id, const std::string& code, int timeout_ms = 0) {
    json r = {{"id", id}, {"code", code}};
    if (timeout_ms > 0) r["timeout_ms"] = timeout_ms;
    return raw(r.dump(), id);
  }

  // Sends one line and collects events until the done event for `id`.
  Run raw(const std::string& line, const json& id, int wait_ms = 30000) {
    Run run;
    drain(0);  // output of earlier runs is not this one's
    out_.clear();
    err_.clear();
    auto t0 = Clock::now();
    send(line);
    for (;;) {
      auto e = event(wait_ms);
      if (!e) {
        ADD_FAILURE() << "no done event for " << line << "\nstdout: " << out_
                      << "\nstderr: " << err_;
        break;
      }
      if (e->value("type", "") == "done") {
        EXPECT_EQ((*e)["id"], id) << e->dump();
        run.done = *e;
        break;
      }
      EXPECT_EQ((*e)["id"], id) << e->dump();
      run.events.push_back(*e);
    }
    run.ms = msSince(t0);
    drain(0);  // what the driver wrote to stdout/stderr before done is in the pipes now
    run.out = std::exchange(out_, {});
    run.err = std::exchange(err_, {});
    return run;
  }

  // Reads whatever is available on stdout, stderr and control, waiting up to timeout_ms.
  void drain(int timeout_ms) {
    pollfd fds[3] = {
        {stdout_.get(), POLLIN, 0}, {stderr_.get(), POLLIN, 0}, {control_.get(), POLLIN, 0}};
    std::string* bufs[3] = {&out_, &err_, &control_buf_};
    if (::poll(fds, 3, timeout_ms) <= 0) return;
    for (int i = 0; i < 3; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[65536];
      for (;;) {
        ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
        if (n > 0) {
          bufs[i]->append(buf, n);
          continue;
        }
        if (n == 0 && i == 2) control_closed_ = true;
        break;
      }
    }
  }

  // Waits until stdout contains `text` (the code has reached a point).
  bool waitForOutput(const std::string& text, int timeout_ms = 30000) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (out_.find(text) == std::string::npos) {
      if (Clock::now() > deadline) return false;
      drain(50);
    }
    return true;
  }

  void interrupt() { ::kill(-pid_, SIGINT); }

  long rssKiB() const {
    std::string status = testing::readFile("/proc/" + std::to_string(pid_) + "/status");
    auto at = status.find("VmRSS:");
    return at == std::string::npos ? -1 : std::stol(status.substr(at + 6));
  }

 private:
  pid_t pid_ = -1;
  Clock::time_point started_;
  UniqueFd stdin_, stdout_, stderr_, control_;
  ino_t stdin_inode_ = 0, control_inode_ = 0, stdout_inode_ = 0;
  std::string out_, err_, control_buf_;
  bool control_closed_ = false;
};

// Code snippets per language for the behaviour both drivers share.
struct Snippets {
  std::string language;
  std::string define_x;     // x = 1
  std::string increment_x;  // x += 1
  std::string no_value;     // an expression whose value is None / undefined
  std::string fail;         // calls a function that throws: name/value below
  std::string fail_name, fail_value;
  std::string print;        // writes "out-line\n" to stdout and "err-line\n" to stderr
  std::string big_print;    // writes 1 MiB of 'y' and a newline to stdout
  std::string spin;         // prints "spinning\n", then loops forever
  std::string spin_print;   // prints 0, 1, 2, ... forever
  std::string print_after;  // prints "after\n"
  std::string run_cat;      // runs `cat` with the driver's stdin; value: bytes it read (0)
  std::string list_fds;     // a child lists its fds (ls -l /proc/self/fd) on stdout
  std::vector<std::string> driver_marks;  // never in a cell's traceback
  std::string cell_2;                     // how a traceback names the second cell
};

void PrintTo(const Snippets& s, std::ostream* os) { *os << s.language; }

const Snippets kPython = {
    "python",
    "x = 1",
    "x += 1",
    "None",
    "def f():\n    return 1 / 0\n\nf()",
    "ZeroDivisionError",
    "division by zero",
    "import sys\nprint('out-line')\nsys.stderr.write('err-line\\n')",
    "print('y' * (1 << 20))",
    "print('spinning', flush=True)\nwhile True:\n    pass",
    "i = 0\nwhile True:\n    print(i)\n    i += 1",
    "print('after')",
    "import subprocess\nlen(subprocess.run(['cat'], stdout=subprocess.PIPE).stdout)",
    "import os\nos.system('ls -l /proc/self/fd/')",
    {"<string>", "_airlock_session", "session_driver", "interactiveshell"},
    "Cell In [2]",  // IPython's name for In [2]
};

const Snippets kNode = {
    "node",
    "var x = 1",
    "x += 1",
    "undefined",
    "function f() { throw new RangeError('too far') }\nf()",
    "RangeError",
    "too far",
    "console.log('out-line'); console.error('err-line')",
    "console.log('y'.repeat(1 << 20))",
    "console.log('spinning'); while (true) {}",
    "{ let i = 0; for (;;) console.log(i++) }",
    "console.log('after')",
    "require('child_process').execSync('cat', {stdio: ['inherit', 'pipe', 'inherit']}).length",
    "require('child_process').execSync('ls -l /proc/self/fd/', {stdio: 'inherit'}); undefined",
    {"[eval]", "node:vm"},
    "<cell-2>",
};

class SessionTest : public ::testing::Test {
 protected:
  std::shared_ptr<Language> language(const std::string& name) {
    auto l = registry_.language(name, "{}");
    EXPECT_TRUE(l) << l.error().message();
    return l ? *l : nullptr;
  }
  // Starts the driver and waits for its ready event.
  std::unique_ptr<Driver> start(const std::string& name, double* ready_ms = nullptr) {
    auto lang = language(name);
    if (!lang) return nullptr;
    auto command = lang->buildSession();
    EXPECT_TRUE(command) << command.error().message();
    if (!command) return nullptr;
    auto driver = std::make_unique<Driver>(*command, dir_.path());
    auto ready = driver->ready(ready_ms);
    EXPECT_TRUE(ready) << "no ready event from " << name;
    if (!ready) return nullptr;
    EXPECT_EQ((*ready)["type"], "ready");
    EXPECT_EQ((*ready)["language"], name);
    EXPECT_FALSE((*ready).value("version", "").empty());
    return driver;
  }
  Registry registry_ = Registry::loadDirectory(testing::pluginDir(), ownedByMe());
  testing::TempDir dir_;
};

// --- the commands the plugins build ------------------------------------------------------------

TEST_F(SessionTest, CommandsEmbedTheDriverSources) {
  auto py = language("python");
  ASSERT_TRUE(py);
  auto c = py->buildSession();
  ASSERT_TRUE(c) << c.error().message();
  std::string src = testing::sourceDir() + "/plugins/language/";
  EXPECT_THAT(c->argv, ElementsAre("/usr/bin/python3", "-u", "-c",
                                   testing::readFile(src + "python/session_driver.py")));
  EXPECT_THAT(c->env, Contains("MPLBACKEND=Agg"));

  auto node = language("node");
  ASSERT_TRUE(node);
  c = node->buildSession();
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_THAT(c->argv, ElementsAre("/usr/bin/node", "--expose-internals", "-e",
                                   testing::readFile(src + "node/session_driver.js")));

  auto sh = language("shell");
  ASSERT_TRUE(sh);
  c = sh->buildSession();
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_THAT(c->argv, ElementsAre("/usr/bin/bash", "--noprofile", "--norc", "-c",
                                   testing::readFile(src + "shell/session_driver.sh")));

  auto custom = registry_.language("python", R"({"interpreter": "/opt/py/bin/python3"})");
  ASSERT_TRUE(custom);
  EXPECT_EQ((*custom)->buildSession()->argv[0], "/opt/py/bin/python3");
}

TEST_F(SessionTest, ShellSessionsNeedBash) {
  auto sh = registry_.language("shell", R"({"interpreter": "/nonexistent/bash"})");
  ASSERT_TRUE(sh);
  auto c = (*sh)->buildSession();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().errnum(), ENOTSUP);
  EXPECT_THAT(c.error().message(), HasSubstr("shell contexts need bash"));
}

// --- behaviour both drivers share ----------------------------------------------------------------

class SessionDriver : public SessionTest, public ::testing::WithParamInterface<Snippets> {
 protected:
  void SetUp() override {
    if (GetParam().language == "node" && ::access("/usr/bin/node", X_OK) != 0) {
      GTEST_SKIP() << "/usr/bin/node is not installed";
    }
  }
  void expectNoDriverFrames(const json& error) {
    for (const auto& line : error["traceback"])
      for (const auto& mark : GetParam().driver_marks)
        EXPECT_THAT(line.get<std::string>(), Not(HasSubstr(mark))) << error.dump();
  }
};

TEST_P(SessionDriver, VariablesPersistAndTheLastValueComesBack) {
  const auto& s = GetParam();
  auto d = start(s.language);
  ASSERT_TRUE(d);
  auto r = d->request("r1", s.define_x);
  EXPECT_EQ(r.status(), "ok") << r.done.dump();
  EXPECT_TRUE(r.of("result").empty()) << "an assignment has no value";
  r = d->request("r2", s.increment_x);
  EXPECT_EQ(r.status(), "ok");
  r = d->request("r3", "x");
  EXPECT_EQ(r.status(), "ok");
  EXPECT_EQ(r.text(), "2");
  r = d->request("r4", "x * 21");
  EXPECT_EQ(r.text(), "42");
  EXPECT_TRUE(r.done["duration_ms"].is_number());
  r = d->request("r5", s.no_value);
  EXPECT_EQ(r.status(), "ok");
  EXPECT_TRUE(r.events.empty()) << r.events[0].dump();
}

TEST_P(SessionDriver, ErrorsAreEventsAndTheContextSurvives) {
  const auto& s = GetParam();
  auto d = start(s.language);
  ASSERT_TRUE(d);
  d->request("r1", s.define_x);
  auto r = d->request("r2", s.fail);
  EXPECT_EQ(r.status(), "error");
  auto errors = r.of("error");
  ASSERT_EQ(errors.size(), 1u) << r.done.dump();
  EXPECT_EQ(errors[0]["name"], s.fail_name);
  EXPECT_EQ(errors[0]["value"], s.fail_value);
  ASSERT_TRUE(errors[0]["traceback"].is_array());
  std::string tb;
  for (const auto& l : errors[0]["traceback"]) tb += l.get<std::string>() + "\n";
  EXPECT_THAT(tb, HasSubstr(s.cell_2));  // the failing line is named by its cell
  EXPECT_THAT(tb, HasSubstr(s.fail_value));
  expectNoDriverFrames(errors[0]);

  r = d->request("r3", "x = ");  // a syntax error in both languages
  EXPECT_EQ(r.status(), "error");
  ASSERT_EQ(r.of("error").size(), 1u);
  EXPECT_EQ(r.of("error")[0]["name"], "SyntaxError");
  expectNoDriverFrames(r.of("error")[0]);

  r = d->request("r4", "x");
  EXPECT_EQ(r.status(), "ok");
  EXPECT_EQ(r.text(), "1");
}

TEST_P(SessionDriver, OutputIsWrittenBeforeDone) {
  const auto& s = GetParam();
  auto d = start(s.language);
  ASSERT_TRUE(d);
  auto r = d->request("r1", s.print);
  EXPECT_EQ(r.status(), "ok");
  EXPECT_EQ(r.out, "out-line\n");
  EXPECT_EQ(r.err, "err-line\n");
  // More than a pipe holds: the driver must wait for its writes before reporting done.
  r = d->request("r2", s.big_print);
  EXPECT_EQ(r.status(), "ok");
  EXPECT_EQ(r.out.size(), (1u << 20) + 1);
}

TEST_P(SessionDriver, SigintInterruptsTheRunAndKeepsTheContext) {
  const auto& s = GetParam();
  auto d = start(s.language);
  ASSERT_TRUE(d);
  d->request("r1", s.define_x);
  d->send(json({{"id", "spin"}, {"code", s.spin}}).dump());
  ASSERT_TRUE(d->waitForOutput("spinning"));
  d->interrupt();
  auto e = d->event(10000);
  ASSERT_TRUE(e) << "no event after SIGINT";
  std::vector<json> events = {*e};
  while (events.back().value("type", "") != "done") {
    auto next = d->event(10000);
    ASSERT_TRUE(next);
    events.push_back(*next);
  }
  EXPECT_EQ(events.back()["status"], "interrupted") << events.back().dump();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["type"], "error");
  if (s.language == "python") {
    EXPECT_EQ(events[0]["name"], "KeyboardInterrupt");
  }
  expectNoDriverFrames(events[0]);
  auto r = d->request("r2", "x");
  EXPECT_EQ(r.text(), "1");
}

// An interrupt landing inside a print must not leave stdout broken for later runs.
TEST_P(SessionDriver, InterruptingOutputKeepsOutputWorking) {
  const auto& s = GetParam();
  auto d = start(s.language);
  ASSERT_TRUE(d);
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::string id = "spin" + std::to_string(attempt);
    d->send(json({{"id", id}, {"code", s.spin_print}}).dump());
    ASSERT_TRUE(d->waitForOutput("\n2000\n"));
    d->interrupt();
    std::optional<json> e;
    do {
      e = d->event(10000);
      ASSERT_TRUE(e) << "no done after SIGINT";
    } while ((*e)["type"] != "done");
    EXPECT_EQ((*e)["status"], "interrupted");
    auto r = d->request("after" + std::to_string(attempt), s.print_after);
    EXPECT_EQ(r.status(), "ok");
    EXPECT_EQ(r.out, "after\n");
  }
}

TEST_P(SessionDriver, SigintBetweenRunsIsHarmless) {
  const auto& s = GetParam();
  auto d = start(s.language);
  ASSERT_TRUE(d);
  d->request("r1", s.define_x);
  d->interrupt();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  d->interrupt();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto r = d->request("r2", "x");
  EXPECT_EQ(r.status(), "ok");
  EXPECT_EQ(r.text(), "1");
}

// SIGINTs landing at any point of short runs, the end of the script included: every request
// still gets exactly one done, and the driver lives on.
TEST_P(SessionDriver, SigintsAtRandomMomentsNeverLoseARun) {
  const auto& s = GetParam();
  auto d = start(s.language);
  ASSERT_TRUE(d);
  d->request("r0", s.define_x);
  for (int i = 0; i < 60; ++i) {
    std::string id = "q" + std::to_string(i);
    d->send(json({{"id", id}, {"code", s.increment_x}}).dump());
    if (i % 3 != 0) std::this_thread::sleep_for(std::chrono::microseconds(100 * (i % 7)));
    d->interrupt();
    std::optional<json> e;
    do {
      e = d->event(10000);
      ASSERT_TRUE(e) << "no done for " << id << " after SIGINT";
      EXPECT_EQ((*e)["id"], id);
    } while ((*e)["type"] != "done");
    EXPECT_THAT((*e)["status"].get<std::string>(), ::testing::AnyOf("ok", "interrupted"));
  }
  auto r = d->request("last", "x > 0");
  EXPECT_EQ(r.status(), "ok");
  EXPECT_THAT(r.text().value_or(""), ::testing::AnyOf("True", "true"));
}

TEST_P(SessionDriver, SubprocessesCannotReadTheCommandStream) {
  const auto& s = GetParam();
  auto d = start(s.language);
  ASSERT_TRUE(d);
  // cat inherits the driver's stdin: /dev/null, so it ends at once with nothing read. Were it
  // the command pipe, cat would block and swallow the next request.
  auto r = d->request("r1", s.run_cat);
  EXPECT_EQ(r.status(), "ok") << r.done.dump();
  EXPECT_EQ(r.text(), "0");
  r = d->request("r2", "1 + 1");
  EXPECT_EQ(r.text(), "2");
  char link[256] = {};
  ::readlink(("/proc/" + std::to_string(d->pid()) + "/fd/0").c_str(), link, sizeof link - 1);
  EXPECT_STREQ(link, "/dev/null");
}

TEST_P(SessionDriver, ChildrenInheritNeitherTheControlPipeNorTheCommandStream) {
  const auto& s = GetParam();
  auto d = start(s.language);
  ASSERT_TRUE(d);
  auto r = d->request("r1", s.list_fds);
  EXPECT_EQ(r.status(), "ok") << r.done.dump() << r.err;
  auto pipe = [](ino_t ino) { return "pipe:[" + std::to_string(ino) + "]"; };
  EXPECT_THAT(r.out, HasSubstr(pipe(d->stdoutInode())));  // the listing is the child's
  EXPECT_THAT(r.out, Not(HasSubstr(pipe(d->controlInode()))));
  EXPECT_THAT(r.out, Not(HasSubstr(pipe(d->stdinInode()))));
  EXPECT_THAT(r.out, HasSubstr("0 -> /dev/null"));
}

TEST_P(SessionDriver, MalformedRequestsGetAnErrorAndTheDriverSurvives) {
  const auto& s = GetParam();
  auto d = start(s.language);
  ASSERT_TRUE(d);
  struct Case {
    std::string line;
    json id;
  };
  for (const auto& c : std::vector<Case>{{"not json", nullptr},
                                         {"[1, 2]", nullptr},
                                         {R"({"code": "1"})", nullptr},
                                         {R"({"id": 7, "code": "1"})", nullptr},
                                         {R"({"id": "m1"})", "m1"},
                                         {R"({"id": "m2", "code": 5})", "m2"},
                                         {R"({"id": "m3", "code": "1"} trailing)", nullptr}}) {
    auto r = d->raw(c.line, c.id);
    EXPECT_EQ(r.status(), "error") << c.line;
    auto errors = r.of("error");
    ASSERT_EQ(errors.size(), 1u) << c.line;
    EXPECT_EQ(errors[0]["name"], "RequestError") << c.line;
    EXPECT_FALSE(errors[0].value("value", "").empty());
  }
  auto r = d->request("ok", "40 + 2");
  EXPECT_EQ(r.text(), "42");
}

TEST_P(SessionDriver, EofOnTheCommandStreamEndsTheDriver) {
  const auto& s = GetParam();
  auto lang = language(s.language);
  ASSERT_TRUE(lang);
  auto command = lang->buildSession();
  ASSERT_TRUE(command);
  Driver d(*command, dir_.path());
  ASSERT_TRUE(d.ready());
  EXPECT_TRUE(d.close()) << "the driver did not exit by itself with status 0";
}

// Start to ready, the round trip of `x += 1` and the idle RSS, printed for the report.
// Start to ready (against the bare interpreter writing one line to fd 3, interleaved so both
// see the same machine load), the round trip of `x += 1` and the idle RSS (against the bare
// interpreter's), printed for the report.
TEST_P(SessionDriver, Timings) {
  const auto& s = GetParam();
  auto lang = language(s.language);
  ASSERT_TRUE(lang);
  auto command = lang->buildSession();
  ASSERT_TRUE(command);
  Language::Command bare = *command;
  bare.argv.back() = s.language == "python"
                         ? "import os, sys\nos.write(3, b'{}\\n')\nsys.stdin.read()"
                         : "require('fs').writeSync(3, '{}\\n'); process.stdin.resume()";
  std::vector<double> ready_ms, bare_ms, first_ms, rt;
  long rss = 0, bare_rss = 0;
  for (int i = 0; i < 7; ++i) {
    double ms = 0;
    {
      Driver b(bare, dir_.path());
      ASSERT_TRUE(b.ready(&ms));
      bare_ms.push_back(ms);
      bare_rss = b.rssKiB();
    }
    auto d = start(s.language, &ms);
    ASSERT_TRUE(d);
    ready_ms.push_back(ms);
    // The first run waits for what the driver loads after ready (IPython).
    first_ms.push_back(d->request("r0", s.define_x).ms);
    if (i == 0) {
      rss = d->rssKiB();
      for (int j = 0; j < 300; ++j) {
        auto r = d->request("r" + std::to_string(j + 1), s.increment_x);
        ASSERT_EQ(r.status(), "ok");
        rt.push_back(r.ms);
      }
      EXPECT_EQ(d->request("last", "x").text(), "301");
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::sort(rt.begin(), rt.end());
  double p50 = rt[rt.size() / 2], p99 = rt[rt.size() * 99 / 100];
  std::cout << "[ timing ] " << s.language << ": start to ready median " << median(ready_ms)
            << " ms (bare interpreter " << median(bare_ms) << " ms); first run " << median(first_ms)
            << " ms; `x += 1` round trip p50 " << p50 << " ms, p99 " << p99 << " ms; idle RSS "
            << rss << " KiB (bare " << bare_rss << " KiB)\n";
  RecordProperty("ready_ms", std::to_string(median(ready_ms)));
  RecordProperty("bare_ready_ms", std::to_string(median(bare_ms)));
  RecordProperty("first_run_ms", std::to_string(median(first_ms)));
  RecordProperty("round_trip_p50_ms", std::to_string(p50));
  RecordProperty("idle_rss_kib", std::to_string(rss));
  // Loose bounds: shared, noisy machines; the numbers above are what to look at.
  EXPECT_LT(median(ready_ms), 5000);
  EXPECT_LT(p50, 100);
}

INSTANTIATE_TEST_SUITE_P(Languages, SessionDriver, ::testing::Values(kPython, kNode),
                         [](const auto& info) { return info.param.language; });

// --- Python ------------------------------------------------------------------------------------

std::string base64Decode(const std::string& in) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int bits = 0, value = 0;
  for (char c : in) {
    if (c == '=') break;
    auto i = kAlphabet.find(c);
    if (i == std::string::npos) return {};
    value = (value << 6) | static_cast<int>(i);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((value >> bits) & 0xff));
    }
  }
  return out;
}

bool pythonHas(const std::string& module) {
  return testing::runCommand({"/usr/bin/python3", "-c", "import " + module}).exit_code == 0;
}

TEST_F(SessionTest, PythonRichResults) {
  auto d = start("python");
  ASSERT_TRUE(d);
  auto r = d->request("r1",
                      "class Rich:\n"
                      "    def __repr__(self): return 'Rich()'\n"
                      "    def _repr_html_(self): return '<b>rich</b>'\n"
                      "    def _repr_png_(self): return b'\\x89PNG'\n"
                      "Rich()");
  ASSERT_EQ(r.of("result").size(), 1u);
  auto data = r.of("result")[0]["data"];
  EXPECT_EQ(data["text/plain"], "Rich()");
  EXPECT_EQ(data["text/html"], "<b>rich</b>");
  EXPECT_EQ(base64Decode(data["image/png"]), "\x89PNG");
  r = d->request("r2", "Rich");  // the class itself has no bound _repr_html_
  EXPECT_THAT(r.of("result")[0]["data"].size(), 1u);
  if (pythonHas("pandas")) {
    r = d->request("r3", "import pandas as pd\npd.DataFrame({'a': [1, 2]})");
    ASSERT_EQ(r.of("result").size(), 1u) << r.err;
    EXPECT_THAT(r.of("result")[0]["data"].value("text/html", ""), HasSubstr("<table"));
  }
}

TEST_F(SessionTest, PythonBehavesLikeANotebook) {
  auto d = start("python");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->request("r1", "__name__").text(), "'__main__'");
  // Classes defined in a cell pickle: __main__ is the cells' namespace.
  EXPECT_EQ(d->request("r2",
                       "import pickle\nclass P:\n    v = 3\n"
                       "pickle.loads(pickle.dumps(P())).v")
                .text(),
            "3");
  auto r = d->request("r3", "input()");
  EXPECT_EQ(r.status(), "error");
  EXPECT_EQ(r.of("error")[0]["name"], "EOFError");
  r = d->request("r4", "import asyncio\nawait asyncio.sleep(0)\nv = await asyncio.sleep(0, 7)\nv");
  EXPECT_EQ(r.text(), "7") << r.done.dump();
  r = d->request("r5", "exit(3)");  // ends the run, not the context
  EXPECT_EQ(r.status(), "error");
  EXPECT_EQ(r.of("error")[0]["name"], "SystemExit");
  EXPECT_EQ(d->request("r6", "v + 1").text(), "8");
  r = d->request("r7", "try:\n    1 / 0\nexcept Exception as e:\n    raise ValueError('v') from e");
  auto tb = r.of("error")[0]["traceback"].dump();
  EXPECT_THAT(tb, HasSubstr("ZeroDivisionError"));
  EXPECT_THAT(tb, HasSubstr("direct cause"));
  EXPECT_THAT(tb, Not(HasSubstr("<string>")));
  // Modules next to the code import, as in a notebook started there.
  dir_.write("helper_mod.py", "VALUE = 'from cwd'\n");
  EXPECT_EQ(d->request("r8", "import helper_mod\nhelper_mod.VALUE").text(), "'from cwd'");
}

// Jupyter's semantics, from IPython: display(), magics, shell escapes, execution_count.
TEST_F(SessionTest, PythonIsIPython) {
  auto d = start("python");
  ASSERT_TRUE(d);
  auto r = d->request("r1", "display('shown'); display({'a': 1}, raw=False)\n1 + 1");
  EXPECT_EQ(r.status(), "ok") << r.done.dump();
  auto displays = r.of("display");
  ASSERT_EQ(displays.size(), 2u) << r.done.dump();
  EXPECT_EQ(displays[0]["data"]["text/plain"], "'shown'");
  EXPECT_EQ(displays[1]["data"]["text/plain"], "{'a': 1}");
  EXPECT_EQ(r.text(), "2");
  EXPECT_EQ(r.done["execution_count"], 1);

  r = d->request("r2", "from IPython.display import HTML, Markdown\nHTML('<i>x</i>')");
  EXPECT_EQ(r.of("result").at(0)["data"]["text/html"], "<i>x</i>");
  EXPECT_EQ(r.done["execution_count"], 2);
  r = d->request("r3", "!echo from-shell\nfiles = !echo captured\nfiles[0]");
  EXPECT_EQ(r.status(), "ok") << r.err;
  EXPECT_EQ(r.out, "from-shell\n");
  EXPECT_EQ(r.text(), "'captured'");
  r = d->request("r4", "%%time\nsum(range(10))");
  EXPECT_EQ(r.status(), "ok") << r.err;
  EXPECT_THAT(r.out, HasSubstr("Wall time"));
  r = d->request("r5", "In[3].splitlines()[0], _3 if '_3' in dir() else None, Out.get(1)");
  EXPECT_THAT(r.text().value_or(""), HasSubstr("2"));
  // A trailing semicolon hides the value, as in a notebook.
  r = d->request("r6", "42;");
  EXPECT_TRUE(r.of("result").empty());
  EXPECT_EQ(r.done["execution_count"], 6);
  // Nothing of IPython's lands in HOME (no ~/.ipython, no history database).
  EXPECT_NE(::access((dir_.path() + "/.ipython").c_str(), F_OK), 0);
}

TEST_F(SessionTest, PythonEnvIsPerRun) {
  auto d = start("python");
  ASSERT_TRUE(d);
  auto r = d->raw(json({{"id", "e1"},
                        {"code",
                         "import os, subprocess\n"
                         "print(os.environ['AIRLOCK_T'], os.environ['LANG'])\n"
                         "subprocess.run(['sh', '-c', 'echo $AIRLOCK_T'])"},
                        {"env", {{"AIRLOCK_T", "one"}, {"LANG", "C"}}}})
                      .dump(),
                  "e1");
  EXPECT_EQ(r.status(), "ok") << r.err;
  EXPECT_EQ(r.out, "one C\none\n");
  r = d->request("e2", "os.environ.get('AIRLOCK_T'), os.environ['LANG']");
  EXPECT_EQ(r.text(), "(None, 'C.UTF-8')");
  r = d->raw(R"({"id": "e3", "code": "1", "env": {"A": 1}})", "e3");
  EXPECT_EQ(r.status(), "error");
  EXPECT_EQ(r.of("error").at(0)["name"], "RequestError");
}

// Every figure open at the end of a run comes back as a PNG, with its chart data beside it in
// E2B's shape: the five kinds and a figure of several axes.
TEST_F(SessionTest, PythonChartsDescribeTheirData) {
  if (!pythonHas("matplotlib")) {
    GTEST_SKIP() << "matplotlib is not installed";
  }
  auto d = start("python");
  ASSERT_TRUE(d);
  auto r = d->request(
      "r1",
      "import matplotlib.pyplot as plt\n"
      "plt.plot([1, 2, 3], [4, 5, 6], label='speed'); plt.title('Line'); plt.xlabel('Time (s)')\n"
      "plt.ylabel('Speed [m/s]')\n"
      "plt.figure(); plt.scatter([1, 2], [3, 4], label='pts'); plt.title('Scatter')\n"
      "plt.figure(); plt.bar(['a', 'b'], [3, 4], label='sales'); plt.title('Bar')\n"
      "plt.figure(); plt.pie([1, 3], labels=['x', 'y']); plt.title('Pie')\n"
      "plt.figure(); plt.boxplot([[1, 2, 3, 4, 5, 20], [2, 3, 4]], labels=['A', 'B'])\n"
      "plt.title('Box')\n"
      "fig, ax = plt.subplots(1, 2); ax[0].plot([1, 2]); ax[1].bar([1], [2]); fig.suptitle('Two')\n"
      "None");
  EXPECT_EQ(r.status(), "ok") << r.err;
  auto displays = r.of("display");
  ASSERT_EQ(displays.size(), 6u);
  std::vector<json> charts;
  for (const auto& disp : displays) {
    EXPECT_EQ(base64Decode(disp["data"].value("image/png", "")).substr(0, 4), "\x89PNG");
    charts.push_back(disp["data"]["application/vnd.airlock.chart+json"]);
  }
  const auto& line = charts[0];
  EXPECT_EQ(line["type"], "line");
  EXPECT_EQ(line["title"], "Line");
  EXPECT_EQ(line["x_label"], "Time (s)");
  EXPECT_EQ(line["x_unit"], "s");
  EXPECT_EQ(line["y_unit"], "m/s");
  EXPECT_EQ(line["x_scale"], "linear");
  EXPECT_FALSE(line["x_ticks"].empty());
  EXPECT_EQ(line["x_ticks"].size(), line["x_tick_labels"].size());
  EXPECT_EQ(line["elements"],
            json::parse(R"([{"label": "speed", "points": [[1,4],[2,5],[3,6]]}])"));
  EXPECT_EQ(charts[1]["type"], "scatter");
  EXPECT_EQ(charts[1]["elements"], json::parse(R"([{"label": "pts", "points": [[1,3],[2,4]]}])"));
  EXPECT_EQ(charts[2]["type"], "bar");
  EXPECT_EQ(charts[2]["elements"], json::parse(R"([{"label": "a", "group": "sales", "value": 3},
                                                   {"label": "b", "group": "sales", "value": 4}])"));
  EXPECT_EQ(charts[3]["type"], "pie");
  EXPECT_EQ(charts[3]["title"], "Pie");
  EXPECT_EQ(charts[3]["elements"], json::parse(R"([{"label": "x", "angle": 90, "radius": 1},
                                                   {"label": "y", "angle": 270, "radius": 1}])"));
  EXPECT_EQ(charts[4]["type"], "box_and_whisker");
  EXPECT_EQ(charts[4]["elements"], json::parse(R"([
      {"label": "A", "min": 1, "first_quartile": 2.25, "median": 3.5, "third_quartile": 4.75,
       "max": 5, "outliers": [20]},
      {"label": "B", "min": 2, "first_quartile": 2.5, "median": 3, "third_quartile": 3.5,
       "max": 4, "outliers": []}])"));
  EXPECT_EQ(charts[5]["type"], "superchart");
  EXPECT_EQ(charts[5]["title"], "Two");
  ASSERT_EQ(charts[5]["elements"].size(), 2u);
  EXPECT_EQ(charts[5]["elements"][0]["type"], "line");
  EXPECT_EQ(charts[5]["elements"][1]["type"], "bar");
  for (const auto& disp : displays)
    EXPECT_THAT(disp["data"].value("text/plain", ""), HasSubstr("Figure"));
  EXPECT_TRUE(r.of("result").empty());
  // Shown figures are closed: the next run displays nothing.
  r = d->request("r2", "len(plt.get_fignums())");
  EXPECT_EQ(r.text(), "0");
  EXPECT_TRUE(r.of("display").empty());
  r = d->request("r3", "import os\nos.environ['MPLBACKEND']");
  EXPECT_EQ(r.text(), "'Agg'");
}

// --- bash ----------------------------------------------------------------------------------------

class SessionBash : public SessionTest {
 protected:
  void SetUp() override {
    if (::access("/usr/bin/bash", X_OK) != 0) {
      GTEST_SKIP() << "/usr/bin/bash is not installed";
    }
  }
};

TEST_F(SessionBash, StatePersistsBetweenRuns) {
  auto d = start("shell");
  ASSERT_TRUE(d);
  auto r = d->request("r1", "cd /tmp && x=41 && greet() { echo \"hello $1\"; }");
  EXPECT_EQ(r.status(), "ok") << r.err;
  EXPECT_EQ(r.done["execution_count"], 1);
  r = d->request("r2", "pwd; echo $((x + 1)); greet you");
  EXPECT_EQ(r.status(), "ok") << r.err;
  EXPECT_EQ(r.out, "/tmp\n42\nhello you\n");
  EXPECT_EQ(r.done["execution_count"], 2);
  // Quotes, backslashes, newlines and non-ASCII text survive the JSON request.
  r = d->request("r3", "printf '%s\\n' \"a \\\"q\\\" \\\\ b\" 'ü'\necho two");
  EXPECT_EQ(r.out, "a \"q\" \\ b\nü\ntwo\n");
}

TEST_F(SessionBash, StatusExitAndStdin) {
  auto d = start("shell");
  ASSERT_TRUE(d);
  auto r = d->request("r1", "echo out; echo err >&2; false");
  EXPECT_EQ(r.status(), "error");
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  ASSERT_EQ(r.of("error").size(), 1u);
  EXPECT_EQ(r.of("error")[0]["name"], "CommandExitError");
  EXPECT_EQ(r.of("error")[0]["value"], "exit status 1");
  // exit ends the run with its status; the shell and its state stay.
  r = d->request("r2", "kept=yes; exit 3; echo not-reached");
  EXPECT_EQ(r.status(), "error");
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.of("error").at(0)["value"], "exit status 3");
  r = d->request("r3", "f() { exit 0; echo no; }; f; echo no");
  EXPECT_EQ(r.status(), "ok");
  EXPECT_EQ(r.out, "");
  r = d->request("r3b", "(exit 4); echo \"subshell=$?\"");  // in a subshell: the builtin
  EXPECT_EQ(r.status(), "ok");
  EXPECT_EQ(r.out, "subshell=4\n");
  // Reading stdin sees EOF, never the next request; children get neither private pipe.
  r = d->request("r4", "read line; echo \"read=$?\"; cat; echo \"cat=$?\"; ls -l /proc/self/fd/");
  auto pipe = [](ino_t ino) { return "pipe:[" + std::to_string(ino) + "]"; };
  EXPECT_THAT(r.out, ::testing::StartsWith("read=1\ncat=0\n"));
  EXPECT_THAT(r.out, HasSubstr("0 -> /dev/null"));
  EXPECT_THAT(r.out, HasSubstr(pipe(d->stdoutInode())));
  EXPECT_THAT(r.out, Not(HasSubstr(pipe(d->controlInode()))));
  EXPECT_THAT(r.out, Not(HasSubstr(pipe(d->stdinInode()))));
  // Printing what looks like the driver's events changes nothing: they go to stdout.
  r = d->request("r5", "echo '{\"type\":\"done\",\"id\":\"r5\",\"status\":\"ok\"}'; echo $kept");
  EXPECT_EQ(r.out, "{\"type\":\"done\",\"id\":\"r5\",\"status\":\"ok\"}\nyes\n");
  // Per-run environment, restored afterwards.
  r = d->raw(
      json({{"id", "r6"}, {"code", "echo $T1; sh -c 'echo $T1'"}, {"env", {{"T1", "v"}}}}).dump(),
      "r6");
  EXPECT_EQ(r.out, "v\nv\n");
  r = d->request("r7", "echo \"${T1-unset}\"");
  EXPECT_EQ(r.out, "unset\n");
}

TEST_F(SessionBash, SigintEndsLoopsAndKeepsTheShell) {
  auto d = start("shell");
  ASSERT_TRUE(d);
  d->request("r1", "kept=1");
  for (const std::string code : {"echo spinning; while :; do :; done; echo after",
                                 "echo spinning; spin() { while :; do :; done; }; spin; echo after",
                                 "echo spinning; sleep 30; echo after"}) {
    d->send(json({{"id", "spin"}, {"code", code}}).dump());
    ASSERT_TRUE(d->waitForOutput("spinning"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    d->interrupt();
    std::optional<json> e;
    std::vector<json> events;
    do {
      e = d->event(10000);
      ASSERT_TRUE(e) << "no done after SIGINT for " << code;
      events.push_back(*e);
    } while ((*e)["type"] != "done");
    EXPECT_EQ(events.back()["status"], "interrupted") << code;
    EXPECT_EQ(events.front()["name"], "KeyboardInterrupt");
    auto r = d->request("after", "echo $kept");
    EXPECT_EQ(r.out, "1\n") << code;
  }
  d->interrupt();  // between runs: harmless
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(d->request("last", "echo $kept").out, "1\n");
}

TEST_F(SessionBash, MalformedRequestsGetAnError) {
  auto d = start("shell");
  ASSERT_TRUE(d);
  for (const auto& [line, id] : std::vector<std::pair<std::string, json>>{
           {"not json", nullptr},
           {R"({"code": "1"})", nullptr},
           {R"({"id": "m1"})", "m1"},
           {R"({"id": "m2", "code": 5})", "m2"},
           {R"({"id": "m3", "code": "true", "env": {"1x": "v"}})", "m3"}}) {
    auto r = d->raw(line, id);
    EXPECT_EQ(r.status(), "error") << line;
    ASSERT_EQ(r.of("error").size(), 1u) << line;
    EXPECT_EQ(r.of("error")[0]["name"], "RequestError") << line;
  }
  EXPECT_EQ(d->request("ok", "echo fine").out, "fine\n");
  EXPECT_TRUE(d->close()) << "EOF on the command stream ends the shell with status 0";
}

// --- Node --------------------------------------------------------------------------------------

class SessionNode : public SessionTest {
 protected:
  void SetUp() override {
    if (::access("/usr/bin/node", X_OK) != 0) {
      GTEST_SKIP() << "/usr/bin/node is not installed";
    }
  }
};

TEST_F(SessionNode, DeclarationsPersist) {
  auto d = start("node");
  ASSERT_TRUE(d);
  auto r = d->request("r1",
                      "let a = 1; const b = 2; var c = 3;\nfunction add(x, y) { return x + y }\n"
                      "class Box { constructor(v) { this.v = v } }");
  EXPECT_EQ(r.status(), "ok") << r.of("error").size();
  r = d->request("r2", "add(a, b) + c + new Box(4).v");
  EXPECT_EQ(r.text(), "10");
  r = d->request("r3", "({a, b: [1, 'two']})");
  EXPECT_EQ(r.text(), "{ a: 1, b: [ 1, 'two' ] }");
  r = d->request("r4", "{x: 1}");  // an object, as in the REPL
  EXPECT_EQ(r.text(), "{ x: 1 }");
  r = d->request("r5",
                 "[1, 2] instanceof Array && require('fs').readdirSync('/') instanceof Array");
  EXPECT_EQ(r.text(), "true");  // one realm: values from modules are the cells' own kind
  dir_.write("local_mod.js", "module.exports = {answer: 42};\n");
  EXPECT_EQ(d->request("r6", "require('./local_mod.js').answer").text(), "42");
  r = d->request("r7", "throw 'plain'");
  EXPECT_EQ(r.status(), "error");
  EXPECT_EQ(r.of("error")[0]["value"], "'plain'");
}

TEST_F(SessionNode, AwaitAndPromises) {
  auto d = start("node");
  ASSERT_TRUE(d);
  auto r =
      d->request("r1", "const w = await new Promise(r => setTimeout(() => r(41), 20));\nw + 1");
  EXPECT_EQ(r.status(), "ok") << (r.of("error").empty() ? "" : r.of("error")[0].dump());
  EXPECT_EQ(r.text(), "42");
  EXPECT_EQ(d->request("r2", "w").text(), "41");  // declared under await, still there
  r = d->request("r3", "new Promise(r => setTimeout(() => r('later'), 20))");
  EXPECT_EQ(r.text(), "'later'");  // a returned promise is awaited
  r = d->request("r4", "await Promise.reject(new TypeError('nope'))");
  EXPECT_EQ(r.status(), "error");
  EXPECT_EQ(r.of("error")[0]["name"], "TypeError");
  r = d->request("r5", "(await import('path')).sep");
  EXPECT_EQ(r.text(), "'/'");
  EXPECT_EQ(r.err, "") << "no experimental warning for import()";
}

TEST_F(SessionNode, TimeoutInterruptsLoopsAndPendingPromises) {
  auto d = start("node");
  ASSERT_TRUE(d);
  d->request("r1", "let kept = 'yes'");
  auto t0 = Clock::now();
  auto r = d->request("r2", "while (true) {}", 300);
  EXPECT_EQ(r.status(), "interrupted") << r.done.dump();
  EXPECT_LT(msSince(t0), 10000);
  ASSERT_EQ(r.of("error").size(), 1u);
  EXPECT_THAT(r.of("error")[0].value("value", ""), HasSubstr("timed out"));
  r = d->request("r3", "await new Promise(() => {})", 200);
  EXPECT_EQ(r.status(), "interrupted");
  r = d->request("r4", "new Promise(() => {})", 200);
  EXPECT_EQ(r.status(), "interrupted");
  EXPECT_EQ(d->request("r5", "kept").text(), "'yes'");
  // A pending promise also yields to SIGINT.
  d->send(json({{"id", "r6"}, {"code", "console.log('waiting'); new Promise(() => {})"}}).dump());
  ASSERT_TRUE(d->waitForOutput("waiting"));
  d->interrupt();
  auto e = d->event(10000);
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "error");
  e = d->event(10000);
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["status"], "interrupted");
  EXPECT_EQ(d->request("r7", "kept").text(), "'yes'");
}

TEST_F(SessionNode, BackgroundErrorsDoNotEndTheContext) {
  auto d = start("node");
  ASSERT_TRUE(d);
  auto r = d->request("r1",
                      "setTimeout(() => { throw new Error('late boom') }, 10);\n"
                      "void Promise.reject(new Error('ignored'));\n"
                      "var alive = 'still'");
  EXPECT_EQ(r.status(), "ok");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  r = d->request("r2", "alive");
  EXPECT_EQ(r.text(), "'still'");
}

}  // namespace
}  // namespace airlock::plugin::test
