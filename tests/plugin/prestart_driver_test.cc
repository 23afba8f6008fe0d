// The Python and Node prestart drivers (AIRLOCK_CODE_PRESTART), started with the command their
// plugin builds (so the embedding is tested too) as plain host processes, side by side with the
// one-shot command the same plugin builds for the same program: stdout, stderr and the exit
// status must be the same bytes. The prestarted process gets the request header and JSON on
// stdin, followed by the program's own stdin.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "airlock/unique_fd.h"
#include "plugin_test_util.h"
#include "supervisor/plugin/registry.h"

namespace airlock::plugin::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// How a process ended and what it wrote.
struct Outcome {
  std::string out, err;
  int status = -1;  // exit code, or 128 + the signal that killed it
  bool operator==(const Outcome&) const = default;
};

void PrintTo(const Outcome& o, std::ostream* os) {
  *os << "status " << o.status << "\n--- stdout ---\n" << o.out << "\n--- stderr ---\n" << o.err;
}

// Runs argv in cwd with env, feeding `input` on stdin (the first `trickle` bytes one at a time,
// a little apart, so a reader sees a request arrive in pieces), and collects everything.
Outcome spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
              const std::string& cwd, const std::string& input, size_t trickle = 0) {
  auto pipe = [](UniqueFd& r, UniqueFd& w) {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    r.reset(fds[0]);
    w.reset(fds[1]);
  };
  UniqueFd in_r, in_w, out_r, out_w, err_r, err_w;
  pipe(in_r, in_w);
  pipe(out_r, out_w);
  pipe(err_r, err_w);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_r.get(), 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_w.get(), 2);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);  // SIGPIPE and SIGINT as a fresh process has them
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  Outcome o;
  EXPECT_EQ(rc, 0) << "posix_spawn " << argv[0];
  if (rc != 0) return o;
  in_r.reset();
  out_w.reset();
  err_w.reset();
  for (int fd : {in_w.get(), out_r.get(), err_r.get()})
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  size_t written = 0;
  if (input.empty()) in_w.reset();
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (out_r || err_r) {
    if (Clock::now() > deadline) {
      ADD_FAILURE() << "timed out: " << argv[0];
      ::kill(pid, SIGKILL);
      break;
    }
    std::vector<pollfd> fds;
    if (out_r) fds.push_back({out_r.get(), POLLIN, 0});
    if (err_r) fds.push_back({err_r.get(), POLLIN, 0});
    bool trickling = in_w && written < trickle;
    if (in_w && !trickling) fds.push_back({in_w.get(), POLLOUT, 0});
    ::poll(fds.data(), fds.size(), trickling ? 2 : 100);
    if (in_w) {
      size_t n = trickling ? 1 : input.size() - written;
      ssize_t w = ::write(in_w.get(), input.data() + written, n);
      if (w > 0) written += static_cast<size_t>(w);
      if ((w < 0 && errno != EAGAIN) || written == input.size()) in_w.reset();  // EPIPE: done
    }
    for (auto* pair : {&out_r, &err_r}) {
      if (!*pair) continue;
      char buf[65536];
      ssize_t n;
      while ((n = ::read(pair->get(), buf, sizeof buf)) > 0)
        (pair == &out_r ? o.out : o.err).append(buf, n);
      if (n == 0) pair->reset();
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

// One program, as airlock would run it: inline code or a file, and its arguments.
struct Program {
  std::optional<std::string> code, path;
  std::vector<std::string> args;
  bool fast_exit = false;  // the request's "fast_exit" (lifetime.fast_exit)
};
Program inlineCode(std::string code, std::vector<std::string> args = {}) {
  return {std::move(code), std::nullopt, std::move(args)};
}
Program file(std::string path, std::vector<std::string> args = {}) {
  return {std::nullopt, std::move(path), std::move(args)};
}

// The request a prestarted interpreter reads from stdin.
std::string frame(const Program& p) {
  json r = {{"code", p.code ? json(*p.code) : json(nullptr)},
            {"path", p.path ? json(*p.path) : json(nullptr)},
            {"args", p.args}};
  if (p.fast_exit) r["fast_exit"] = true;
  std::string body = r.dump();
  return std::to_string(body.size()) + "\n" + body;
}

class Prestart : public ::testing::Test {
 protected:
  std::shared_ptr<Language> language(const std::string& name) {
    auto l = registry_.language(name, "{}");
    EXPECT_TRUE(l) << l.error().message();
    return l ? *l : nullptr;
  }
  Result<Language::Command> prestartCommand(const std::string& name,
                                            const std::vector<std::string>& modules) {
    auto lang = language(name);
    std::vector<const char*> args;
    for (const auto& m : modules) args.push_back(m.c_str());
    args.push_back(nullptr);
    airlock_code_request_v1 request{};
    request.struct_size = sizeof request;
    request.source = AIRLOCK_CODE_PRESTART;
    request.args = args.data();
    return lang->build(request);
  }
  // What the agent adds around the plugin's variables, as in session_driver_test.cc.
  std::vector<std::string> env(const Language::Command& c) const {
    std::vector<std::string> e = c.env;
    e.insert(e.end(), {"PATH=/usr/bin:/bin", "HOME=" + dir_.path(), "LANG=C.UTF-8"});
    return e;
  }
  Outcome native(const std::string& name, const Program& p, const std::string& input = "") {
    auto lang = language(name);
    auto c = p.code ? lang->buildInline(*p.code, p.args) : lang->buildFile(*p.path, p.args);
    EXPECT_TRUE(c) << c.error().message();
    return c ? spawn(c->argv, env(*c), dir_.path(), input) : Outcome{};
  }
  Outcome prestarted(const std::string& name, const Program& p, const std::string& input = "",
                     const std::vector<std::string>& modules = {}, size_t trickle = 0) {
    auto c = prestartCommand(name, modules);
    EXPECT_TRUE(c) << c.error().message();
    return c ? spawn(c->argv, env(*c), dir_.path(), frame(p) + input, trickle) : Outcome{};
  }
  // The same program, natively and prestarted: byte for byte the same outcome, but for the pid
  // node puts in its warnings.
  Outcome expectSame(const std::string& name, const Program& p, const std::string& input = "",
                     const std::vector<std::string>& modules = {}) {
    Outcome want = native(name, p, input);
    Outcome got = prestarted(name, p, input, modules);
    static const std::regex pid(R"(\(node:[0-9]+\))");
    for (Outcome* o : {&want, &got}) o->err = std::regex_replace(o->err, pid, "(node:PID)");
    EXPECT_EQ(got, want) << "program: " << p.code.value_or(p.path.value_or(""));
    return got;
  }

  Registry registry_ = Registry::loadDirectory(testing::pluginDir(), ownedByMe());
  testing::TempDir dir_;
};

bool pythonHas(const std::string& module) {
  return testing::runCommand({"/usr/bin/python3", "-c", "import " + module}).exit_code == 0;
}

// --- the commands
// ---------------------------------------------------------------------------------

const std::vector<std::string> kPythonEnv = {"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1",
                                             "MPLBACKEND=Agg", "PYTHONIOENCODING=utf-8"};

TEST_F(Prestart, CommandsEmbedTheDriversAndPassTheModules) {
  std::string src = testing::sourceDir() + "/plugins/language/";
  auto py = prestartCommand("python", {"pandas", "matplotlib.pyplot"});
  ASSERT_TRUE(py) << py.error().message();
  // No -u: the one-shot command has none; both get the same environment.
  EXPECT_THAT(py->argv, ElementsAre("/usr/bin/python3", "-c",
                                    testing::readFile(src + "python/prestart_driver.py"), "pandas",
                                    "matplotlib.pyplot"));
  EXPECT_EQ(py->env, kPythonEnv);
  EXPECT_EQ(py->env, language("python")->buildInline("1")->env);

  auto node = prestartCommand("node", {"lodash"});
  ASSERT_TRUE(node) << node.error().message();
  EXPECT_THAT(node->argv,
              ElementsAre("/usr/bin/node", "--expose-internals", "-e",
                          testing::readFile(src + "node/prestart_driver.js"), "--", "lodash"));
  EXPECT_TRUE(node->env.empty());
}

TEST_F(Prestart, ModuleNamesAreChecked) {
  for (const char* bad : {"", "-m", "a b", "a..b", "1abc", ".x", "x.", "os;rm"}) {
    auto c = prestartCommand("python", {"json", bad});
    ASSERT_FALSE(c) << bad;
    EXPECT_EQ(c.error().errnum(), EINVAL) << bad;
  }
  EXPECT_TRUE(prestartCommand("python", {"_x.y2", "numpy.linalg"}));
  for (const char* bad : {"", "--inspect"}) {
    auto c = prestartCommand("node", {bad});
    ASSERT_FALSE(c) << bad;
    EXPECT_EQ(c.error().errnum(), EINVAL) << bad;
  }
  EXPECT_TRUE(prestartCommand("node", {"@scope/pkg", "lodash/fp", "./local"}));
}

TEST_F(Prestart, ShellCannotPrestart) {
  auto c = prestartCommand("shell", {});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().errnum(), ENOTSUP);
  EXPECT_THAT(c.error().message(), HasSubstr("no prestart driver for shell"));
}

// --- Python, side by side with python3 -c / python3 FILE ---------------------------------------

TEST_F(Prestart, PythonIdentity) {
  expectSame("python",
             inlineCode("import sys\n"
                        "print(sys.argv, sys.orig_argv[1:])\n"
                        "print(__name__, repr(sys.path[0]), '__file__' in globals(), __spec__,\n"
                        "      __package__, __loader__)\n"
                        "print(globals())\n"
                        "print(sys.path)\n",
                        {"a b", "-c", "--x", "ü"}));
  expectSame("python", inlineCode("\"\"\"the doc\"\"\"\nfrom __future__ import annotations\n"
                                  "def f(x: int) -> str: pass\nprint(__doc__, f.__annotations__)"));
}

TEST_F(Prestart, PythonReadsTheRestOfStdin) {
  // Bytes that look like another request: the driver must read exactly its own.
  std::string input = "12\n{\"code\": \"x\"}\n";
  for (int i = 0; i < 256; ++i) input.push_back(static_cast<char>(i));
  input += std::string(300 * 1024, 'z') + "end";
  expectSame("python",
             inlineCode("import sys, hashlib\ndata = sys.stdin.buffer.read()\n"
                        "print(len(data), data[:20], hashlib.sha256(data).hexdigest())"),
             input);
  expectSame("python", inlineCode("print(input())\nprint(input())\nprint(input())"),
             "first\nsecond\n");
  expectSame("python", inlineCode("import sys\nprint(sys.stdin.read() == '', sys.stdin.isatty())"));
}

TEST_F(Prestart, PythonExitStatus) {
  EXPECT_EQ(expectSame("python", inlineCode("import sys\nprint('x')\nsys.exit(3)")).status, 3);
  EXPECT_EQ(expectSame("python", inlineCode("import sys\nsys.exit()")).status, 0);
  auto r = expectSame("python", inlineCode("raise SystemExit('a message')"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "a message\n");
  EXPECT_EQ(expectSame("python", inlineCode("exit(5)")).status, 5);
  EXPECT_EQ(
      expectSame("python", inlineCode("import os\nprint('lost?', end='')\nos._exit(4)")).status, 4);
  // Killed by its own SIGINT after the traceback, as the interpreter does.
  EXPECT_EQ(expectSame("python", inlineCode("raise KeyboardInterrupt")).status, 128 + SIGINT);
  expectSame("python",
             inlineCode("import atexit\natexit.register(print, 'bye')\nprint('hi')\n1 / 0"));
}

// With fast_exit the interpreter ends as natively up to atexit and the stdio flush, then skips
// the module teardown: every ending a program can choose looks the same.
TEST_F(Prestart, PythonFastExitEndsAsTheInterpreterDoes) {
  auto fast = [](std::string code) {
    Program p = inlineCode(std::move(code));
    p.fast_exit = true;
    return p;
  };
  EXPECT_EQ(expectSame("python", fast("print(1)")).out, "1\n");
  EXPECT_EQ(expectSame("python", fast("import sys\nprint('x')\nsys.exit(3)")).status, 3);
  EXPECT_EQ(expectSame("python", fast("import sys\nsys.exit()")).status, 0);
  EXPECT_EQ(expectSame("python", fast("raise SystemExit('a message')")).err, "a message\n");
  // A code past C's long keeps the native ending (-1: status 255).
  EXPECT_EQ(expectSame("python", fast("raise SystemExit(2 ** 70 + 3)")).status, 255);
  EXPECT_EQ(expectSame("python", fast("raise KeyboardInterrupt")).status, 128 + SIGINT);
  EXPECT_EQ(expectSame("python", fast("def f():\n    raise ValueError('v')\nf()")).status, 1);
  expectSame("python", fast("x = ("));
  expectSame("python", fast("import sys\nsys.stdout.write('no newline, buffered')"));
  expectSame("python", fast("import atexit\natexit.register(print, 'bye')\nprint('hi')\n1 / 0"));
  expectSame("python", fast("import threading, time\n"
                            "def late():\n    time.sleep(0.2)\n    print('thread done')\n"
                            "threading.Thread(target=late).start()\nprint('main done')"));
  expectSame("python", fast("import sys\n"
                            "def hook(t, v, tb):\n"
                            "    print('hook', t.__name__, tb.tb_frame.f_code.co_filename,\n"
                            "          tb.tb_next is None, sys.last_value)\n"
                            "sys.excepthook = hook\n1 / 0"));
  expectSame("python", fast("import sys\n"
                            "def hook(t, v, tb):\n    raise RuntimeError('hook failed')\n"
                            "sys.excepthook = hook\n1 / 0"));
  expectSame("python", fast("import sys\ndel sys.excepthook\n1 / 0"));
  // The one difference, which is why it is an opt-in: what only the teardown would finalize.
  const std::string finalizer =
      "class Noisy:\n    def __del__(self):\n        print('finalized')\nkept = Noisy()\n";
  EXPECT_EQ(native("python", inlineCode(finalizer)).out, "finalized\n");
  EXPECT_EQ(prestarted("python", fast(finalizer)).out, "");
  EXPECT_EQ(prestarted("python", inlineCode(finalizer)).out, "finalized\n");
}

TEST_F(Prestart, PythonTracebacksAreTheInterpreters) {
  auto r = expectSame("python", inlineCode("def f():\n    raise ValueError('bad value')\n\n"
                                           "def g():\n    f()\n\ng()"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, StartsWith("Traceback (most recent call last):\n  File \"<string>\", line 7"));
  expectSame("python", inlineCode("try:\n    1 / 0\nexcept Exception as e:\n"
                                  "    raise KeyError('k') from e"));
  expectSame("python", inlineCode("x = ("));  // SyntaxError: no traceback
  expectSame("python", inlineCode("import warnings\nwarnings.warn('careful')\nprint(1)"));
  // A hook of the program's own sees only the program's frames.
  expectSame("python", inlineCode("import sys\n"
                                  "def hook(t, v, tb):\n"
                                  "    print('hook', t.__name__, tb.tb_frame.f_code.co_filename,\n"
                                  "          tb.tb_next is None, sys.last_value if hasattr(sys,\n"
                                  "          'last_value') else None)\n"
                                  "sys.excepthook = hook\n1 / 0"));
}

TEST_F(Prestart, PythonFileProgramsWithArguments) {
  dir_.write("sub/prog.py",
             "import sys\n"
             "print(sys.argv, sys.orig_argv[1:], __name__, __file__, __cached__)\n"
             "print(sys.path[0], type(__loader__).__name__, __loader__.path, list(globals()))\n"
             "print(repr(sys.stdin.read()))\n"
             "def fail(x):\n"
             "    raise ValueError(x)\n"
             "fail(sys.argv[1:])\n");
  Outcome r = expectSame("python", file(dir_.file("sub/prog.py"), {"one", "-2"}), "in\nput");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("    raise ValueError(x)\n"));  // the file's lines are shown
  expectSame("python", file("sub/prog.py", {"relative"}));
  expectSame("python", file("./sub/../sub/prog.py"));
  dir_.write("-dash.py", "import sys\nprint(sys.argv, __file__)\n");
  expectSame("python", file("-dash.py"));
  dir_.write("bad.py", "print('never')\ndef f(:\n");
  expectSame("python", file("bad.py"));
  dir_.write("latin.py", "# -*- coding: latin-1 -*-\nprint('caf\xe9')\n");
  expectSame("python", file("latin.py"));
  EXPECT_EQ(expectSame("python", file(dir_.file("missing.py"))).status, 2);
}

TEST_F(Prestart, PythonProgramsImportPreloadedModules) {
  Program p = inlineCode(
      "import sys\nimported = 'email.mime.text' in sys.modules\n"
      "import json, email.mime.text\n"
      "print(json.dumps({'a': [1, 2]}), email.mime.text.MIMEText('x').get_content_type())\n");
  expectSame("python", p, "", {"json", "email.mime.text"});
  // Prestarted, the module was there before the program imported it.
  Outcome r =
      prestarted("python", inlineCode("import sys\nprint('email.mime.text' in sys.modules)"), "",
                 {"json", "email.mime.text"});
  EXPECT_EQ(r.out, "True\n") << r.err;
  r = native("python", inlineCode("import sys\nprint('email.mime.text' in sys.modules)"));
  EXPECT_EQ(r.out, "False\n") << r.err;
}

TEST_F(Prestart, PythonPreloadsThatFailLeaveNoTrace) {
  // Missing, and one that fails halfway: the program's own import fails as it would natively.
  dir_.write("broken_mod.py", "print('loading broken_mod')\nraise RuntimeError('broken')\n");
  Program p = inlineCode(
      "import sys\nprint([m in sys.modules for m in ('no_such_module_xyz', 'broken_mod')])\n"
      "try:\n    import broken_mod\nexcept RuntimeError as e:\n    print('caught', e)\n"
      "import no_such_module_xyz\n");
  auto r = expectSame("python", p, "", {"no_such_module_xyz", "broken_mod", "json"});
  EXPECT_THAT(r.err, HasSubstr("ModuleNotFoundError: No module named 'no_such_module_xyz'"));
  EXPECT_THAT(r.out, HasSubstr("loading broken_mod"));
}

TEST_F(Prestart, PythonPreloadSideEffectsAreUndone) {
  // Output, warning filters, sys.path, sys.argv, the environment, the working directory, signal
  // handlers and the hooks: none of it reaches a program that does not import the module.
  dir_.write("noisy_mod.py",
             "import os, sys, signal, warnings\n"
             "print('noise on stdout')\n"
             "sys.stderr.write('noise on stderr\\n')\n"
             "os.write(2, b'noise on fd 2\\n')\n"
             "warnings.warn('noise as a warning')\n"
             "warnings.simplefilter('ignore')\n"
             "sys.path.append('/noisy')\n"
             "sys.argv.append('noisy')\n"
             "os.environ['NOISY'] = '1'\n"
             "os.environ.pop('LANG', None)\n"
             "os.chdir('/')\n"
             "signal.signal(signal.SIGTERM, lambda *a: None)\n"
             "sys.excepthook = lambda *a: print('noisy hook')\n"
             "sys.setrecursionlimit(50)\n"
             "os.umask(0o077)\n");
  Program p = inlineCode(
      "import os, sys, signal, warnings\n"
      "warnings.warn('the program warns')\n"
      "print(os.getcwd(), sys.argv, sys.path, os.environ.get('NOISY'), os.environ.get('LANG'))\n"
      "print(signal.getsignal(signal.SIGTERM), sys.getrecursionlimit(), oct(os.umask(0o22)))\n"
      "raise ValueError('shown by the default hook')\n");
  auto r = expectSame("python", p, "", {"noisy_mod"});
  EXPECT_THAT(r.out + r.err, Not(HasSubstr("noise")));
}

TEST_F(Prestart, PythonDataScienceModules) {
  if (!pythonHas("pandas") || !pythonHas("matplotlib")) {
    GTEST_SKIP() << "pandas or matplotlib is not installed";
  }
  // matplotlib writes its font cache under HOME on first use (and says so on stderr): once first.
  native("python", inlineCode("import matplotlib.pyplot"));
  Program p = inlineCode(
      "import os\nimport matplotlib.pyplot as plt\nimport pandas as pd\n"
      "df = pd.DataFrame({'a': [1, 2, 3]})\n"
      "plt.plot(df['a'])\nplt.savefig('plot.png')\n"
      "print(plt.get_backend(), df['a'].sum(), os.path.getsize('plot.png') > 0)\n");
  auto r = expectSame("python", p, "", {"pandas", "matplotlib.pyplot"});
  EXPECT_EQ(r.out, "agg 6 True\n") << r.err;
}

// --- the request framing -------------------------------------------------------------------------

TEST_F(Prestart, RequestArrivingInPiecesIsReadWhole) {
  std::string input = "7\nabc\n12";
  Program p = inlineCode("import sys\nprint(repr(sys.stdin.read()))");
  Outcome want = native("python", p, input);
  std::string request = frame(p);
  EXPECT_EQ(prestarted("python", p, input, {"json"}, request.size() + 3), want);
  if (::access("/usr/bin/node", X_OK) == 0) {
    Program n = inlineCode("process.stdin.setEncoding('utf8').on('data', (d) => console.log(d))");
    EXPECT_EQ(prestarted("node", n, input, {"path"}, request.size() + 3), native("node", n, input));
  }
}

TEST_F(Prestart, EndOfStdinBeforeARequestIsAQuietExit) {
  for (const char* lang : {"python", "node"}) {
    if (std::string(lang) == "node" && ::access("/usr/bin/node", X_OK) != 0) continue;
    auto c = prestartCommand(lang, {});
    ASSERT_TRUE(c);
    EXPECT_EQ(spawn(c->argv, env(*c), dir_.path(), ""), (Outcome{"", "", 0})) << lang;
  }
}

TEST_F(Prestart, MalformedRequestsFailWithStatus2) {
  for (const char* lang : {"python", "node"}) {
    if (std::string(lang) == "node" && ::access("/usr/bin/node", X_OK) != 0) continue;
    auto c = prestartCommand(lang, {});
    ASSERT_TRUE(c);
    for (const std::string& input :
         {std::string("abc\n"), std::string("\n{}"), std::string("10\n{}"), std::string("2\n[]"),
          std::string("4\nnull"), std::string("14\n{\"code\": null}"),
          std::string("26\n{\"code\": \"1\", \"path\": \"x\"}"),
          std::string("24\n{\"code\": \"1\", \"args\": 1}"), std::string("5\n{\"a\":")}) {
      Outcome r = spawn(c->argv, env(*c), dir_.path(), input);
      EXPECT_EQ(r.status, 2) << lang << " " << input;
      EXPECT_THAT(r.err, StartsWith("airlock prestart: ")) << lang << " " << input;
      EXPECT_EQ(r.out, "") << lang << " " << input;
    }
  }
}

// --- Node, side by side with node -e CODE -- ARGS / node FILE ARGS ------------------------------

class PrestartNode : public Prestart {
 protected:
  void SetUp() override {
    if (::access("/usr/bin/node", X_OK) != 0) {
      GTEST_SKIP() << "/usr/bin/node is not installed";
    }
  }
};

TEST_F(PrestartNode, Identity) {
  std::string identity =
      "console.log(JSON.stringify(process.argv), JSON.stringify(process.execArgv), __filename,\n"
      "  __dirname, module.id, module.filename, JSON.stringify(module.paths), require.main,\n"
      "  typeof fs, typeof path.join, process._eval === undefined, process.mainModule);\n"
      "console.log(Object.keys(globalThis).join(), "
      "Object.getOwnPropertyNames(globalThis).length);\n"
      "setTimeout(() => console.log(module === require('module'), "
      "Object.keys(globalThis).join()));";
  expectSame("node", inlineCode(identity, {"--version", "a b", "ü"}));
  // The word that makes -e define the web-crypto global as node:crypto.
  expectSame("node",
             inlineCode("console.log(typeof crypto.randomUUID, crypto === require('crypto'))"));
}

TEST_F(PrestartNode, ReadsTheRestOfStdin) {
  std::string input = "12\n{\"code\": \"x\"}\n";
  for (int i = 0; i < 256; ++i) input.push_back(static_cast<char>(i));
  input += std::string(300 * 1024, 'z') + "end";
  expectSame(
      "node",
      inlineCode(
          "const chunks = [];\n"
          "process.stdin.on('data', (c) => chunks.push(c)).on('end', () => {\n"
          "  const all = Buffer.concat(chunks);\n"
          "  console.log(all.length, JSON.stringify(all.subarray(0, 20).toString('latin1')),\n"
          "    require('crypto').createHash('sha256').update(all).digest('hex'));\n"
          "});"),
      input);
  expectSame("node", inlineCode("console.log(require('fs').readFileSync(0, 'utf8'))"), "a\nb\n");
}

TEST_F(PrestartNode, ExitStatus) {
  EXPECT_EQ(expectSame("node", inlineCode("process.exitCode = 3; console.log('x')")).status, 3);
  EXPECT_EQ(expectSame("node", inlineCode("process.on('exit', (c) => console.log('exit', c));\n"
                                          "setTimeout(() => process.exit(4), 5)"))
                .status,
            4);
  EXPECT_EQ(
      expectSame("node",
                 inlineCode("process.kill(process.pid, 'SIGTERM'); setTimeout(() => {}, 5000)"))
          .status,
      128 + SIGTERM);
}

TEST_F(PrestartNode, UncaughtErrorsPrintAsNodePrintsThem) {
  auto r = expectSame("node", inlineCode("function f() { throw new TypeError('bad') }\nf()"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("    at node:internal/main/eval_string:"));
  expectSame("node", inlineCode("throw 'plain'"));
  expectSame("node", inlineCode("let x = ;"));
  expectSame("node", inlineCode("function r(n) { if (n === 0) throw new Error('deep'); r(n - 1) }\n"
                                "r(3)"));
  expectSame("node", inlineCode("function r(n) { if (n === 0) throw new Error('deep'); r(n - 1) }\n"
                                "r(30)"));
  expectSame("node",
             inlineCode("console.log(new Error('read').stack);\n"
                        "const o = {}; Error.captureStackTrace(o); console.log(o.stack);\n"
                        "Error.stackTraceLimit = Infinity; console.log(new Error('all').stack);"
                        "\nconsole.trace('traced')"));
  expectSame("node",
             inlineCode("Error.prepareStackTrace = (e, t) => t.map((s) => `${s.getFileName()}"
                        ":${s.getLineNumber()}`).join('|');\nconsole.log(new Error().stack)"));
  expectSame("node", inlineCode("setTimeout(() => { throw new Error('later') }, 1)"));
  expectSame("node", inlineCode("Promise.reject(new Error('rejected'))"));
  expectSame("node", inlineCode("process.on('uncaughtException', (e) => {\n"
                                "  console.log(JSON.stringify(e.stack)); process.exitCode = 7 });\n"
                                "throw new Error('handled')"));
}

TEST_F(PrestartNode, FileProgramsWithArguments) {
  dir_.write("sub/prog.js",
             "console.log(JSON.stringify(process.argv), JSON.stringify(process.execArgv),\n"
             "  __filename, __dirname, module.id, require.main === module, typeof require,\n"
             "  typeof globalThis.require, typeof fs, process._eval, typeof globalThis.module);\n"
             "console.log(Object.keys(globalThis).join(), "
             "Object.getOwnPropertyNames(globalThis).length);\n"
             "console.log(new Error('here').stack);\n"
             "let d = '';\n"
             "process.stdin.on('data', (c) => d += c).on('end', () => {\n"
             "  console.log(JSON.stringify(d));\n"
             "  function fail(x) { throw new RangeError(x) }\n"
             "  fail(process.argv.slice(2).join());\n"
             "});\n");
  auto r = expectSame("node", file(dir_.file("sub/prog.js"), {"one", "--two"}), "in\nput");
  EXPECT_EQ(r.status, 1);
  expectSame("node", file("sub/prog.js", {"relative"}));
  dir_.write("sync.js", "function f() { throw new Error('at load') }\nf()\n");
  r = expectSame("node", file("sync.js"));
  EXPECT_THAT(r.err, HasSubstr("    at node:internal/main/run_main_module:"));
  dir_.write("handled.js",
             "process.on('uncaughtException', (e) => console.log(JSON.stringify(e.stack)));\n"
             "throw new Error('handled')\n");
  expectSame("node", file("handled.js"));
  dir_.write("-dash.js", "console.log(process.argv[1])\n");
  expectSame("node", file("-dash.js"));
  dir_.write("esm.mjs",
             "import {join} from 'path';\nconsole.log(join('a', 'b'), typeof require);\n"
             "throw new Error('esm');\n");
  expectSame("node", file("esm.mjs"));
  dir_.write("syntax.js", "let = ;\n");
  expectSame("node", file("syntax.js"));
  expectSame("node", file(dir_.file("missing.js")));
}

TEST_F(PrestartNode, ProgramsRequirePreloadedModules) {
  dir_.write("localmod.js",
             "globalThis.localmodLoads = (globalThis.localmodLoads || 0) + 1;\n"
             "module.exports = {value: 42};\n");
  Program p = inlineCode("console.log(require('./localmod').value, require('path').sep)");
  expectSame("node", p, "", {"./localmod", "path"});
  // Prestarted, the module was loaded once, before the program ran.
  Outcome r = prestarted("node",
                         inlineCode("console.log(globalThis.localmodLoads);\n"
                                    "require('./localmod'); console.log(globalThis.localmodLoads)"),
                         "", {"./localmod"});
  EXPECT_EQ(r.out, "1\n1\n") << r.err;
}

TEST_F(PrestartNode, PreloadsThatFailLeaveNoTrace) {
  dir_.write("broken.js", "console.log('loading broken');\nthrow new Error('broken');\n");
  expectSame(
      "node",
      inlineCode("try { require('./broken') } catch (e) { console.log('caught', e.message) }\n"
                 "require('no-such-module-xyz')"),
      "", {"no-such-module-xyz", "./broken", "path"});
}

TEST_F(PrestartNode, PreloadSideEffectsAreUndone) {
  dir_.write("noisy.js",
             "console.log('noise on stdout'); console.error('noise on stderr');\n"
             "process.emitWarning('noise as a warning');\n"
             "require('fs').writeSync(2, 'noise on fd 2\\n');\n"
             "process.exitCode = 9;\n");
  Program p = inlineCode("console.log('only this'); process.emitWarning('the program warns')");
  auto r = expectSame("node", p, "", {"./noisy"});
  EXPECT_THAT(r.out + r.err, Not(HasSubstr("noise")));
}

}  // namespace
}  // namespace airlock::plugin::test
