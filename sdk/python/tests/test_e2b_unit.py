"""airlock.e2b against the scripted fake supervisor (no root): how E2B's arguments, units and
defaults become API requests, what is refused, and E2B's shapes of results and errors."""

from __future__ import annotations

import asyncio
import base64
import time
import unittest
from typing import Any

import airlock
from airlock import e2b
from airlock.e2b import (
    AsyncSandbox,
    ChartType,
    CommandExitException,
    InvalidArgumentException,
    NotFoundException,
    Sandbox,
    TimeoutException,
)

from fake_supervisor import (
    SANDBOX,
    SB_PATH,
    Answer,
    FakeSupervisor,
    Request,
    error_answer,
    json_answer,
    ndjson,
)

CHART = {"type": "line", "title": "growth", "x_label": "t", "y_label": "v",
         "elements": [{"label": "a", "points": [[0, 1], [1, 2]]}]}


class E2BTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeSupervisor()
        self.addCleanup(self.fake.stop)
        self.created: list[dict[str, Any]] = []

        def create(request: Request) -> Answer:
            self.created.append(request.json())
            return json_answer(SANDBOX, 201)

        self.fake.route("POST", "/v1/sandboxes", create)
        self.fake.route("GET", SB_PATH, json_answer(SANDBOX))
        self.fake.route("DELETE", SB_PATH, Answer(204))

    def sandbox(self, **kwargs: Any) -> Sandbox:
        return Sandbox.create(url=self.fake.url, **kwargs)


class CreateTest(E2BTestCase):
    def test_e2b_defaults_and_units(self) -> None:
        sbx = self.sandbox(template="data-science", metadata={"u": "1"}, envs={"A": "b"})
        self.assertEqual(sbx.sandbox_id, SANDBOX["id"])
        # E2B's sandbox timeout (300 s by default) is both the idle allowance and the lifetime.
        self.assertEqual(self.created[-1], {"profile": "data-science", "keep_alive_s": 300,
                                            "lifetime_s": 300, "env": {"A": "b"},
                                            "metadata": {"u": "1"}})
        self.sandbox(timeout=59.5)
        self.assertEqual((self.created[-1]["keep_alive_s"], self.created[-1]["lifetime_s"]),
                         (60, 60))
        Sandbox(url=self.fake.url)  # E2B's older constructor form creates too
        self.assertEqual(len(self.created), 3)

    def test_refusals_name_the_reason(self) -> None:
        cases = {"allow_internet_access": True, "network": {"deny_out": ["0.0.0.0/0"]},
                 "proxy": "http://p", "mcp": {}, "auto_pause": True}
        for name, value in cases.items():
            with self.subTest(option=name):
                with self.assertRaises(InvalidArgumentException) as cm:
                    self.sandbox(**{name: value})
                self.assertIn(f"{name}= is not supported by airlock", str(cm.exception))
                self.assertIsInstance(cm.exception, airlock.InvalidRequestError)
        self.sandbox(secure=True, allow_internet_access=None)  # accepted
        with self.assertRaises(InvalidArgumentException):
            self.sandbox(timeout=0)
        with self.assertRaises(TypeError):
            self.sandbox(templat="typo")
        self.assertEqual(len(self.created), 1)

    def test_api_key_is_the_token_and_domain_the_supervisor(self) -> None:
        Sandbox.create(api_key="tok", domain=self.fake.url)
        self.assertEqual(self.fake.last().headers["authorization"], "Bearer tok")
        with self.assertRaises(airlock.SupervisorUnavailableError) as cm:
            Sandbox.create(domain="127.0.0.1:1")
        self.assertIn("https://127.0.0.1:1", str(cm.exception))
        self.assertIsInstance(cm.exception, e2b.SandboxException)

    def test_errors_have_e2b_names_and_stay_airlock_errors(self) -> None:
        self.fake.route("GET", "/v1/sandboxes/gone", error_answer(404, "not_found", "gone"))
        with self.assertRaises(NotFoundException) as cm:
            Sandbox.connect("gone", url=self.fake.url)
        self.assertIsInstance(cm.exception, airlock.NotFoundError)
        self.assertEqual(str(cm.exception), "gone")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        self.fake.route("DELETE", SB_PATH, error_answer(
            403, "denied_by_review", "no", review={"verdict": "deny", "rule": "r1"}))
        with self.assertRaises(airlock.DeniedByReview) as denied:
            self.sandbox().kill()
        self.assertIsInstance(denied.exception, e2b.SandboxException)
        self.assertEqual((denied.exception.rule, str(denied.exception)), ("r1", "no"))


class LifetimeTest(E2BTestCase):
    def test_set_timeout_ends_the_sandbox_that_long_from_now(self) -> None:
        sent: list[dict[str, Any]] = []
        # created 100 s before the supervisor's "now" (last_active_at)
        info = {**SANDBOX, "created_at": 1_795_000_000_000, "last_active_at": 1_795_000_100_000}
        self.fake.route("GET", SB_PATH, json_answer(info))

        def keepalive(request: Request) -> Answer:
            sent.append(request.json())
            return json_answer(info)

        self.fake.route("POST", SB_PATH + "/keepalive", keepalive)
        sbx = self.sandbox()
        sbx.set_timeout(30)
        self.assertEqual(sent, [{"keep_alive_s": 30, "lifetime_s": 130}])
        Sandbox.set_timeout(SANDBOX["id"], 45, url=self.fake.url)
        self.assertEqual(sent[-1], {"keep_alive_s": 45, "lifetime_s": 145})

    def test_get_info_and_class_level_kill(self) -> None:
        info = self.sandbox().get_info()
        self.assertEqual((info.sandbox_id, info.template_id), (SANDBOX["id"], SANDBOX["profile"]))
        self.assertTrue(Sandbox.kill(SANDBOX["id"], url=self.fake.url))
        self.fake.route("GET", "/v1/sandboxes/other", error_answer(404, "not_found", "no"))
        self.assertFalse(Sandbox.kill("other", url=self.fake.url))

    def test_get_metrics_is_one_sample_in_e2b_terms(self) -> None:
        self.fake.route("GET", SB_PATH + "/metrics", json_answer({
            "sandbox_id": SANDBOX["id"], "cpu_seconds": 2.0, "memory_bytes": 1000,
            "memory_limit_bytes": 4000, "disk_bytes": 10, "disk_limit_bytes": None,
            "uptime_s": 8.0, "sampled_at": "2026-11-28T07:12:03Z"}))
        [m] = self.sandbox().get_metrics()
        self.assertEqual((m.mem_used, m.mem_total, m.disk_used, m.disk_total), (1000, 4000, 10, 0))
        self.assertAlmostEqual(m.cpu_used_pct, 25.0)  # 2 CPU seconds over 8 s of life
        self.assertIsNotNone(m.timestamp)
        self.assertEqual(len(Sandbox.get_metrics(SANDBOX["id"], url=self.fake.url)), 1)

    def test_get_host_is_the_port_link_without_scheme(self) -> None:
        self.fake.route("POST", SB_PATH + "/ports/3000/link",
                        json_answer({"path": "/v1/ports/tok123/", "port": 3000}))
        sbx = self.sandbox()
        self.assertEqual(sbx.get_host(3000), self.fake.url[len("unix://"):] + "/v1/ports/tok123/")
        self.assertEqual(sbx.native.port_url(3000), self.fake.url + "/v1/ports/tok123/")
        with self.assertRaises(InvalidArgumentException):
            sbx.get_host(70000)


class RunCodeTest(E2BTestCase):
    def test_results_callbacks_and_errors_in_e2b_shapes(self) -> None:
        png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
        self.fake.route("POST", SB_PATH + "/code", ndjson([
            {"type": "stdout", "data": "hi\n"},
            {"type": "display", "data": {"image/png": png, "text/plain": "<Figure>",
                                         "application/vnd.airlock.chart+json": CHART}},
            {"type": "error", "name": "ValueError", "value": "bad",
             "traceback": ["Traceback", "ValueError: bad"]},
            {"type": "end", "status": "error", "execution_count": 4}]))
        messages: list[e2b.OutputMessage] = []
        sbx = self.sandbox()
        before = time.time_ns()
        ex = sbx.run_code("x", on_stdout=messages.append, envs={"K": "V"}, timeout=5)
        self.assertEqual(self.fake.last().json()["env"], {"K": "V"})
        self.assertEqual((messages[0].line, messages[0].error), ("hi\n", False))
        self.assertGreaterEqual(messages[0].timestamp, before)  # Unix ns, as E2B's
        result = ex.results[0]
        self.assertEqual(result.png, png)
        self.assertEqual(result.chart.type, ChartType.LINE)
        self.assertEqual(result.chart.elements[0].points, [[0, 1], [1, 2]])
        self.assertEqual(result.chart.to_dict(), CHART)
        self.assertEqual((ex.error.name, ex.error.value), ("ValueError", "bad"))
        self.assertEqual(ex.error.traceback, "Traceback\nValueError: bad")
        self.assertEqual(ex.execution_count, 4)
        with self.assertRaises(InvalidArgumentException):
            sbx.run_code("x", language="python", context=airlock.Context("c1", "python"))

    def test_timeout_is_timeout_exception(self) -> None:
        self.fake.route("POST", SB_PATH + "/code", ndjson([
            {"type": "stdout", "data": "partial"}, {"type": "end", "status": "timeout"}]))
        with self.assertRaises(TimeoutException) as cm:
            self.sandbox().run_code("loop()", timeout=1)
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertEqual(cm.exception.execution.logs.stdout, ["partial"])

    def test_contexts_take_cwd(self) -> None:
        self.fake.route("POST", SB_PATH + "/contexts", json_answer(
            {"context_id": "c2", "language": "python", "state": "idle", "cwd": "/home/user/p"},
            201))
        ctx = self.sandbox().create_code_context(cwd="/home/user/p")
        self.assertEqual(self.fake.last().json(), {"language": "python", "cwd": "/home/user/p"})
        self.assertEqual((ctx.id, ctx.cwd), ("c2", "/home/user/p"))


class CommandsTest(E2BTestCase):
    def command(self, exit_code: int | None, signal: int = 0) -> None:
        self.fake.route("POST", SB_PATH + "/commands", ndjson([
            {"type": "start", "command_id": "c1", "pid": 7},
            {"type": "stdout", "data": "out\n"}, {"type": "stderr", "data": "err\n"},
            {"type": "exit", "exit_code": exit_code, "signal": signal}]))

    def test_run_with_e2b_defaults(self) -> None:
        self.command(0)
        result = self.sandbox().commands.run("echo out", envs={"A": "b"}, cwd="/tmp")
        self.assertEqual(self.fake.last().json(), {"argv": ["bash", "-c", "echo out"],
                                                   "env": {"A": "b"}, "cwd": "/tmp",
                                                   "timeout_s": 60})  # E2B's default 60 s
        self.assertEqual((result.stdout, result.stderr, result.exit_code, result.error),
                         ("out\n", "err\n", 0, None))
        self.sandbox().commands.run("x", timeout=0)
        self.assertNotIn("timeout_s", self.fake.last().json())  # 0: the profile's limit

    def test_non_zero_exit_and_signals_raise_command_exit_exception(self) -> None:
        self.command(3)
        with self.assertRaises(CommandExitException) as cm:
            self.sandbox().commands.run("false")
        self.assertEqual((cm.exception.exit_code, cm.exception.stdout, cm.exception.stderr),
                         (3, "out\n", "err\n"))
        self.command(None, signal=9)
        with self.assertRaises(CommandExitException) as cm:
            self.sandbox().commands.run("sleep 9")
        self.assertEqual((cm.exception.exit_code, cm.exception.error), (-1, "killed by signal 9"))

    def test_user_root_is_refused_and_user_accepted(self) -> None:
        self.command(0)
        self.sandbox().commands.run("id", user="user")
        for user in ("root", "admin"):
            with self.subTest(user=user):
                with self.assertRaises(InvalidArgumentException) as cm:
                    self.sandbox().commands.run("id", user=user)
                self.assertIn(f"user={user!r} is refused", str(cm.exception))
        with self.assertRaises(InvalidArgumentException):
            self.sandbox().files.read("/etc/shadow", user="root")


class AsyncTest(E2BTestCase):
    def test_async_sandbox_awaits_and_takes_coroutine_callbacks(self) -> None:
        self.fake.route("POST", SB_PATH + "/code", ndjson([
            {"type": "stdout", "data": "a"}, {"type": "result", "data": {"text/plain": "2"}},
            {"type": "end", "status": "ok"}]))
        self.fake.route("POST", SB_PATH + "/commands", ndjson([
            {"type": "start", "command_id": "c1", "pid": 7}, {"type": "exit", "exit_code": 1}]))
        lines: list[str] = []

        async def on_stdout(message: e2b.OutputMessage) -> None:
            await asyncio.sleep(0)
            lines.append(message.line)

        async def main() -> None:
            sbx = await AsyncSandbox.create(url=self.fake.url, timeout=120)
            self.assertEqual(self.created[-1]["lifetime_s"], 120)
            ex = await sbx.run_code("1+1", on_stdout=on_stdout)
            self.assertEqual(ex.text, "2")
            with self.assertRaises(CommandExitException):
                await sbx.commands.run("false")
            with self.assertRaises(InvalidArgumentException):
                await sbx.commands.run("id", user="root")
            with self.assertRaises(InvalidArgumentException):
                await AsyncSandbox.create(url=self.fake.url, allow_internet_access=False)
            self.assertTrue(await sbx.kill())

        asyncio.run(main())
        self.assertEqual(lines, ["a"])


if __name__ == "__main__":
    unittest.main()
