"""The SDK against a real `airlock serve` started here (root; AIRLOCK_BIN names the binary).

One supervisor serves the whole module; the host's airlock mounts, cgroups and sandbox
processes must be back to their counts before it once it has stopped."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import secrets
import tarfile
import threading
import time
import unittest

import airlock
from airlock import Sandbox

from airlock_serve import (
    HostResources,
    Supervisor,
    start_sdk_supervisor,
    require_privileged,
    snapshot_host_resources,
)

TOKEN = secrets.token_urlsafe(24)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

supervisor: Supervisor
host_before: HostResources
tcp_url: str


def setUpModule() -> None:
    global supervisor, host_before, tcp_url
    binary = require_privileged()
    host_before = snapshot_host_resources()
    supervisor, tcp_url = start_sdk_supervisor(binary, "ci", TOKEN)
    os.environ["AIRLOCK_URL"] = supervisor.url
    os.environ.pop("AIRLOCK_TOKEN", None)


def tearDownModule() -> None:
    supervisor.stop()
    after = snapshot_host_resources()
    if after != host_before:
        raise AssertionError(f"airlock serve left host resources behind: before {host_before}, "
                             f"after {after}")


class SandboxLifecycleTest(unittest.TestCase):
    def test_create_connect_by_name_list_and_kill(self) -> None:
        sbx = Sandbox.create(name="sdk-lifecycle", metadata={"suite": "sdk-py"}, keep_alive=120)
        try:
            self.assertRegex(sbx.id, r"^[0-9a-f]{16}$")
            self.assertEqual(sbx.name, "sdk-lifecycle")
            same = Sandbox.connect("sdk-lifecycle")
            self.assertEqual(same.id, sbx.id)
            self.assertEqual(same.info().metadata, {"suite": "sdk-py"})
            self.assertEqual([s.id for s in Sandbox.list(metadata={"suite": "sdk-py"})], [sbx.id])
            self.assertEqual(Sandbox.list(metadata={"suite": "other"}), [])
            with self.assertRaises(airlock.ConflictError) as cm:
                Sandbox.create(name="sdk-lifecycle")
            self.assertIn("sdk-lifecycle", str(cm.exception))
            self.assertTrue(sbx.is_running())
        finally:
            self.assertTrue(sbx.kill())
        self.assertFalse(sbx.kill())
        self.assertFalse(sbx.is_running())
        with self.assertRaises(airlock.NotFoundError):
            Sandbox.connect("sdk-lifecycle")

    def test_context_manager_kills_at_exit(self) -> None:
        with Sandbox.create(envs={"GREETING": "hello from envs"}) as sbx:
            self.assertEqual(sbx.commands.run("echo $GREETING").stdout, "hello from envs\n")
            sid = sbx.id
        with self.assertRaises(airlock.NotFoundError):
            Sandbox.connect(sid)

    def test_set_timeout_moves_the_idle_deadline(self) -> None:
        with Sandbox.create(keep_alive=60) as sbx:
            before = sbx.info()
            self.assertEqual(before.keep_alive_s, 60)
            after = sbx.set_timeout(900)
            self.assertEqual(after.keep_alive_s, 900)
            self.assertEqual(sbx.info().keep_alive_s, 900)
            assert before.idle_expires_at and after.idle_expires_at
            self.assertGreater((after.idle_expires_at - before.idle_expires_at).total_seconds(), 800)
            with self.assertRaises(airlock.InvalidRequestError) as cm:
                sbx.set_timeout(10**9)  # past the profile's max_keep_alive_s
            self.assertIn("keep_alive_s", str(cm.exception))

    def test_metrics_read_the_sandboxs_cgroup(self) -> None:
        with Sandbox.create() as sbx:
            sbx.commands.run("true")
            m = sbx.metrics()
            self.assertEqual(m.sandbox_id, sbx.id)
            self.assertGreater(m.memory_bytes, 0)
            self.assertIsNotNone(m.memory_limit_bytes)
            self.assertGreaterEqual(m.executions, 1)
            self.assertIsNotNone(m.sampled_at)

    def test_tcp_with_a_bearer_token(self) -> None:
        with self.assertRaises(airlock.AuthenticationError):
            Sandbox.list(url=tcp_url)
        with self.assertRaises(airlock.AuthenticationError):
            Sandbox.list(url=tcp_url, token="wrong")
        with Sandbox.create(url=tcp_url, token=TOKEN, name="sdk-tcp") as sbx:
            self.assertEqual(sbx.info().tenant, "ci")
            self.assertEqual(sbx.run_code("6 * 7").text, "42")
            self.assertEqual([s.name for s in Sandbox.list(url=tcp_url, token=TOKEN)], ["sdk-tcp"])
            # Another tenant's sandbox does not exist for the default tenant on the socket.
            with self.assertRaises(airlock.NotFoundError):
                Sandbox.connect("sdk-tcp")


class CodeTest(unittest.TestCase):
    sbx: Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.sbx = Sandbox.create(language="python")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sbx.kill()

    def test_state_persists_across_calls(self) -> None:
        self.assertIsNone(self.sbx.run_code("counter = 41").error)
        ex = self.sbx.run_code("counter += 1\nprint('counter is', counter)\ncounter")
        self.assertEqual(ex.text, "42")
        self.assertEqual(ex.stdout, "counter is 42\n")  # chunks as flushed, joined
        self.assertEqual(ex.status, "ok")

    def test_matplotlib_figure_comes_back_as_png_without_savefig(self) -> None:
        seen: list[airlock.Result] = []
        ex = self.sbx.run_code(
            "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('growth')",
            on_result=seen.append)
        self.assertIsNone(ex.error, ex.error and ex.error.traceback)
        pngs = [base64.b64decode(r.png) for r in ex.results if r.png]
        self.assertEqual(len(pngs), 1, ex.results)
        self.assertTrue(pngs[0].startswith(PNG_SIGNATURE))
        self.assertGreater(len(pngs[0]), 5000)
        self.assertIn("png", [f for r in seen for f in r.formats()])

    def test_rich_results(self) -> None:
        ex = self.sbx.run_code("import pandas as pd\npd.DataFrame({'a': [1, 2]})")
        self.assertIsNone(ex.error, ex.error and ex.error.traceback)
        self.assertTrue(ex.results[-1].is_main_result)
        self.assertIn("<table", ex.results[-1].html or "")
        self.assertIn("a", ex.text or "")

    def test_error_with_traceback_does_not_raise(self) -> None:
        errors: list[airlock.ExecutionError] = []
        ex = self.sbx.run_code("def f():\n    return 1 / 0\nf()", on_error=errors.append)
        assert ex.error is not None
        self.assertEqual(ex.error.name, "ZeroDivisionError")
        self.assertEqual(ex.error.value, "division by zero")
        self.assertIn("return 1 / 0", ex.error.traceback)
        self.assertEqual(errors, [ex.error])
        self.assertEqual(ex.status, "error")
        self.assertEqual(self.sbx.run_code("'still alive'").text, "'still alive'")

    def test_timeout_raises_and_keeps_the_context(self) -> None:
        self.sbx.run_code("kept = 'yes'")
        started = time.monotonic()
        with self.assertRaises(airlock.TimeoutError) as cm:
            self.sbx.run_code("import time\nprint('sleeping', flush=True)\ntime.sleep(60)",
                              timeout=1)
        self.assertLess(time.monotonic() - started, 20)
        assert cm.exception.execution is not None
        self.assertEqual(cm.exception.execution.stdout, "sleeping\n")
        self.assertEqual(self.sbx.run_code("kept").text, "'yes'")

    def test_streaming_callbacks_arrive_before_the_run_ends(self) -> None:
        arrivals: list[tuple[float, str]] = []
        started = time.monotonic()
        ex = self.sbx.run_code(
            "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.3)",
            on_stdout=lambda m: arrivals.append((time.monotonic() - started, m.line)))
        self.assertEqual(ex.stdout, "0\n1\n2\n")
        self.assertEqual("".join(text for _, text in arrivals), ex.stdout)
        first = next(t for t, text in arrivals if "0" in text)
        last = next(t for t, text in arrivals if "2" in text)
        self.assertLess(first, last - 0.4)  # the first line came well before the last

    def test_code_contexts(self) -> None:
        # The default context first: a context created before it exists takes its id ('python').
        self.sbx.run_code("'default context in use'")
        ctx = self.sbx.create_code_context("python")
        self.assertNotEqual(ctx.id, "python")
        self.sbx.run_code("only_here = 1", context=ctx)
        self.assertEqual(self.sbx.run_code("only_here", context=ctx).text, "1")
        elsewhere = self.sbx.run_code("only_here")
        self.assertEqual(elsewhere.error and elsewhere.error.name, "NameError")
        self.assertIn(ctx.id, [c.id for c in self.sbx.list_code_contexts()])
        self.sbx.restart_code_context(ctx)
        after = self.sbx.run_code("only_here", context=ctx)
        self.assertEqual(after.error and after.error.name, "NameError")
        self.sbx.remove_code_context(ctx)
        with self.assertRaises(airlock.NotFoundError):
            self.sbx.run_code("1", context=ctx)


class CommandsTest(unittest.TestCase):
    sbx: Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.sbx = Sandbox.create()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sbx.kill()

    def test_foreground_output_exit_code_and_streaming(self) -> None:
        chunks: list[str] = []
        r = self.sbx.commands.run("for i in 1 2 3; do echo line$i; sleep 0.1; done; "
                                  "echo oops >&2; exit 3", on_stdout=chunks.append)
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, "line1\nline2\nline3\n", "oops\n"))
        self.assertEqual("".join(chunks), r.stdout)
        self.assertGreaterEqual(len(chunks), 2)  # streamed as printed, not in one piece
        argv = self.sbx.commands.run(["printf", "%s|", "a b", "c"], cwd="/tmp", envs={"X": "1"})
        self.assertEqual(argv.stdout, "a b|c|")
        self.assertEqual(self.sbx.commands.run("pwd", cwd="/tmp").stdout, "/tmp\n")

    def test_stdin(self) -> None:
        self.assertEqual(self.sbx.commands.run("tr a-z A-Z", stdin="shout\n").stdout, "SHOUT\n")
        binary = self.sbx.commands.run("od -An -tx1", stdin=b"\x00\xff")
        self.assertEqual(binary.stdout.split(), ["00", "ff"])

    def test_timeout_raises(self) -> None:
        with self.assertRaises(airlock.TimeoutError) as cm:
            self.sbx.commands.run("echo before; sleep 60", timeout=1)
        assert cm.exception.result is not None
        self.assertEqual(cm.exception.result.stdout, "before\n")
        self.assertTrue(cm.exception.result.timed_out)

    def test_background_stdin_wait_list_and_connect(self) -> None:
        handle = self.sbx.commands.run("cat; echo done", background=True)
        self.assertIsInstance(handle, airlock.CommandHandle)
        self.assertIsInstance(handle.pid, int)
        self.assertIn(handle.id, [c.id for c in self.sbx.commands.list() if c.state == "running"])
        handle.send_stdin("first\n")
        handle.send_stdin(b"second\n", eof=True)
        result = handle.wait()
        self.assertEqual((result.exit_code, result.stdout), (0, "first\nsecond\ndone\n"))
        replay = self.sbx.commands.connect(handle.id).wait()
        self.assertEqual(replay.stdout, "first\nsecond\ndone\n")

    def test_background_live_callbacks_and_kill(self) -> None:
        seen = threading.Event()
        lines: list[str] = []

        def on_stdout(chunk: str) -> None:
            lines.append(chunk)
            seen.set()

        handle = self.sbx.commands.run("echo up; exec sleep 60", background=True,
                                       on_stdout=on_stdout)
        self.assertTrue(seen.wait(10), "on_stdout of a background command was not called live")
        self.assertEqual(lines, ["up\n"])
        self.assertTrue(handle.kill())
        result = handle.wait()
        self.assertEqual((result.exit_code, result.signal), (None, 9))
        self.assertFalse(handle.kill())  # already ended: False, not an error

    def test_signal(self) -> None:
        ready = threading.Event()

        def on_stdout(chunk: str) -> None:
            if "ready" in chunk:
                ready.set()

        handle = self.sbx.commands.run("trap 'echo got-term; exit 7' TERM; "
                                       "echo ready; while true; do sleep 0.1; done",
                                       background=True, on_stdout=on_stdout)
        self.assertTrue(ready.wait(10), "the command did not start")
        handle.signal("SIGTERM")
        result = handle.wait()
        self.assertEqual((result.exit_code, result.stdout), (7, "ready\ngot-term\n"))


class FilesTest(unittest.TestCase):
    sbx: Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.sbx = Sandbox.create()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sbx.kill()

    def test_text_round_trip_and_code_sees_it(self) -> None:
        info = self.sbx.files.write("/home/user/notes.txt", "héllo\nwörld\n")
        self.assertEqual((info.path, info.size), ("/home/user/notes.txt", 14))
        self.assertEqual(self.sbx.files.read("/home/user/notes.txt"), "héllo\nwörld\n")
        ex = self.sbx.run_code("open('/home/user/notes.txt').read().upper()")
        self.assertEqual(ex.text, repr("HÉLLO\nWÖRLD\n"))
        self.sbx.run_code("open('/home/user/made.txt', 'w').write('by code')")
        self.assertEqual(self.sbx.files.read("/home/user/made.txt"), "by code")

    def test_multi_megabyte_binary_round_trip(self) -> None:
        data = os.urandom(8 << 20)
        started = time.monotonic()
        self.assertEqual(self.sbx.files.write("/home/user/blob.bin", data).size, len(data))
        self.assertEqual(self.sbx.files.read("/home/user/blob.bin", format="bytes"), data)
        elapsed = time.monotonic() - started
        self.assertLess(elapsed, 30)
        digest = self.sbx.commands.run("sha256sum /home/user/blob.bin").stdout.split()[0]
        self.assertEqual(digest, hashlib.sha256(data).hexdigest())
        streamed = self.sbx.files.write("/home/user/blob2.bin", io.BytesIO(data))
        self.assertEqual(streamed.size, len(data))
        self.assertEqual(b"".join(self.sbx.files.read("/home/user/blob2.bin", format="stream")),
                         data)

    def test_directory_operations(self) -> None:
        files = self.sbx.files
        self.assertTrue(files.make_dir("/home/user/reports/2026"))
        self.assertFalse(files.make_dir("/home/user/reports/2026"))
        files.write("/home/user/reports/2026/q1.md", "# Q1\n", mode=0o600)
        entries = files.list("/home/user/reports/2026")
        self.assertEqual([(e.name, e.type, e.size) for e in entries],
                         [("q1.md", airlock.FileType.FILE, 5)])
        self.assertEqual(entries[0].path, "/home/user/reports/2026/q1.md")
        self.assertEqual(entries[0].mode & 0o777, 0o600)
        self.assertIn(("reports", "dir"), [(e.name, e.type) for e in files.list("/home/user")])
        moved = files.rename("/home/user/reports/2026/q1.md", "/home/user/reports/q1.md")
        self.assertEqual((moved.name, moved.size), ("q1.md", 5))
        self.assertTrue(files.exists("/home/user/reports/q1.md"))
        self.assertFalse(files.exists("/home/user/reports/2026/q1.md"))
        self.assertEqual(files.get_info("/home/user/reports").type, "dir")
        files.remove("/home/user/reports")
        self.assertFalse(files.exists("/home/user/reports"))
        with self.assertRaises(airlock.NotFoundError) as cm:
            files.read("/home/user/reports/q1.md")
        self.assertIn("q1.md", str(cm.exception))


def _tar_gz(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


class TransfersTest(unittest.TestCase):
    """Archives unpacked and packed by the transfer helper inside the sandbox (docs/transfer.md)."""

    sbx: Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.sbx = Sandbox.create()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sbx.kill()

    def test_upload_archive_then_download_it_back(self) -> None:
        members = {"repo/README.md": b"# hi\n", "repo/src/main.py": b"print(6 * 7)\n"}
        archive = _tar_gz(members)
        record = self.sbx.upload_archive("/home/user/in", archive)
        self.assertEqual((record.status, record.direction, record.plugin),
                         ("ok", "in", "upload"))
        self.assertEqual((record.files, record.archive_bytes), (2, len(archive)))
        self.assertEqual(record.sha256, hashlib.sha256(archive).hexdigest())
        self.assertEqual(self.sbx.commands.run("python3 /home/user/in/repo/src/main.py").stdout,
                         "42\n")
        packed = self.sbx.download_archive("/home/user/in", format="tar.gz")
        with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
            got = {m.name.removeprefix("./"): tar.extractfile(m).read()  # type: ignore[union-attr]
                   for m in tar.getmembers() if m.isfile()}
        self.assertEqual(got, members)
        sink = io.BytesIO()
        self.assertGreater(self.sbx.download_archive("/home/user/in", format="zip", file=sink), 0)
        self.assertEqual(sink.getvalue()[:2], b"PK")

    def test_an_entry_leaving_the_target_refuses_the_archive(self) -> None:
        with self.assertRaises(airlock.InvalidRequestError) as cm:
            self.sbx.upload_archive("/home/user/evil", _tar_gz({"../escape.txt": b"x"}))
        self.assertIn("'..'", str(cm.exception))
        self.assertFalse(self.sbx.files.exists("/home/user/escape.txt"))
        self.assertFalse(self.sbx.files.exists("/home/user/evil"))

    def test_a_url_no_rule_allows_is_denied(self) -> None:
        with self.assertRaises(airlock.TransferError) as cm:
            self.sbx.transfer_in("https://data.example.com/x.tar.gz", "/home/user/url")
        self.assertEqual(cm.exception.transfer.status, "denied")
        self.assertIn(cm.exception.transfer.id, [t.id for t in self.sbx.list_transfers()])
        self.assertFalse(self.sbx.cancel_transfer(cm.exception.transfer.id), "already ended")


if __name__ == "__main__":
    unittest.main()
