"""E2B's documented quick-start and code-interpreter examples, written out as tests, run through
airlock.e2b against a real `airlock serve` (root; AIRLOCK_BIN names the binary). Each test body
is E2B's example with only the import changed (`from e2b_code_interpreter import ...` became
`from airlock.e2b import ...`), plus the assertions; sleeps are shortened.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import io
import os
import secrets
import time
import unittest
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from airlock.e2b import (
    AsyncSandbox,
    CommandExitException,
    FilesystemEventType,
    InvalidArgumentException,
    NotFoundException,
    Sandbox,
    TimeoutException,
    WriteEntry,
)
from airlock_serve import Supervisor, require_privileged, start_sdk_supervisor

TOKEN = secrets.token_urlsafe(24)

supervisor: Supervisor
tcp_url: str


def setUpModule() -> None:
    global supervisor, tcp_url
    binary = require_privileged()
    supervisor, tcp_url = start_sdk_supervisor(binary, "e2b", TOKEN)
    os.environ["AIRLOCK_URL"] = supervisor.url
    os.environ.pop("AIRLOCK_TOKEN", None)


def tearDownModule() -> None:
    supervisor.stop()


class QuickStartTest(unittest.TestCase):
    """E2B's quick start and the sandbox lifecycle pages: create, run, reconnect, timeout."""

    def test_quick_start(self) -> None:
        with Sandbox.create() as sandbox:
            sandbox.run_code("x = 1")
            execution = sandbox.run_code("x+=1; x")
            print(execution.text)  # outputs 2
            self.assertEqual(execution.text, "2")

    def test_hello_world_logs_and_files(self) -> None:
        sbx = Sandbox.create()  # By default the sandbox is alive for 5 minutes
        try:
            execution = sbx.run_code("print('hello world')")
            # Chunks as the interpreter flushed them: E2B documents a list of str.
            self.assertEqual("".join(execution.logs.stdout), "hello world\n")
            self.assertEqual(execution.logs.stderr, [])
            files = sbx.files.list("/")
            self.assertIn("home", [f.name for f in files])
            self.assertIn("dir", [f.type.value for f in files if f.name == "home"])
            info = sbx.get_info()
            self.assertEqual(info.sandbox_id, sbx.sandbox_id)
            assert info.started_at and info.end_at
            # E2B's default timeout: 300 s from creation.
            self.assertAlmostEqual((info.end_at - info.started_at).total_seconds(), 300, delta=5)
        finally:
            sbx.kill()

    def test_reconnect(self) -> None:
        sbx = Sandbox.create()
        sandbox_id = sbx.sandbox_id
        sbx.run_code("kept = 'still here'")
        same_sbx = Sandbox.connect(sandbox_id)
        self.assertEqual(same_sbx.run_code("kept").text, "'still here'")
        self.assertTrue(same_sbx.is_running())
        Sandbox.kill(sandbox_id)  # E2B's class-level kill by id
        self.assertFalse(same_sbx.is_running())
        self.assertFalse(Sandbox.kill(sandbox_id))
        with self.assertRaises(NotFoundException):
            Sandbox.connect(sandbox_id)

    def test_timeout_and_set_timeout(self) -> None:
        # Create a sandbox and keep it running for 60 seconds.
        sandbox = Sandbox.create(timeout=60)
        try:
            info = sandbox.get_info()
            assert info.end_at and info.started_at
            self.assertAlmostEqual((info.end_at - info.started_at).total_seconds(), 60, delta=2)
            # Change the sandbox timeout to 30 seconds: it ends 30 s from now, used or idle.
            sandbox.set_timeout(30)
            info = sandbox.get_info()
            assert info.end_at
            left = info.end_at.timestamp() - time.time()
            self.assertTrue(25 <= left <= 32, left)
            Sandbox.set_timeout(sandbox.sandbox_id, 120)  # the class-level form
            self.assertGreater(sandbox.get_info().end_at.timestamp() - time.time(), 100)
        finally:
            sandbox.kill()

    def test_a_sandbox_ends_at_its_timeout(self) -> None:
        sandbox = Sandbox.create(timeout=1)
        deadline = time.monotonic() + 15
        while sandbox.is_running() and time.monotonic() < deadline:
            time.sleep(0.25)
        self.assertFalse(sandbox.is_running())

    def test_metadata_envs_and_list(self) -> None:
        with Sandbox.create(metadata={"userId": "123"}, envs={"MY_VAR": "my_value"}) as sandbox:
            result = sandbox.commands.run("echo $MY_VAR")
            self.assertEqual(result.stdout, "my_value\n")
            listed = Sandbox.list(metadata={"userId": "123"})
            self.assertEqual([s.sandbox_id for s in listed], [sandbox.sandbox_id])
            self.assertEqual(listed[0].metadata, {"userId": "123"})
            self.assertEqual(listed[0].template_id, "default")

    def test_cloud_only_options_are_refused_with_the_reason(self) -> None:
        with self.assertRaises(InvalidArgumentException) as cm:
            Sandbox.create(allow_internet_access=False)
        self.assertIn("profile's [network]", str(cm.exception))
        with self.assertRaises(TypeError):
            Sandbox.create(no_such_option=1)
        # api_key is the tenant token; domain (or url) the supervisor.
        with Sandbox.create(api_key=TOKEN, domain=tcp_url) as sandbox:
            self.assertEqual(sandbox.run_code("6 * 7").text, "42")


class CodeInterpreterTest(unittest.TestCase):
    """E2B's code interpreter pages, on one sandbox: analysis, charts, streaming, contexts."""

    sandbox: Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.sandbox = Sandbox.create()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sandbox.kill()

    def test_dataframe(self) -> None:
        execution = self.sandbox.run_code("""
import pandas as pd
df = pd.DataFrame({"name": ["a", "b", "c"], "value": [1, 2, 3]})
df
""")
        self.assertIsNone(execution.error)
        result = execution.results[0]
        self.assertTrue(result.is_main_result)
        self.assertIn("<table", result.html)
        self.assertIn("html", result.formats())
        self.assertIn("value", result.text)

    def test_static_chart(self) -> None:
        code_to_run = """
import matplotlib.pyplot as plt
import numpy as np

x = np.linspace(0, 20, 100)
y = np.sin(x)

plt.plot(x, y)
plt.show()
"""
        execution = self.sandbox.run_code(code_to_run)
        first_result = execution.results[0]
        self.assertTrue(first_result.png)
        png = base64.b64decode(first_result.png)  # E2B's own example saves it this way
        self.assertTrue(png.startswith(b"\x89PNG\r\n\x1a\n"))

    def test_interactive_chart_data(self) -> None:
        code = """
import matplotlib.pyplot as plt

authors = ['Author A', 'Author B', 'Author C', 'Author D']
sales = [100, 200, 300, 400]

plt.figure(figsize=(10, 6))
plt.bar(authors, sales, label='Books Sold', color='blue')
plt.xlabel('Authors')
plt.ylabel('Number of Books Sold')
plt.title('Book Sales by Authors')

plt.tight_layout()
plt.show()
"""
        execution = self.sandbox.run_code(code)
        chart = execution.results[0].chart
        self.assertIsNotNone(chart, "the figure came back without chart data")
        self.assertEqual(chart.type, "bar")
        self.assertEqual(chart.title, "Book Sales by Authors")
        self.assertEqual(chart.x_label, "Authors")
        self.assertEqual(chart.y_label, "Number of Books Sold")
        self.assertEqual([e.label for e in chart.elements], ["Author A", "Author B",
                                                            "Author C", "Author D"])
        self.assertEqual([e.value for e in chart.elements], [100, 200, 300, 400])

    def test_streaming_callbacks(self) -> None:
        code_to_run = """
import time
import sys
print("This goes first to stdout")
time.sleep(0.3)
print("This goes later to stderr", file=sys.stderr)
time.sleep(0.3)
print("This goes last")
"""
        seen: list[tuple[str, str, float]] = []
        started = time.monotonic()
        self.sandbox.run_code(
            code_to_run,
            # Use `on_error` to handle runtime code errors
            on_error=lambda error: seen.append(("error", str(error), time.monotonic())),
            on_stdout=lambda data: seen.append(("stdout", data.line, time.monotonic())),
            on_stderr=lambda data: seen.append(("stderr", data.line, time.monotonic())),
        )
        # Chunks as flushed (print may write its newline separately): joined per stream, in
        # the order the streams took turns.
        turns: list[list[str]] = []
        for kind, line, _ in seen:
            if turns and turns[-1][0] == kind:
                turns[-1][1] += line
            else:
                turns.append([kind, line])
        self.assertEqual(turns, [
            ["stdout", "This goes first to stdout\n"], ["stderr", "This goes later to stderr\n"],
            ["stdout", "This goes last\n"]])
        # The first line arrived while the run was still sleeping, not at its end.
        self.assertGreater(seen[-1][2] - seen[0][2], 0.4)
        self.assertLess(seen[0][2] - started, 5)

    def test_streaming_results_and_errors(self) -> None:
        results: list[Any] = []
        errors: list[Any] = []
        execution = self.sandbox.run_code(
            "import matplotlib.pyplot as plt\nplt.plot([1, 2], [3, 4])\nplt.show()\n1/0",
            on_result=results.append, on_error=errors.append)
        self.assertEqual(len(results), 1)
        self.assertIn("png", results[0].formats())
        self.assertEqual(errors[0].name, "ZeroDivisionError")
        self.assertEqual(execution.error.value, "division by zero")
        self.assertIn("ZeroDivisionError", execution.error.traceback)
        self.assertIsInstance(execution.error.traceback, str)
        self.assertIn('"error"', execution.to_json())

    def test_contexts(self) -> None:
        context = self.sandbox.create_code_context()
        self.sandbox.run_code("x = 1", context=context)
        execution = self.sandbox.run_code("x", context=context)
        self.assertEqual(execution.text, "1")
        contexts = self.sandbox.list_code_contexts()
        self.assertIn(context.id, [c.id for c in contexts])
        self.sandbox.restart_code_context(context)
        self.assertEqual(self.sandbox.run_code("x", context=context).error.name, "NameError")
        self.sandbox.remove_code_context(context)
        with self.assertRaises(InvalidArgumentException):
            self.sandbox.run_code("1", language="python", context=context)

    def test_context_cwd(self) -> None:
        self.sandbox.files.make_dir("/home/user/my-project")
        context = self.sandbox.create_code_context(cwd="/home/user/my-project",
                                                   language="python")
        execution = self.sandbox.run_code("import os; os.getcwd()", context=context)
        self.assertEqual(execution.text, "'/home/user/my-project'")
        self.assertEqual(context.cwd, "/home/user/my-project")
        self.sandbox.remove_code_context(context)

    def test_run_code_envs(self) -> None:
        execution = self.sandbox.run_code('import os; os.environ.get("MY_VAR")',
                                          envs={"MY_VAR": "my_value"})
        self.assertEqual(execution.text, "'my_value'")
        # For this run only.
        self.assertEqual(self.sandbox.run_code('import os; os.environ.get("MY_VAR")').text,
                         None)

    def test_execution_count(self) -> None:
        first = self.sandbox.run_code("1").execution_count
        self.assertIsInstance(first, int)
        self.assertEqual(self.sandbox.run_code("2").execution_count, first + 1)

    def test_bash_language(self) -> None:
        execution = self.sandbox.run_code("cd /tmp && X=5", language="bash")
        self.assertIsNone(execution.error)
        execution = self.sandbox.run_code('echo "$X in $(pwd)"', language="bash")
        self.assertEqual(execution.logs.stdout, ["5 in /tmp\n"])

    def test_run_code_timeout(self) -> None:
        with self.assertRaises(TimeoutException):
            self.sandbox.run_code("import time; time.sleep(30)", timeout=1)
        self.assertEqual(self.sandbox.run_code("'alive'").text, "'alive'")


class CommandsAndFilesTest(unittest.TestCase):
    """E2B's commands and filesystem pages."""

    sandbox: Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.sandbox = Sandbox.create()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sandbox.kill()

    def test_run_and_stream(self) -> None:
        result = self.sandbox.commands.run("ls -l /home")
        self.assertEqual(result.exit_code, 0)
        self.assertIn("user", result.stdout)
        chunks: list[str] = []
        self.sandbox.commands.run("echo hello; sleep 0.2; echo world",
                                  on_stdout=chunks.append, on_stderr=chunks.append)
        self.assertEqual("".join(chunks), "hello\nworld\n")

    def test_non_zero_exit_raises(self) -> None:
        with self.assertRaises(CommandExitException) as cm:
            self.sandbox.commands.run("echo oops >&2; exit 3")
        self.assertEqual(cm.exception.exit_code, 3)
        self.assertEqual(cm.exception.stderr, "oops\n")

    def test_background_kill_and_wait(self) -> None:
        lines: list[str] = []
        command = self.sandbox.commands.run("echo hello; sleep 30; echo world",
                                            background=True, on_stdout=lines.append)
        deadline = time.monotonic() + 10
        while not lines and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(lines, ["hello\n"])
        self.assertIn(command.pid, [p.pid for p in self.sandbox.commands.list()])
        command.kill()
        with self.assertRaises(CommandExitException):
            command.wait()
        done = self.sandbox.commands.run("sleep 0.1; echo done", background=True).wait()
        self.assertEqual(done.stdout, "done\n")
        handle = self.sandbox.commands.run("echo out; echo err >&2", background=True)
        seen = sorted((stdout or "", stderr or "") for stdout, stderr, _ in handle)
        self.assertEqual(seen, [("", "err\n"), ("out\n", "")])
        self.assertEqual(handle.wait().exit_code, 0)

    def test_command_timeout_user_and_cwd(self) -> None:
        with self.assertRaises(TimeoutException):
            self.sandbox.commands.run("sleep 30", timeout=1)
        self.assertEqual(self.sandbox.commands.run("whoami", user="user").exit_code, 0)
        with self.assertRaises(InvalidArgumentException) as cm:
            self.sandbox.commands.run("whoami", user="root")
        self.assertIn("one unprivileged user", str(cm.exception))
        self.assertEqual(self.sandbox.commands.run("pwd", cwd="/tmp").stdout, "/tmp\n")
        self.assertEqual(self.sandbox.commands.run("echo $A", envs={"A": "b"}).stdout, "b\n")

    def test_read_write_and_upload(self) -> None:
        self.sandbox.files.write("/home/user/file.txt", "file content")
        self.assertEqual(self.sandbox.files.read("/home/user/file.txt"), "file content")
        self.sandbox.files.write([WriteEntry(path="/home/user/a.txt", data="A"),
                                  WriteEntry(path="/home/user/b.bin", data=b"\x00\xff")])
        self.assertEqual(self.sandbox.files.read("/home/user/b.bin", format="bytes"), b"\x00\xff")
        self.sandbox.files.write("/home/user/upload.bin", io.BytesIO(b"x" * 100_000))
        self.assertEqual(self.sandbox.files.get_info("/home/user/upload.bin").size, 100_000)
        streamed = b"".join(self.sandbox.files.read("/home/user/upload.bin", format="stream"))
        self.assertEqual(len(streamed), 100_000)

    def test_list_exists_rename_remove_make_dir(self) -> None:
        self.assertTrue(self.sandbox.files.make_dir("/home/user/tree/sub"))
        self.assertFalse(self.sandbox.files.make_dir("/home/user/tree/sub"))
        self.sandbox.files.write("/home/user/tree/sub/deep.txt", "d")
        self.assertEqual([e.name for e in self.sandbox.files.list("/home/user/tree")], ["sub"])
        deep = self.sandbox.files.list("/home/user/tree", depth=2)
        self.assertEqual(sorted(e.path for e in deep),
                         ["/home/user/tree/sub", "/home/user/tree/sub/deep.txt"])
        self.assertEqual(self.sandbox.files.get_info("/home/user/tree/sub/deep.txt").permissions,
                         "-rw-r--r--")
        moved = self.sandbox.files.rename("/home/user/tree/sub/deep.txt", "/home/user/tree/d.txt")
        self.assertEqual(moved.path, "/home/user/tree/d.txt")
        self.assertFalse(self.sandbox.files.exists("/home/user/tree/sub/deep.txt"))
        self.sandbox.files.remove("/home/user/tree")
        self.assertFalse(self.sandbox.files.exists("/home/user/tree"))
        with self.assertRaises(NotFoundException):
            self.sandbox.files.read("/home/user/tree/d.txt")

    def test_watch_dir(self) -> None:
        dirname = "/home/user/watched"
        self.sandbox.files.make_dir(dirname)
        handle = self.sandbox.files.watch_dir(dirname)
        self.sandbox.files.write(f"{dirname}/my-file", "hello")
        events = handle.get_new_events()
        self.assertEqual([(e.name, e.type) for e in events],
                         [("my-file", FilesystemEventType.CREATE)])
        self.sandbox.files.write(f"{dirname}/my-file", "hello, longer")
        self.sandbox.files.remove(f"{dirname}/my-file")
        self.sandbox.files.write(f"{dirname}/other", "x")
        self.assertEqual([(e.name, e.type) for e in handle.get_new_events()],
                         [("other", FilesystemEventType.CREATE),
                          ("my-file", FilesystemEventType.REMOVE)])
        handle.stop()

    def test_get_host(self) -> None:
        with Sandbox.create(api_key=TOKEN, url=tcp_url) as sandbox:
            sandbox.commands.run("python3 -m http.server 3000 --directory /etc", background=True)
            host = sandbox.get_host(3000)
            url = f"http://{host}"  # E2B's idiom with https://; this supervisor is plain HTTP
            deadline = time.monotonic() + 10
            while True:
                answer = httpx.get(url + "hostname")
                if answer.status_code == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            self.assertEqual(answer.status_code, 200)


def in_class_loop(test: Callable[[Any], Awaitable[None]]) -> Callable[[Any], None]:
    """Runs an `async def` test on its class's event loop (ClassLoopTestCase.loop)."""

    @functools.wraps(test)
    def run(self: ClassLoopTestCase) -> None:
        self.loop.run_until_complete(test(self))

    return run


class ClassLoopTestCase(unittest.TestCase):
    """One event loop per class, so an AsyncSandbox made in asyncSetUpClass (its asyncio
    connections bound to that loop) serves every test of the class, as the blocking classes
    share one Sandbox. (IsolatedAsyncioTestCase makes a loop per test.)"""

    loop: asyncio.AbstractEventLoop

    @classmethod
    def setUpClass(cls) -> None:
        cls.loop = asyncio.new_event_loop()
        try:
            cls.loop.run_until_complete(cls.asyncSetUpClass())
        except BaseException:
            cls.loop.close()
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        try:
            cls.loop.run_until_complete(cls.asyncTearDownClass())
        finally:
            cls.loop.run_until_complete(cls.loop.shutdown_asyncgens())
            cls.loop.close()

    @classmethod
    async def asyncSetUpClass(cls) -> None:
        pass

    @classmethod
    async def asyncTearDownClass(cls) -> None:
        pass


class AsyncQuickStartTest(ClassLoopTestCase):
    """QuickStartTest with E2B's AsyncSandbox."""

    @in_class_loop
    async def test_quick_start(self) -> None:
        async with await AsyncSandbox.create() as sandbox:
            await sandbox.run_code("x = 1")
            execution = await sandbox.run_code("x+=1; x")
            print(execution.text)  # outputs 2
            self.assertEqual(execution.text, "2")

    @in_class_loop
    async def test_hello_world_logs_and_files(self) -> None:
        sbx = await AsyncSandbox.create()  # By default the sandbox is alive for 5 minutes
        try:
            execution = await sbx.run_code("print('hello world')")
            self.assertEqual("".join(execution.logs.stdout), "hello world\n")
            self.assertEqual(execution.logs.stderr, [])
            files = await sbx.files.list("/")
            self.assertIn("home", [f.name for f in files])
            self.assertIn("dir", [f.type.value for f in files if f.name == "home"])
            info = await sbx.get_info()
            self.assertEqual(info.sandbox_id, sbx.sandbox_id)
            assert info.started_at and info.end_at
            self.assertAlmostEqual((info.end_at - info.started_at).total_seconds(), 300, delta=5)
        finally:
            await sbx.kill()
            await sbx.close()

    @in_class_loop
    async def test_reconnect(self) -> None:
        sbx = await AsyncSandbox.create()
        sandbox_id = sbx.sandbox_id
        try:
            await sbx.run_code("kept = 'still here'")
            same_sbx = await AsyncSandbox.connect(sandbox_id)
            try:
                self.assertEqual((await same_sbx.run_code("kept")).text, "'still here'")
                self.assertTrue(await same_sbx.is_running())
                await AsyncSandbox.kill(sandbox_id)  # E2B's class-level kill by id
                self.assertFalse(await same_sbx.is_running())
                self.assertFalse(await AsyncSandbox.kill(sandbox_id))
                with self.assertRaises(NotFoundException):
                    await AsyncSandbox.connect(sandbox_id)
            finally:
                await same_sbx.close()
        finally:
            await sbx.kill()
            await sbx.close()

    @in_class_loop
    async def test_timeout_and_set_timeout(self) -> None:
        sandbox = await AsyncSandbox.create(timeout=60)
        try:
            info = await sandbox.get_info()
            assert info.end_at and info.started_at
            self.assertAlmostEqual((info.end_at - info.started_at).total_seconds(), 60, delta=2)
            await sandbox.set_timeout(30)
            info = await sandbox.get_info()
            assert info.end_at
            left = info.end_at.timestamp() - time.time()
            self.assertTrue(25 <= left <= 32, left)
            await AsyncSandbox.set_timeout(sandbox.sandbox_id, 120)  # the class-level form
            info = await sandbox.get_info()
            assert info.end_at
            self.assertGreater(info.end_at.timestamp() - time.time(), 100)
        finally:
            await sandbox.kill()
            await sandbox.close()

    @in_class_loop
    async def test_a_sandbox_ends_at_its_timeout(self) -> None:
        sandbox = await AsyncSandbox.create(timeout=1)
        try:
            deadline = time.monotonic() + 15
            while await sandbox.is_running() and time.monotonic() < deadline:
                await asyncio.sleep(0.25)
            self.assertFalse(await sandbox.is_running())
        finally:
            await sandbox.close()

    @in_class_loop
    async def test_metadata_envs_and_list(self) -> None:
        async with await AsyncSandbox.create(metadata={"userId": "123"},
                                             envs={"MY_VAR": "my_value"}) as sandbox:
            result = await sandbox.commands.run("echo $MY_VAR")
            self.assertEqual(result.stdout, "my_value\n")
            listed = await AsyncSandbox.list(metadata={"userId": "123"})
            self.assertEqual([s.sandbox_id for s in listed], [sandbox.sandbox_id])
            self.assertEqual(listed[0].metadata, {"userId": "123"})
            self.assertEqual(listed[0].template_id, "default")

    @in_class_loop
    async def test_cloud_only_options_are_refused_with_the_reason(self) -> None:
        with self.assertRaises(InvalidArgumentException) as cm:
            await AsyncSandbox.create(allow_internet_access=False)
        self.assertIn("profile's [network]", str(cm.exception))
        with self.assertRaises(TypeError):
            await AsyncSandbox.create(no_such_option=1)
        async with await AsyncSandbox.create(api_key=TOKEN, domain=tcp_url) as sandbox:
            self.assertEqual((await sandbox.run_code("6 * 7")).text, "42")


class AsyncCodeInterpreterTest(ClassLoopTestCase):
    """CodeInterpreterTest with E2B's AsyncSandbox, on one sandbox."""

    sandbox: AsyncSandbox

    @classmethod
    async def asyncSetUpClass(cls) -> None:
        cls.sandbox = await AsyncSandbox.create()

    @classmethod
    async def asyncTearDownClass(cls) -> None:
        await cls.sandbox.kill()
        await cls.sandbox.close()

    @in_class_loop
    async def test_dataframe(self) -> None:
        execution = await self.sandbox.run_code("""
import pandas as pd
df = pd.DataFrame({"name": ["a", "b", "c"], "value": [1, 2, 3]})
df
""")
        self.assertIsNone(execution.error)
        result = execution.results[0]
        self.assertTrue(result.is_main_result)
        self.assertIn("<table", result.html)
        self.assertIn("html", result.formats())
        self.assertIn("value", result.text)

    @in_class_loop
    async def test_static_chart(self) -> None:
        code_to_run = """
import matplotlib.pyplot as plt
import numpy as np

x = np.linspace(0, 20, 100)
y = np.sin(x)

plt.plot(x, y)
plt.show()
"""
        execution = await self.sandbox.run_code(code_to_run)
        first_result = execution.results[0]
        self.assertTrue(first_result.png)
        png = base64.b64decode(first_result.png)
        self.assertTrue(png.startswith(b"\x89PNG\r\n\x1a\n"))

    @in_class_loop
    async def test_interactive_chart_data(self) -> None:
        code = """
import matplotlib.pyplot as plt

authors = ['Author A', 'Author B', 'Author C', 'Author D']
sales = [100, 200, 300, 400]

plt.figure(figsize=(10, 6))
plt.bar(authors, sales, label='Books Sold', color='blue')
plt.xlabel('Authors')
plt.ylabel('Number of Books Sold')
plt.title('Book Sales by Authors')

plt.tight_layout()
plt.show()
"""
        execution = await self.sandbox.run_code(code)
        chart = execution.results[0].chart
        self.assertIsNotNone(chart, "the figure came back without chart data")
        self.assertEqual(chart.type, "bar")
        self.assertEqual(chart.title, "Book Sales by Authors")
        self.assertEqual(chart.x_label, "Authors")
        self.assertEqual(chart.y_label, "Number of Books Sold")
        self.assertEqual([e.label for e in chart.elements], ["Author A", "Author B",
                                                            "Author C", "Author D"])
        self.assertEqual([e.value for e in chart.elements], [100, 200, 300, 400])

    @in_class_loop
    async def test_streaming_callbacks(self) -> None:
        code_to_run = """
import time
import sys
print("This goes first to stdout")
time.sleep(0.3)
print("This goes later to stderr", file=sys.stderr)
time.sleep(0.3)
print("This goes last")
"""
        seen: list[tuple[str, str, float]] = []
        started = time.monotonic()

        # E2B's async callbacks: coroutine functions, awaited as the output arrives.
        async def on_error(error: Any) -> None:
            seen.append(("error", str(error), time.monotonic()))

        async def on_stdout(data: Any) -> None:
            seen.append(("stdout", data.line, time.monotonic()))

        async def on_stderr(data: Any) -> None:
            seen.append(("stderr", data.line, time.monotonic()))

        await self.sandbox.run_code(code_to_run, on_error=on_error, on_stdout=on_stdout,
                                    on_stderr=on_stderr)
        turns: list[list[str]] = []
        for kind, line, _ in seen:
            if turns and turns[-1][0] == kind:
                turns[-1][1] += line
            else:
                turns.append([kind, line])
        self.assertEqual(turns, [
            ["stdout", "This goes first to stdout\n"], ["stderr", "This goes later to stderr\n"],
            ["stdout", "This goes last\n"]])
        self.assertGreater(seen[-1][2] - seen[0][2], 0.4)
        self.assertLess(seen[0][2] - started, 5)

    @in_class_loop
    async def test_streaming_results_and_errors(self) -> None:
        results: list[Any] = []
        errors: list[Any] = []

        async def on_result(result: Any) -> None:
            results.append(result)

        execution = await self.sandbox.run_code(
            "import matplotlib.pyplot as plt\nplt.plot([1, 2], [3, 4])\nplt.show()\n1/0",
            on_result=on_result, on_error=errors.append)  # coroutine and plain callbacks
        self.assertEqual(len(results), 1)
        self.assertIn("png", results[0].formats())
        self.assertEqual(errors[0].name, "ZeroDivisionError")
        self.assertEqual(execution.error.value, "division by zero")
        self.assertIn("ZeroDivisionError", execution.error.traceback)
        self.assertIsInstance(execution.error.traceback, str)
        self.assertIn('"error"', execution.to_json())

    @in_class_loop
    async def test_contexts(self) -> None:
        context = await self.sandbox.create_code_context()
        await self.sandbox.run_code("x = 1", context=context)
        execution = await self.sandbox.run_code("x", context=context)
        self.assertEqual(execution.text, "1")
        contexts = await self.sandbox.list_code_contexts()
        self.assertIn(context.id, [c.id for c in contexts])
        await self.sandbox.restart_code_context(context)
        self.assertEqual((await self.sandbox.run_code("x", context=context)).error.name,
                         "NameError")
        await self.sandbox.remove_code_context(context)
        with self.assertRaises(InvalidArgumentException):
            await self.sandbox.run_code("1", language="python", context=context)

    @in_class_loop
    async def test_context_cwd(self) -> None:
        await self.sandbox.files.make_dir("/home/user/my-project")
        context = await self.sandbox.create_code_context(cwd="/home/user/my-project",
                                                         language="python")
        execution = await self.sandbox.run_code("import os; os.getcwd()", context=context)
        self.assertEqual(execution.text, "'/home/user/my-project'")
        self.assertEqual(context.cwd, "/home/user/my-project")
        await self.sandbox.remove_code_context(context)

    @in_class_loop
    async def test_run_code_envs(self) -> None:
        execution = await self.sandbox.run_code('import os; os.environ.get("MY_VAR")',
                                                envs={"MY_VAR": "my_value"})
        self.assertEqual(execution.text, "'my_value'")
        self.assertEqual(
            (await self.sandbox.run_code('import os; os.environ.get("MY_VAR")')).text, None)

    @in_class_loop
    async def test_execution_count(self) -> None:
        first = (await self.sandbox.run_code("1")).execution_count
        self.assertIsInstance(first, int)
        self.assertEqual((await self.sandbox.run_code("2")).execution_count, first + 1)

    @in_class_loop
    async def test_bash_language(self) -> None:
        execution = await self.sandbox.run_code("cd /tmp && X=5", language="bash")
        self.assertIsNone(execution.error)
        execution = await self.sandbox.run_code('echo "$X in $(pwd)"', language="bash")
        self.assertEqual(execution.logs.stdout, ["5 in /tmp\n"])

    @in_class_loop
    async def test_run_code_timeout(self) -> None:
        with self.assertRaises(TimeoutException):
            await self.sandbox.run_code("import time; time.sleep(30)", timeout=1)
        self.assertEqual((await self.sandbox.run_code("'alive'")).text, "'alive'")


class AsyncCommandsAndFilesTest(ClassLoopTestCase):
    """CommandsAndFilesTest with E2B's AsyncSandbox."""

    sandbox: AsyncSandbox

    @classmethod
    async def asyncSetUpClass(cls) -> None:
        cls.sandbox = await AsyncSandbox.create()

    @classmethod
    async def asyncTearDownClass(cls) -> None:
        await cls.sandbox.kill()
        await cls.sandbox.close()

    @in_class_loop
    async def test_run_and_stream(self) -> None:
        result = await self.sandbox.commands.run("ls -l /home")
        self.assertEqual(result.exit_code, 0)
        self.assertIn("user", result.stdout)
        chunks: list[str] = []

        async def on_output(data: str) -> None:
            chunks.append(data)

        await self.sandbox.commands.run("echo hello; sleep 0.2; echo world",
                                        on_stdout=on_output, on_stderr=on_output)
        self.assertEqual("".join(chunks), "hello\nworld\n")

    @in_class_loop
    async def test_non_zero_exit_raises(self) -> None:
        with self.assertRaises(CommandExitException) as cm:
            await self.sandbox.commands.run("echo oops >&2; exit 3")
        self.assertEqual(cm.exception.exit_code, 3)
        self.assertEqual(cm.exception.stderr, "oops\n")

    @in_class_loop
    async def test_background_kill_and_wait(self) -> None:
        lines: list[str] = []
        command = await self.sandbox.commands.run("echo hello; sleep 30; echo world",
                                                  background=True, on_stdout=lines.append)
        deadline = time.monotonic() + 10
        while not lines and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        self.assertEqual(lines, ["hello\n"])
        self.assertIn(command.pid, [p.pid for p in await self.sandbox.commands.list()])
        await command.kill()
        with self.assertRaises(CommandExitException):
            await command.wait()
        done = await (await self.sandbox.commands.run("sleep 0.1; echo done",
                                                      background=True)).wait()
        self.assertEqual(done.stdout, "done\n")
        # E2B's AsyncCommandHandle is not iterable: output comes to run's callbacks.
        seen: list[tuple[str, str]] = []

        async def on_stdout(data: str) -> None:
            seen.append((data, ""))

        async def on_stderr(data: str) -> None:
            seen.append(("", data))

        handle = await self.sandbox.commands.run("echo out; echo err >&2", background=True,
                                                 on_stdout=on_stdout, on_stderr=on_stderr)
        self.assertEqual((await handle.wait()).exit_code, 0)
        self.assertEqual(sorted(seen), [("", "err\n"), ("out\n", "")])

    @in_class_loop
    async def test_command_timeout_user_and_cwd(self) -> None:
        with self.assertRaises(TimeoutException):
            await self.sandbox.commands.run("sleep 30", timeout=1)
        self.assertEqual((await self.sandbox.commands.run("whoami", user="user")).exit_code, 0)
        with self.assertRaises(InvalidArgumentException) as cm:
            await self.sandbox.commands.run("whoami", user="root")
        self.assertIn("one unprivileged user", str(cm.exception))
        self.assertEqual((await self.sandbox.commands.run("pwd", cwd="/tmp")).stdout, "/tmp\n")
        self.assertEqual((await self.sandbox.commands.run("echo $A", envs={"A": "b"})).stdout,
                         "b\n")

    @in_class_loop
    async def test_read_write_and_upload(self) -> None:
        files = self.sandbox.files
        await files.write("/home/user/file.txt", "file content")
        self.assertEqual(await files.read("/home/user/file.txt"), "file content")
        await files.write([WriteEntry(path="/home/user/a.txt", data="A"),
                           WriteEntry(path="/home/user/b.bin", data=b"\x00\xff")])
        self.assertEqual(await files.read("/home/user/b.bin", format="bytes"), b"\x00\xff")
        await files.write("/home/user/upload.bin", io.BytesIO(b"x" * 100_000))
        self.assertEqual((await files.get_info("/home/user/upload.bin")).size, 100_000)
        stream = await files.read("/home/user/upload.bin", format="stream")
        streamed = b"".join([chunk async for chunk in stream])
        self.assertEqual(len(streamed), 100_000)

    @in_class_loop
    async def test_list_exists_rename_remove_make_dir(self) -> None:
        files = self.sandbox.files
        self.assertTrue(await files.make_dir("/home/user/tree/sub"))
        self.assertFalse(await files.make_dir("/home/user/tree/sub"))
        await files.write("/home/user/tree/sub/deep.txt", "d")
        self.assertEqual([e.name for e in await files.list("/home/user/tree")], ["sub"])
        deep = await files.list("/home/user/tree", depth=2)
        self.assertEqual(sorted(e.path for e in deep),
                         ["/home/user/tree/sub", "/home/user/tree/sub/deep.txt"])
        self.assertEqual((await files.get_info("/home/user/tree/sub/deep.txt")).permissions,
                         "-rw-r--r--")
        moved = await files.rename("/home/user/tree/sub/deep.txt", "/home/user/tree/d.txt")
        self.assertEqual(moved.path, "/home/user/tree/d.txt")
        self.assertFalse(await files.exists("/home/user/tree/sub/deep.txt"))
        await files.remove("/home/user/tree")
        self.assertFalse(await files.exists("/home/user/tree"))
        with self.assertRaises(NotFoundException):
            await files.read("/home/user/tree/d.txt")

    @in_class_loop
    async def test_watch_dir(self) -> None:
        dirname = "/home/user/watched"
        await self.sandbox.files.make_dir(dirname)
        events: list[Any] = []
        exits: list[Any] = []

        async def on_event(event: Any) -> None:
            events.append(event)

        def seen() -> list[tuple[str, str]]:
            # Polled every 0.25 s: a poll between two of the calls below may also see
            # my-file's WRITE, and split the rest over two polls.
            return sorted((e.name, e.type.value) for e in events
                          if e.type != FilesystemEventType.WRITE)

        async def until(n: int) -> None:
            deadline = time.monotonic() + 5
            while len(seen()) < n and time.monotonic() < deadline:
                await asyncio.sleep(0.05)

        handle = await self.sandbox.files.watch_dir(dirname, on_event=on_event,
                                                    on_exit=exits.append)
        await self.sandbox.files.write(f"{dirname}/my-file", "hello")
        await until(1)
        self.assertEqual([(e.name, e.type) for e in events],
                         [("my-file", FilesystemEventType.CREATE)])
        del events[:]
        await self.sandbox.files.write(f"{dirname}/my-file", "hello, longer")
        await self.sandbox.files.remove(f"{dirname}/my-file")
        await self.sandbox.files.write(f"{dirname}/other", "x")
        await until(2)
        await asyncio.sleep(0.3)  # one more poll: nothing else is reported
        self.assertEqual(seen(), [("my-file", FilesystemEventType.REMOVE.value),
                                  ("other", FilesystemEventType.CREATE.value)])
        await handle.stop()
        self.assertEqual(exits, [None])

    @in_class_loop
    async def test_get_host(self) -> None:
        async with await AsyncSandbox.create(api_key=TOKEN, url=tcp_url) as sandbox:
            await sandbox.commands.run("python3 -m http.server 3000 --directory /etc",
                                       background=True)
            host = await sandbox.get_host(3000)
            url = f"http://{host}"  # E2B's idiom with https://; this supervisor is plain HTTP
            async with httpx.AsyncClient() as client:
                deadline = time.monotonic() + 10
                while True:
                    answer = await client.get(url + "hostname")
                    if answer.status_code == 200 or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.1)
            self.assertEqual(answer.status_code, 200)


class AsyncExamplesTest(unittest.TestCase):
    """The same examples with E2B's AsyncSandbox."""

    def test_async_examples(self) -> None:
        async def main() -> None:
            sandbox = await AsyncSandbox.create()
            try:
                await sandbox.run_code("x = 1")
                execution = await sandbox.run_code("x+=1; x")
                self.assertEqual(execution.text, "2")

                lines: list[str] = []

                async def on_stdout(data: Any) -> None:
                    lines.append(data.line)

                await sandbox.run_code("print('a'); print('b')", on_stdout=on_stdout)
                self.assertEqual("".join(lines), "a\nb\n")

                df = await sandbox.run_code("import pandas as pd\npd.DataFrame({'a': [1]})")
                self.assertIn("<table", df.results[0].html)

                context = await sandbox.create_code_context()
                await sandbox.run_code("y = 5", context=context)
                self.assertEqual((await sandbox.run_code("y", context=context)).text, "5")
                await sandbox.remove_code_context(context)

                result = await sandbox.commands.run("echo hello")
                self.assertEqual(result.stdout, "hello\n")
                with self.assertRaises(CommandExitException):
                    await sandbox.commands.run("exit 2")
                handle = await sandbox.commands.run("sleep 0.1; echo bg", background=True)
                self.assertEqual((await handle.wait()).stdout, "bg\n")

                events: list[Any] = []
                await sandbox.files.make_dir("/home/user/w")
                watch = await sandbox.files.watch_dir("/home/user/w", on_event=events.append)
                await sandbox.files.write("/home/user/w/f.txt", "hi")
                self.assertEqual(await sandbox.files.read("/home/user/w/f.txt"), "hi")
                big = os.urandom(3_000_000)  # more than a Unix socket takes in one write
                await sandbox.files.write("/home/user/big.bin", io.BytesIO(big))
                self.assertEqual(await sandbox.files.read("/home/user/big.bin", format="bytes"),
                                 big)
                deadline = time.monotonic() + 5
                while not events and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                await watch.stop()
                self.assertEqual([(e.name, e.type) for e in events],
                                 [("f.txt", FilesystemEventType.CREATE)])

                same = await AsyncSandbox.connect(sandbox.sandbox_id)
                self.assertEqual((await same.run_code("x")).text, "2")
                await same.set_timeout(60)
                info = await same.get_info()
                self.assertLess(info.end_at.timestamp() - time.time(), 62)
                await same.close()  # lets go of its connections; the sandbox lives on
                with self.assertRaises(TimeoutException):
                    await sandbox.run_code("import time; time.sleep(30)", timeout=1)
            finally:
                await sandbox.kill()
            self.assertFalse(await sandbox.is_running())
            await sandbox.close()

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
