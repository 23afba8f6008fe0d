"""The SDK against a scripted fake supervisor (no root, no sandboxes): addresses, the mapping of
errors to types, NDJSON streaming and callbacks, base64 output, files, commands, review verdicts."""

from __future__ import annotations

import asyncio
import base64
import datetime
import io
import json
import os
import threading
import time
import unittest
from typing import Any
from unittest import mock

import airlock
from airlock import Sandbox
from airlock.transport import Endpoint, Transport

from fake_supervisor import (
    SANDBOX,
    SB_PATH,
    Answer,
    FakeSupervisor,
    Request,
    create_sandbox,
    error_answer,
    frames,
    json_answer,
    ndjson,
)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
AUDIT = {"execution": "9b1e0c2d4f6a8e01", "processes_started": 1,
         "processes": [{"ns_pid": 5, "path": "/usr/bin/python3", "argv": ["python3"]}],
         "processes_truncated": False, "connections_allowed": 0, "connections_denied": 1,
         "connections": [{"verdict": "deny", "protocol": "tcp", "address": "10.255.255.1",
                          "port": 80, "rule": "protected:10.0.0.0/8",
                          "rule_text": "protected range 10.0.0.0/8 (private)", "count": 1}],
         "connections_truncated": False, "bytes_sent": 0, "bytes_received": 0,
         "events_dropped": 0, "fail_closed": False, "failed": False,
         "first_denial": "connection to 10.255.255.1:80/tcp refused by protected range "
                         "10.0.0.0/8 (private)"}
CHART = {"type": "bar", "title": "Sales", "x_label": "month", "y_label": "EUR",
         "elements": [{"label": "Jan", "group": "2024", "value": 3.5}]}
REVIEW_ALLOW = {"verdict": "allow", "reviewer": None, "rule": None, "reason": None,
                "duration_ms": 0.05, "cached": True}


class FakeTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeSupervisor()
        self.addCleanup(self.fake.stop)
        self.fake.route("POST", "/v1/sandboxes", create_sandbox)
        self.fake.route("GET", SB_PATH, json_answer(SANDBOX))
        self.fake.route("DELETE", SB_PATH, Answer(204))

    def sandbox(self) -> Sandbox:
        return Sandbox.create(url=self.fake.url)


class AddressTest(unittest.TestCase):
    def test_unix_url(self) -> None:
        e = Endpoint.parse("unix:///run/airlock/airlock.sock")
        self.assertEqual(e.socket_path, "/run/airlock/airlock.sock")
        self.assertIsNone(e.host)

    def test_http_url(self) -> None:
        e = Endpoint.parse("http://127.0.0.1:8731")
        self.assertEqual((e.host, e.port, e.socket_path), ("127.0.0.1", 8731, None))
        self.assertEqual(Endpoint.parse("http://localhost/").port, 80)

    def test_bad_urls_name_what_is_wrong(self) -> None:
        cases = {
            "ftp://127.0.0.1:1": "scheme 'ftp'",
            "unix://relative.sock": "absolute path",
            "http://127.0.0.1:99999": "bad port",
            "http://127.0.0.1:80/v1": "path '/v1'",
            "127.0.0.1:80": "expected unix:///",
        }
        for url, expected in cases.items():
            with self.subTest(url=url):
                with self.assertRaises(airlock.ConfigurationError) as cm:
                    Endpoint.parse(url)
                self.assertIn(expected, str(cm.exception))
                self.assertIn(url, str(cm.exception))
                self.assertIsInstance(cm.exception, airlock.AirlockError)

    def test_environment_and_explicit_arguments(self) -> None:
        with mock.patch.dict(os.environ, {}, clear=True):
            t = Transport()
            self.assertEqual(t.endpoint.socket_path, "/run/airlock/airlock.sock")
            self.assertIsNone(t.token)
        with mock.patch.dict(os.environ, {"AIRLOCK_URL": "http://127.0.0.1:9000",
                                          "AIRLOCK_TOKEN": "tok-env"}):
            t = Transport()
            self.assertEqual((t.endpoint.port, t.token), (9000, "tok-env"))
            t = Transport(url="unix:///tmp/x.sock", token="tok-arg")
            self.assertEqual((t.endpoint.socket_path, t.token), ("/tmp/x.sock", "tok-arg"))

    def test_no_supervisor_is_unavailable_with_a_hint(self) -> None:
        with self.assertRaises(airlock.SupervisorUnavailableError) as cm:
            Sandbox.create(url="unix:///nonexistent/airlock.sock")
        self.assertIn("unix:///nonexistent/airlock.sock", str(cm.exception))
        self.assertIn("is `airlock serve` running", str(cm.exception))


class TokenTest(unittest.TestCase):
    def test_bearer_token_is_sent_on_tcp_and_unix(self) -> None:
        for tcp in (True, False):
            fake = FakeSupervisor(tcp=tcp)
            try:
                fake.route("GET", "/v1/sandboxes", json_answer({"sandboxes": []}))
                Sandbox.list(url=fake.url, token="s3cret")
                self.assertEqual(fake.last().headers.get("authorization"), "Bearer s3cret")
                with mock.patch.dict(os.environ, {"AIRLOCK_TOKEN": ""}):
                    Sandbox.list(url=fake.url)
                self.assertNotIn("authorization", fake.last().headers)
            finally:
                fake.stop()


class ErrorMappingTest(FakeTestCase):
    def test_each_error_code_maps_to_its_type_with_the_server_message(self) -> None:
        cases = [
            (400, "bad_request", airlock.InvalidRequestError),
            (401, "unauthorized", airlock.AuthenticationError),
            (403, "forbidden", airlock.ForbiddenError),
            (404, "not_found", airlock.NotFoundError),
            (405, "method_not_allowed", airlock.InvalidRequestError),
            (409, "conflict", airlock.ConflictError),
            (413, "payload_too_large", airlock.QuotaExceededError),
            (429, "too_many_requests", airlock.QuotaExceededError),
            (500, "internal", airlock.InternalError),
            (503, "unavailable", airlock.SupervisorUnavailableError),
        ]
        for status, code, cls in cases:
            with self.subTest(code=code):
                message = f"{code}: field 'name' was wrong"
                self.fake.route("POST", "/v1/sandboxes", error_answer(status, code, message))
                with self.assertRaises(cls) as cm:
                    Sandbox.create(name="x", url=self.fake.url, retry=airlock.NO_RETRIES)
                self.assertEqual(str(cm.exception), message)
                self.assertEqual((cm.exception.status, cm.exception.code), (status, code))
                self.assertIsInstance(cm.exception, airlock.AirlockError)

    def test_status_alone_still_maps_and_says_what_failed(self) -> None:
        self.fake.route("GET", "/v1/sandboxes/nope", Answer(404, b"gone", "text/plain"))
        with self.assertRaises(airlock.NotFoundError) as cm:
            Sandbox.connect("nope", url=self.fake.url)
        self.assertIn("GET /v1/sandboxes/nope: HTTP 404: gone", str(cm.exception))

    def test_denied_by_review_carries_the_verdict(self) -> None:
        review = {"verdict": "deny", "reviewer": "patterns", "rule": "py-subprocess",
                  "reason": "spawning processes is not allowed", "duration_ms": 0.21,
                  "cached": False, "future_field": [1, 2]}
        message = ("denied by reviewer 'patterns', rule 'py-subprocess': spawning processes "
                   "is not allowed")
        self.fake.route("POST", SB_PATH + "/code",
                        error_answer(403, "denied_by_review", message, review=review))
        self.fake.route("POST", SB_PATH + "/commands",
                        error_answer(403, "denied_by_review", "rejected by an operator",
                                     review={"verdict": "deny", "rule": "operator"}))
        sbx = self.sandbox()
        with self.assertRaises(airlock.DeniedByReview) as cm:
            sbx.run_code("import subprocess")
        e = cm.exception
        self.assertEqual(str(e), message)
        self.assertEqual(e.review, review)
        self.assertEqual((e.verdict, e.reviewer, e.rule, e.reason),
                         ("deny", "patterns", "py-subprocess", "spawning processes is not allowed"))
        self.assertIsInstance(e, airlock.ForbiddenError)
        with self.assertRaises(airlock.DeniedByReview) as cm:
            sbx.commands.run("rm -rf /")
        self.assertEqual(cm.exception.rule, "operator")
        self.assertIsNone(cm.exception.reviewer)  # absent fields are None, not errors

    def test_denied_by_review_without_a_review_object(self) -> None:
        self.fake.route("POST", SB_PATH + "/code",
                        error_answer(403, "denied_by_review", "denied"))
        with self.assertRaises(airlock.DeniedByReview) as cm:
            self.sandbox().run_code("1")
        self.assertEqual(cm.exception.review, {})
        self.assertIsNone(cm.exception.verdict)


class RetryTest(FakeTestCase):
    FAST = airlock.RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05)

    def test_429_and_503_are_retried_honouring_retry_after(self) -> None:
        answers = [error_answer(503, "unavailable", "draining", ), error_answer(
            429, "too_many_requests", "uid 0 has 256 requests in progress")]
        answers[1].headers["Retry-After"] = "0.2"

        def flaky(request: Request) -> Answer:
            return answers.pop(0) if answers else json_answer(SANDBOX, 201)

        self.fake.route("POST", "/v1/sandboxes", flaky)
        started = time.monotonic()
        sbx = Sandbox.create(url=self.fake.url, retry=self.FAST)
        self.assertEqual(sbx.id, SANDBOX["id"])
        self.assertGreaterEqual(time.monotonic() - started, 0.2)  # Retry-After honoured
        self.assertEqual([r.method for r in self.fake.requests].count("POST"), 3)

    def test_attempts_are_bounded_and_the_last_error_raised(self) -> None:
        self.fake.route("POST", "/v1/sandboxes", error_answer(429, "too_many_requests", "full"))
        with self.assertRaises(airlock.QuotaExceededError) as cm:
            Sandbox.create(url=self.fake.url, retry=self.FAST)
        self.assertEqual(str(cm.exception), "full")
        self.assertEqual(len(self.fake.requests), 3)

    def test_other_errors_are_not_retried(self) -> None:
        self.fake.route("POST", "/v1/sandboxes", error_answer(400, "bad_request", "bad"))
        with self.assertRaises(airlock.InvalidRequestError):
            Sandbox.create(url=self.fake.url, retry=self.FAST)
        self.assertEqual(len(self.fake.requests), 1)

    def test_a_streamed_upload_is_never_resent(self) -> None:
        sbx = self.sandbox()
        self.fake.route("PUT", SB_PATH + "/files", error_answer(503, "unavailable", "busy"))
        sbx._transport.retry = self.FAST
        with self.assertRaises(airlock.SupervisorUnavailableError):
            sbx.files.write("/home/user/big", io.BytesIO(b"x" * 10))
        self.assertEqual([r.method for r in self.fake.requests].count("PUT"), 1)

    def test_connection_refused_is_retried_then_reported(self) -> None:
        started = time.monotonic()
        with self.assertRaises(airlock.SupervisorUnavailableError) as cm:
            Sandbox.create(url="http://127.0.0.1:1", retry=self.FAST)
        self.assertIn("connection refused", str(cm.exception).lower())
        self.assertLess(time.monotonic() - started, 5)

    def test_retry_after_forms_and_policy_validation(self) -> None:
        from airlock.transport import retry_after_seconds
        self.assertEqual(retry_after_seconds("2"), 2.0)
        self.assertIsNone(retry_after_seconds("soon"))
        self.assertAlmostEqual(retry_after_seconds("Thu, 01 Jan 1970 00:00:00 GMT"), 0.0)
        self.assertLessEqual(airlock.RetryPolicy(base_delay=1, max_delay=2).delay(10), 2)
        self.assertEqual(airlock.RetryPolicy(max_retry_after=3).delay(0, retry_after=60), 3)
        with self.assertRaises(airlock.ConfigurationError):
            airlock.RetryPolicy(max_attempts=0)


class AsyncSandboxTest(FakeTestCase):
    def test_the_same_calls_awaited_with_async_callbacks(self) -> None:
        self.fake.route("POST", SB_PATH + "/code", frames([
            ("o", b"one\n"), ("j", {"type": "result", "data": {"text/plain": "2"}}),
            ("j", {"type": "end", "status": "ok", "execution_count": 3})]))
        self.fake.route("POST", SB_PATH + "/commands", ndjson([
            {"type": "start", "command_id": "c1", "pid": 9},
            {"type": "stdout", "data": "hi\n"},
            {"type": "exit", "exit_code": 0}]))
        self.fake.route("PUT", SB_PATH + "/files", json_answer({"path": "/home/user/a", "size": 3},
                                                              201))
        self.fake.route("GET", SB_PATH + "/files", Answer(200, b"abc", "application/octet-stream"))
        self.fake.route("GET", SB_PATH + "/metrics", json_answer({"sandbox_id": SANDBOX["id"],
                                                                  "memory_bytes": 4096}))
        seen: list[str] = []

        async def on_stdout(message: airlock.OutputMessage) -> None:
            await asyncio.sleep(0)
            seen.append(message.line)

        async def scenario() -> None:
            async with await airlock.AsyncSandbox.create(url=self.fake.url) as sbx:
                ex = await sbx.run_code("x", on_stdout=on_stdout, envs={"A": "b"})
                self.assertEqual((ex.text, ex.execution_count), ("2", 3))
                result = await sbx.commands.run("echo hi", on_stdout=seen.append)
                self.assertEqual(result.stdout, "hi\n")
                self.assertEqual((await sbx.files.write("a", b"abc")).size, 3)
                await sbx.files.write("a", io.BytesIO(b"x" * 3_000_000))  # streamed up
                self.assertTrue(self.fake.last().chunked)
                self.assertEqual(len(self.fake.last().body), 3_000_000)
                self.assertEqual(await sbx.files.read("a"), "abc")
                chunks = [c async for c in await sbx.files.read("a", format="stream")]
                self.assertEqual(b"".join(chunks), b"abc")
                self.assertEqual((await sbx.metrics()).memory_bytes, 4096)

        asyncio.run(scenario())
        self.assertEqual(seen, ["one\n", "hi\n"])
        self.assertEqual(self.fake.last().method, "DELETE")  # async with killed it


class SandboxTest(FakeTestCase):
    def test_create_sends_the_api_field_names(self) -> None:
        sbx = Sandbox.create(profile="data-science", language="python", name="analysis-42",
                             envs={"K": "V"}, metadata={"user": "u1"}, keep_alive=300,
                             lifetime=3600, url=self.fake.url)
        self.assertEqual(self.fake.last("POST").json(), {
            "profile": "data-science", "language": "python", "name": "analysis-42",
            "env": {"K": "V"}, "metadata": {"user": "u1"}, "keep_alive_s": 300,
            "lifetime_s": 3600})
        self.assertEqual((sbx.id, sbx.sandbox_id, sbx.name),
                         ("3f2a9c0d1e4b5a67", "3f2a9c0d1e4b5a67", "analysis-42"))
        info = sbx.info()
        self.assertEqual((info.state, info.metadata, info.keep_alive_s), ("running", {"user": "u1"}, 300))
        self.assertEqual(info.created_at.year, 2026)  # type: ignore[union-attr]
        self.assertEqual(info.mounts, [])

    def test_create_sends_mounts_and_reads_them_back_with_defaults(self) -> None:
        sbx = Sandbox.create(name="m", persistent=True, mounts=[
            airlock.Mount("hostdir:datasets/imagenet", "/mnt/imagenet", writable=True),
            airlock.Mount("hostdir:models"),
            "hostdir:scratch",
            {"source": "hostdir:logs/today", "writable": False},
        ], url=self.fake.url)
        self.assertEqual(self.fake.last("POST").json(), {
            "name": "m", "persistent": True, "mounts": [
                {"source": "hostdir:datasets/imagenet", "path": "/mnt/imagenet",
                 "writable": True},
                {"source": "hostdir:models"},
                {"source": "hostdir:scratch"},
                {"source": "hostdir:logs/today", "writable": False}]})
        # get answers the sandbox as create did: mounts with their paths filled in.
        create = self.fake.last("POST")
        self.fake.route("GET", SB_PATH, lambda _r: create_sandbox(create))
        self.assertEqual(sbx.info().mounts, [
            airlock.Mount("hostdir:datasets/imagenet", "/mnt/imagenet", True),
            airlock.Mount("hostdir:models", "/mnt/models", False),
            airlock.Mount("hostdir:scratch", "/mnt/scratch", False),
            airlock.Mount("hostdir:logs/today", "/mnt/logs/today", False),
        ])
        self.assertEqual(sbx.info().raw["mounts"][1],
                         {"source": "hostdir:models", "path": "/mnt/models", "writable": False})
        # No mounts (or an empty list) sends no field.
        Sandbox.create(mounts=[], url=self.fake.url)
        self.assertEqual(self.fake.last("POST").json(), {})
        before = len(self.fake.requests)
        with self.assertRaises(TypeError):
            Sandbox.create(mounts=[42], url=self.fake.url)  # type: ignore[list-item]
        self.assertEqual(len(self.fake.requests), before, "refused before sending")

    def test_a_bad_mount_is_an_invalid_request(self) -> None:
        with self.assertRaises(airlock.InvalidRequestError) as cm:
            Sandbox.create(mounts=[airlock.Mount("hostdir:data", "/etc/data")],
                           url=self.fake.url)
        self.assertIn("/mnt", cm.exception.message)
        self.fake.route("POST", "/v1/sandboxes", error_answer(
            403, "forbidden", "profile 'default' may not mount 'data' writable"))
        with self.assertRaises(airlock.ForbiddenError):
            Sandbox.create(mounts=[airlock.Mount("hostdir:data", writable=True)],
                           url=self.fake.url)

    def test_mounts_in_a_listed_sandbox(self) -> None:
        listed = dict(SANDBOX, mounts=[
            {"source": "hostdir:datasets", "path": "/mnt/datasets", "writable": False},
            {"source": "hostdir:out", "path": "/mnt/results", "writable": True}, "junk"])
        self.fake.route("GET", "/v1/sandboxes", json_answer({"sandboxes": [listed]}))
        [info] = Sandbox.list(url=self.fake.url)
        self.assertEqual(info.mounts, [airlock.Mount("hostdir:datasets", "/mnt/datasets"),
                                       airlock.Mount("hostdir:out", "/mnt/results", True)])

    def test_unknown_and_missing_fields_are_tolerated(self) -> None:
        bare = json_answer({"id": "00000000000000aa", "audit": {"events": 3}, "state": "running"})
        self.fake.route("GET", "/v1/sandboxes/bare", bare)
        self.fake.route("GET", "/v1/sandboxes/00000000000000aa", bare)
        sbx = Sandbox.connect("bare", url=self.fake.url)
        info = sbx.info()
        self.assertEqual(info.raw["audit"], {"events": 3})
        self.assertIsNone(info.name)
        self.assertEqual(info.metadata, {})

    def test_list_filters_by_metadata_in_the_query(self) -> None:
        self.fake.route("GET", "/v1/sandboxes", json_answer({"sandboxes": [SANDBOX]}))
        found = Sandbox.list(metadata={"user": "u 1", "team": "a&b"}, url=self.fake.url)
        self.assertEqual([s.id for s in found], [SANDBOX["id"]])
        self.assertEqual(self.fake.last().query, {"metadata.user": ["u 1"], "metadata.team": ["a&b"]})

    def test_list_behind_a_fleet_proxy_asks_every_node(self) -> None:
        # The proxy cannot merge lists: it says so, and names the nodes at /v1/fleet.
        per_node = error_answer(400, "bad_request", "this fleet lists per node: add ?node=NAME "
                                "(GET /v1/fleet names the nodes)")
        lists = {"n1": [dict(SANDBOX, id="n1_00000000000000a1", node="n1")],
                 "n2": [dict(SANDBOX, id="n2_00000000000000b2", node="n2"),
                        dict(SANDBOX, id="n2_00000000000000b3", node="n2")]}

        def sandboxes(request):
            node = request.query.get("node", [None])[0]
            return json_answer({"sandboxes": lists[node]}) if node else per_node

        self.fake.route("GET", "/v1/sandboxes", sandboxes)
        self.fake.route("GET", "/v1/fleet", json_answer({"nodes": ["n1", "n2"]}))
        found = Sandbox.list(metadata={"user": "u1"}, url=self.fake.url)
        self.assertEqual([(s.id, s.node) for s in found],
                         [("n1_00000000000000a1", "n1"), ("n2_00000000000000b2", "n2"),
                          ("n2_00000000000000b3", "n2")])
        self.assertEqual(self.fake.last("GET", "/v1/sandboxes").query,
                         {"metadata.user": ["u1"], "node": ["n2"]})
        found = asyncio.run(airlock.AsyncSandbox.list(url=self.fake.url))
        self.assertEqual(len(found), 3)
        # One node, asked by name; and any other 400 is still an error.
        self.assertEqual([s.id for s in Sandbox.list(node="n1", url=self.fake.url)],
                         ["n1_00000000000000a1"])
        self.fake.route("GET", "/v1/sandboxes", error_answer(400, "bad_request", "no"))
        with self.assertRaises(airlock.InvalidRequestError):
            Sandbox.list(url=self.fake.url)

    def test_names_are_quoted_in_paths(self) -> None:
        self.fake.route("GET", "/v1/sandboxes/a/b", json_answer(SANDBOX))
        with self.assertRaises(airlock.NotFoundError):
            Sandbox.connect("a/b", url=self.fake.url)
        self.assertEqual(self.fake.last().path, "/v1/sandboxes/a%2Fb")

    def test_set_timeout_and_context_manager_kill(self) -> None:
        self.fake.route("POST", SB_PATH + "/keepalive", json_answer(dict(SANDBOX, keep_alive_s=900)))
        with self.sandbox() as sbx:
            self.assertEqual(sbx.set_timeout(900).keep_alive_s, 900)
            self.assertEqual(self.fake.last().json(), {"keep_alive_s": 900})
        self.assertEqual(self.fake.last().method, "DELETE")
        self.fake.route("DELETE", SB_PATH, error_answer(404, "not_found", "gone"))
        self.assertFalse(sbx.kill())

    def test_metrics_reads_the_resource_use_with_unlimited_limits_as_none(self) -> None:
        self.fake.route("GET", SB_PATH + "/metrics", json_answer({
            "sandbox_id": SANDBOX["id"], "cpu_seconds": 1.25, "memory_bytes": 52428800,
            "memory_peak_bytes": 73400320, "memory_limit_bytes": None, "pids": 3,
            "pids_limit": 256, "disk_bytes": 4096, "disk_limit_bytes": 536870912,
            "oom_kills": 1, "executions": 7, "uptime_s": 12.5,
            "sampled_at": "2026-11-28T07:12:03.417Z"}))
        m = self.sandbox().metrics()
        self.assertEqual(self.fake.last().method, "GET")
        self.assertEqual((m.sandbox_id, m.cpu_seconds, m.memory_bytes), (SANDBOX["id"], 1.25,
                                                                          52428800))
        self.assertIsNone(m.memory_limit_bytes)
        self.assertEqual((m.pids_limit, m.oom_kills, m.executions), (256, 1, 7))
        self.assertEqual(m.sampled_at, datetime.datetime(2026, 11, 28, 7, 12, 3, 417000,
                                                         tzinfo=datetime.timezone.utc))

    def test_keep_alive_connections_are_reused_and_a_closed_one_is_replaced(self) -> None:
        sbx = self.sandbox()
        for _ in range(5):
            sbx.info()
        self.assertEqual(self.fake.connections, 1)
        self.fake.route("GET", SB_PATH, Answer(200, json.dumps(SANDBOX).encode(), close=True))
        sbx.info()  # the server closes after this answer
        self.fake.route("GET", SB_PATH, json_answer(SANDBOX))
        self.assertEqual(sbx.info().id, SANDBOX["id"])
        self.assertEqual(self.fake.connections, 2)


class RunCodeTest(FakeTestCase):
    def test_a_run_taken_over_after_a_restart_is_fetched_with_what_was_held(self) -> None:
        self.fake.route("GET", SB_PATH + "/contexts/python-2/runs/last/events", ndjson([
            {"type": "supervisor_restart", "run_id": "r4", "held_bytes": 120, "dropped_bytes": 0},
            {"type": "stdout", "data": "slept 42\n"},
            {"type": "result", "data": {"text/plain": "42"}},
            {"type": "end", "status": "ok", "context_id": "python-2", "execution_count": 4},
        ]))
        ex = self.sandbox().recovered_run("python-2")
        self.assertEqual(ex.restart, {"type": "supervisor_restart", "run_id": "r4",
                                      "held_bytes": 120, "dropped_bytes": 0})
        self.assertEqual(ex.logs.stdout, ["slept 42\n"])
        self.assertEqual(ex.text, "42")
        self.assertEqual(ex.execution_count, 4)
        self.fake.route("GET", SB_PATH + "/contexts/python/runs/r1/events",
                        error_answer(404, "not_found", "no run r1 taken over"))
        with self.assertRaises(airlock.NotFoundError):
            self.sandbox().recovered_run("python", "r1")
        with self.assertRaises(airlock.InvalidRequestError):
            self.sandbox().recovered_run("python", "")

    def test_events_become_an_execution(self) -> None:
        self.fake.route("POST", SB_PATH + "/code", ndjson([
            {"type": "stdout", "data": "hello\n"},
            {"type": "stderr", "data_base64": base64.b64encode(b"bad \xff byte\n").decode()},
            {"type": "display", "data": {"image/png": base64.b64encode(PNG).decode(),
                                         "text/plain": "<Figure size 640x480 with 1 Axes>",
                                         "application/vnd.airlock.chart+json": CHART}},
            {"type": "result", "data": {"text/plain": "   a\n0  1", "text/html": "<table/>",
                                        "application/json": '{"a": [1]}',
                                        "application/x-custom": "c"}},
            {"type": "end", "status": "ok", "duration_ms": 12.5, "context_id": "python",
             "context_restarted": False, "review": REVIEW_ALLOW, "audit": AUDIT,
             "execution_count": 7},
            {"type": "future-event", "data": 1},
        ]))
        ex = self.sandbox().run_code("df", language="python", timeout=5, envs={"K": "V"})
        self.assertEqual(self.fake.last().json(), {"code": "df", "stream": True,
                                                   "language": "python", "timeout_s": 5,
                                                   "env": {"K": "V"}})
        self.assertEqual(ex.execution_count, 7)
        self.assertEqual(ex.logs.stdout, ["hello\n"])
        self.assertEqual(ex.logs.stderr, ["bad \ufffd byte\n"])
        self.assertIsNone(ex.error)
        self.assertEqual(len(ex.results), 2)
        figure, value = ex.results
        # base64 text, as in E2B and the TypeScript SDK
        self.assertIsInstance(figure.png, str)
        self.assertEqual(base64.b64decode(figure.png), PNG)
        self.assertEqual(figure.chart, CHART)
        self.assertEqual(figure.data["image/png"], figure.png)
        self.assertFalse(figure.is_main_result)
        self.assertEqual(figure.formats(), ["png", "chart"])
        self.assertTrue(value.is_main_result)
        self.assertEqual(value.html, "<table/>")
        self.assertEqual(value.json, {"a": [1]})
        self.assertEqual(value.extra, {"application/x-custom": "c"})
        self.assertEqual(value.formats(), ["html", "json", "application/x-custom"])
        self.assertEqual(ex.text, "   a\n0  1")
        self.assertEqual((ex.status, ex.context_id, ex.duration_ms), ("ok", "python", 12.5))
        self.assertEqual(ex.review, REVIEW_ALLOW)
        self.assertEqual(ex.raw_end["audit"], AUDIT)
        assert ex.audit is not None
        self.assertEqual((ex.audit.execution, ex.audit.processes_started), ("9b1e0c2d4f6a8e01", 1))
        self.assertEqual(ex.audit.processes[0]["path"], "/usr/bin/python3")
        self.assertEqual(ex.audit.connections_denied, 1)
        self.assertEqual(ex.audit.connections[0].rule, "protected:10.0.0.0/8")
        self.assertEqual((ex.audit.connections[0].address, ex.audit.connections[0].port),
                         ("10.255.255.1", 80))
        self.assertTrue(ex.audit.first_denial.startswith("connection to 10.255.255.1:80/tcp"))
        self.assertFalse(ex.audit.failed)

    def test_callbacks_run_as_each_line_arrives(self) -> None:
        seen_first = threading.Event()
        self.fake.route("POST", SB_PATH + "/code", ndjson([
            {"type": "stdout", "data": "first\n"},
            # The server waits for the client to have handled the first event: a client that
            # read the whole answer before calling back would never get the rest.
            lambda: self.assertTrue(seen_first.wait(10), "on_stdout was not called live"),
            {"type": "stdout", "data": "second\n"},
            {"type": "error", "name": "ValueError", "value": "bad",
             "traceback": ["Traceback (most recent call last):", "ValueError: bad"]},
            {"type": "end", "status": "error", "context_id": "python"},
        ]))
        got: list[Any] = []

        def on_stdout(msg: airlock.OutputMessage) -> None:
            got.append(msg.line)
            seen_first.set()

        ex = self.sandbox().run_code("x", on_stdout=on_stdout, on_error=got.append)
        self.assertEqual(got[:2], ["first\n", "second\n"])
        self.assertEqual(got[2], ex.error)
        self.assertEqual((ex.error.name, ex.error.value), ("ValueError", "bad"))  # type: ignore[union-attr]
        self.assertEqual(ex.error.traceback,  # type: ignore[union-attr]
                         "Traceback (most recent call last):\nValueError: bad")
        self.assertIsNone(ex.text)

    def test_events_split_and_joined_across_chunks(self) -> None:
        lines = [json.dumps(e).encode() + b"\n" for e in (
            {"type": "stdout", "data": "a"}, {"type": "stdout", "data": "b" * 200_000},
            {"type": "stdout", "data": "c"}, {"type": "end", "status": "ok"})]
        stream = b"".join(lines)
        cut = len(lines[0]) + 1000  # the first event whole, the second split over many chunks
        chunks = [stream[:cut]] + [stream[i:i + 7000] for i in range(cut, len(stream), 7000)]
        self.fake.route("POST", SB_PATH + "/code", Answer(200, chunks, "application/x-ndjson"))
        ex = self.sandbox().run_code("x")
        self.assertEqual(ex.logs.stdout, ["a", "b" * 200_000, "c"])
        self.assertEqual(ex.status, "ok")

    def test_timeout_raises_with_the_partial_execution(self) -> None:
        self.fake.route("POST", SB_PATH + "/code", ndjson([
            {"type": "stdout", "data": "started\n"},
            {"type": "error", "name": "KeyboardInterrupt", "value": "", "traceback": []},
            {"type": "end", "status": "timeout", "context_id": "python"},
        ]))
        with self.assertRaises(airlock.TimeoutError) as cm:
            self.sandbox().run_code("while True: pass", timeout=1)
        self.assertIn("timed out after 1 s", str(cm.exception))
        self.assertIsInstance(cm.exception, TimeoutError)  # the built-in one too
        self.assertEqual(cm.exception.execution.logs.stdout, ["started\n"])  # type: ignore[union-attr]

    def test_context_lost_is_an_error(self) -> None:
        self.fake.route("POST", SB_PATH + "/code", ndjson([
            {"type": "end", "status": "context_lost", "context_id": "c7",
             "context_restarted": True}]))
        ex = self.sandbox().run_code("import os; os._exit(1)", context="c7")
        self.assertEqual(self.fake.last().json()["context_id"], "c7")
        self.assertEqual(ex.error.name, "ContextLost")  # type: ignore[union-attr]
        self.assertIn("c7", ex.error.value)  # type: ignore[union-attr]
        self.assertTrue(ex.context_restarted)

    def test_a_stream_cut_before_end_is_reported(self) -> None:
        self.fake.route("POST", SB_PATH + "/code", ndjson([{"type": "stdout", "data": "x"}]))
        with self.assertRaises(airlock.SupervisorUnavailableError) as cm:
            self.sandbox().run_code("x")
        self.assertIn("before the 'end' event", str(cm.exception))

    def test_contexts(self) -> None:
        ctx = {"context_id": "c1", "language": "python", "state": "idle",
               "created_at": 1795000000000, "runs": 0}
        self.fake.route("POST", SB_PATH + "/contexts", json_answer(ctx, 201))
        self.fake.route("GET", SB_PATH + "/contexts", json_answer({"contexts": [ctx]}))
        self.fake.route("POST", SB_PATH + "/contexts/c1/restart", json_answer(ctx))
        self.fake.route("DELETE", SB_PATH + "/contexts/c1", Answer(204))
        sbx = self.sandbox()
        c = sbx.create_code_context("python")
        self.assertEqual(self.fake.last().json(), {"language": "python"})
        self.assertEqual((c.id, c.language), ("c1", "python"))
        self.assertEqual([x.id for x in sbx.list_code_contexts()], ["c1"])
        self.assertEqual(sbx.restart_code_context(c).id, "c1")
        sbx.remove_code_context("c1")
        self.assertEqual(self.fake.last().method, "DELETE")


class CommandsTest(FakeTestCase):
    def test_foreground_run_streams_and_joins_split_utf8(self) -> None:
        euro = "€".encode()
        self.fake.route("POST", SB_PATH + "/commands", ndjson([
            {"type": "start", "command_id": "c1", "pid": 7},
            {"type": "stdout", "data_base64": base64.b64encode(b"price " + euro[:1]).decode()},
            {"type": "stdout", "data_base64": base64.b64encode(euro[1:] + b"5\n").decode()},
            {"type": "stderr", "data": "warn\n"},
            {"type": "exit", "exit_code": 3, "signal": 0, "timed_out": False, "stdout_bytes": 10,
             "stderr_bytes": 5, "stdout_truncated": False, "stderr_truncated": False,
             "duration_ms": 3.1, "review": REVIEW_ALLOW,
             "audit": {"execution": "e2", "skipped": "another execution ..."}},
        ]))
        chunks: list[str] = []
        r = self.sandbox().commands.run(["sh", "-c", "x"], envs={"A": "1"}, cwd="/tmp",
                                        stdin=b"\x00in", on_stderr=chunks.append, timeout=9)
        self.assertEqual(self.fake.last().json(), {
            "argv": ["sh", "-c", "x"], "env": {"A": "1"}, "cwd": "/tmp",
            "stdin_base64": base64.b64encode(b"\x00in").decode(), "timeout_s": 9})
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, "price €5\n", "warn\n"))
        self.assertEqual((r.command_id, r.pid, r.signal, r.ok), ("c1", 7, None, False))
        self.assertEqual(r.review, REVIEW_ALLOW)
        assert r.audit is not None
        self.assertEqual((r.audit.execution, r.audit.skipped), ("e2", "another execution ..."))
        self.assertEqual(r.audit.processes, [])
        self.assertEqual(chunks, ["warn\n"])

    def test_frames_carry_output_as_its_bytes(self) -> None:
        # A frame may end anywhere in a chunk and a UTF-8 sequence across two frames.
        euro = "€".encode()
        self.fake.route("POST", SB_PATH + "/commands", frames([
            ("j", {"type": "start", "command_id": "c1", "pid": 7}),
            ("o", b"price " + euro[:1]),
            ("o", euro[1:] + b"5\n"),
            ("e", b"\xffraw\n"),
            ("j", {"type": "exit", "exit_code": 0, "signal": 0, "timed_out": False}),
        ]))
        chunks: list[str] = []
        r = self.sandbox().commands.run("x", on_stdout=chunks.append)
        self.assertIn("application/vnd.airlock.frames", self.fake.last().headers["accept"])
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (0, "price €5\n", "\ufffdraw\n"))
        self.assertEqual(len(chunks), 2)

    def test_a_frame_cut_short_is_reported(self) -> None:
        self.fake.route("POST", SB_PATH + "/commands", Answer(
            200, [b"o\x00\x00\x00\x10short"], "application/vnd.airlock.frames"))
        with self.assertRaises(airlock.SupervisorUnavailableError) as e:
            self.sandbox().commands.run("x")
        self.assertIn("inside a frame", str(e.exception))

    def test_shell_string_and_signal_exit(self) -> None:
        self.fake.route("POST", SB_PATH + "/commands", ndjson([
            {"type": "exit", "exit_code": None, "signal": 9, "timed_out": False}]))
        r = self.sandbox().commands.run("kill -9 $$", stdin="text")
        self.assertEqual(self.fake.last().json(), {"cmd": "kill -9 $$", "stdin": "text"})
        self.assertEqual((r.exit_code, r.signal), (None, 9))
        self.assertIsNone(r.audit, "no audit in the exit event: the profile audits nothing")

    def test_timeout_raises_with_the_result(self) -> None:
        self.fake.route("POST", SB_PATH + "/commands", ndjson([
            {"type": "stdout", "data": "tick\n"},
            {"type": "exit", "exit_code": None, "signal": 9, "timed_out": True}]))
        with self.assertRaises(airlock.TimeoutError) as cm:
            self.sandbox().commands.run("sleep 100", timeout=1)
        self.assertEqual(cm.exception.result.stdout, "tick\n")  # type: ignore[union-attr]
        self.assertTrue(cm.exception.result.timed_out)  # type: ignore[union-attr]

    def test_background_handle(self) -> None:
        base = SB_PATH + "/commands"
        self.fake.route("POST", base, json_answer({"command_id": "c2", "pid": 9}, 201))
        self.fake.route("GET", base + "/c2/events", ndjson([
            {"type": "stdout", "data": "replayed\n"},
            {"type": "stdout", "data": "live\n"},
            {"type": "exit", "exit_code": 0, "signal": 0, "timed_out": False}]))
        self.fake.route("POST", base + "/c2/stdin", Answer(204))
        self.fake.route("POST", base + "/c2/signal", Answer(204))
        self.fake.route("DELETE", base + "/c2", Answer(204))
        self.fake.route("GET", base, json_answer({"commands": [
            {"command_id": "c2", "argv": ["cat"], "pid": 9, "state": "running",
             "background": True, "started_at": 1795000000000, "exit_code": None, "signal": None,
             "new_field": True}]}))
        cmds = self.sandbox().commands
        handle = cmds.run("cat", background=True)
        self.assertEqual(self.fake.last().json(), {"cmd": "cat", "background": True})
        self.assertEqual((handle.id, handle.pid), ("c2", 9))
        handle.send_stdin("hi")
        self.assertEqual(self.fake.last().json(), {"eof": False, "data": "hi"})
        handle.send_stdin(b"\xff", eof=True)
        self.assertEqual(self.fake.last().json(), {"eof": True, "data_base64": "/w=="})
        handle.signal("SIGTERM")
        self.assertEqual(self.fake.last().json(), {"signal": "SIGTERM"})
        result = handle.wait()
        self.assertEqual((result.exit_code, result.stdout), (0, "replayed\nlive\n"))
        self.assertIs(handle.wait(), result)  # waiting again answers the same result
        self.assertTrue(handle.kill())
        listed = cmds.list()
        self.assertEqual([(c.id, c.argv, c.state) for c in listed], [("c2", ["cat"], "running")])
        seen: list[str] = []
        attached = cmds.connect("c2", on_stdout=seen.append)
        self.assertEqual(attached.wait().stdout, "replayed\nlive\n")
        self.assertEqual(seen, ["replayed\n", "live\n"])
        with self.assertRaises(airlock.NotFoundError):
            cmds.connect("c404")
        self.fake.route("DELETE", base + "/c2", error_answer(404, "not_found", "command 'c2'"))
        self.assertFalse(handle.kill())
        self.fake.route("DELETE", base + "/c2", error_answer(409, "conflict", "c2 has exited"))
        self.assertFalse(handle.kill())

    def test_empty_argv_is_refused_before_sending(self) -> None:
        with self.assertRaises(airlock.InvalidRequestError):
            self.sandbox().commands.run([])


class FilesTest(FakeTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.stored: dict[str, bytes] = {}

        def put(r: Request) -> Answer:
            self.stored[r.query["path"][0]] = r.body
            return json_answer({"path": r.query["path"][0], "size": len(r.body)}, 201)

        def get(r: Request) -> Answer:
            path = r.query["path"][0]
            if path not in self.stored:
                return error_answer(404, "not_found", f"file '{path}' not found")
            data = self.stored[path]
            return Answer(200, [data[i:i + 1000] for i in range(0, len(data), 1000)],
                          "application/octet-stream")

        self.fake.route("PUT", SB_PATH + "/files", put)
        self.fake.route("GET", SB_PATH + "/files", get)

    def test_write_and_read_every_kind_of_data(self) -> None:
        files = self.sandbox().files
        info = files.write("/home/user/a.txt", "héllo")
        self.assertEqual((info.path, info.size, info.name), ("/home/user/a.txt", 6, "a.txt"))
        self.assertFalse(self.fake.last().chunked)
        self.assertEqual(files.read("/home/user/a.txt"), "héllo")
        files.write("b.bin", PNG, mode=0o600)  # relative: under /home/user
        self.assertEqual(self.fake.last().query["mode"], ["600"])
        self.assertEqual(files.read("/home/user/b.bin", format="bytes"), PNG)
        big = os.urandom(3 << 20)
        files.write("/tmp/big", io.BytesIO(big))
        self.assertTrue(self.fake.last().chunked)  # a file object is streamed, size unknown
        self.assertEqual(self.stored["/tmp/big"], big)
        self.assertEqual(b"".join(files.read("/tmp/big", format="stream")), big)
        files.write("/tmp/t", io.StringIO("text file object"))
        self.assertEqual(self.stored["/tmp/t"], b"text file object")
        with self.assertRaises(airlock.NotFoundError):
            files.read("/nope")

    def test_quota_is_quota_exceeded(self) -> None:
        self.fake.route("PUT", SB_PATH + "/files", error_answer(
            413, "payload_too_large", "file '/home/user/x' passes the workspace quota (512 MiB)"))
        with self.assertRaises(airlock.QuotaExceededError) as cm:
            self.sandbox().files.write("/home/user/x", b"x")
        self.assertIn("workspace quota", str(cm.exception))

    def test_metadata_operations(self) -> None:
        entry = {"name": "a.csv", "type": "file", "size": 12, "mode": 420, "mtime_ms": 1795000000000}
        self.fake.route("GET", SB_PATH + "/files/list", json_answer(
            {"path": "/home/user", "entries": [entry, {"name": "d", "type": "dir", "size": 0,
                                                       "mode": "0755", "mtime_ms": 1}]}))
        exists: dict[str, bool] = {"/home/user/a.csv": True, "/home/user/new.csv": True}

        def stat(r: Request) -> Answer:
            path = r.query["path"][0]
            if not exists.get(path):
                return error_answer(404, "not_found", f"'{path}' not found")
            return json_answer(dict(entry, path=path, name=path.rsplit("/", 1)[1]))

        self.fake.route("GET", SB_PATH + "/files/stat", stat)
        for route in ("mkdir", "remove", "rename"):
            self.fake.route("POST", SB_PATH + "/files/" + route, Answer(204))
        files = self.sandbox().files
        listed = files.list("/home/user")
        self.assertEqual([(e.name, e.type, e.path) for e in listed],
                         [("a.csv", airlock.FileType.FILE, "/home/user/a.csv"),
                          ("d", "dir", "/home/user/d")])
        self.assertEqual((listed[0].mode, listed[1].mode), (0o644, 0o755))
        self.assertTrue(files.exists("/home/user/a.csv"))
        self.assertFalse(files.exists("/home/user/missing"))
        self.assertTrue(files.make_dir("/home/user/out"))
        self.assertEqual(self.fake.last().json(), {"path": "/home/user/out", "parents": True})
        self.assertFalse(files.make_dir("/home/user/a.csv"))
        files.remove("/home/user/out")
        self.assertEqual(self.fake.last().json(), {"path": "/home/user/out", "recursive": True})
        moved = files.rename("/home/user/a.csv", "/home/user/new.csv")
        self.assertEqual(self.fake.last("POST").json(),
                         {"from": "/home/user/a.csv", "to": "/home/user/new.csv"})
        self.assertEqual(moved.path, "/home/user/new.csv")


RECORD = {"id": "tr-1", "direction": "in", "plugin": "http",
          "location": "https://data.example.com/iris.tar.gz?\u2026",
          "sandbox_path": "/home/user/data", "files": 3, "dirs": 1, "links": 0, "bytes": 4096,
          "archive_bytes": 812, "sha256": "ab" * 32, "ms": 41.5, "status": "ok", "error": None}


class TransfersTest(FakeTestCase):
    def test_transfer_in_streams_progress_then_returns_the_record(self) -> None:
        self.fake.route("POST", SB_PATH + "/transfers", ndjson([
            {"type": "progress", "transfer_id": "tr-1", "bytes": 400, "rate_bps": 1600},
            {"type": "progress", "transfer_id": "tr-1", "bytes": 812, "rate_bps": 1700},
            dict(RECORD, type="transfer", new_field=1),
        ]))
        seen: list[airlock.TransferProgress] = []
        record = self.sandbox().transfer_in("https://data.example.com/iris.tar.gz?sig=x",
                                            "data", on_progress=seen.append)
        sent = self.fake.last("POST", SB_PATH + "/transfers")
        self.assertEqual(sent.json(), {"direction": "in",
                                       "source": "https://data.example.com/iris.tar.gz?sig=x",
                                       "path": "/home/user/data"})
        self.assertIn("application/x-ndjson", sent.headers["accept"])
        self.assertEqual([(p.transfer_id, p.bytes, p.rate_bps) for p in seen],
                         [("tr-1", 400, 1600), ("tr-1", 812, 1700)])
        self.assertIsInstance(record, airlock.TransferRecord)
        self.assertEqual((record.id, record.direction, record.plugin, record.sandbox_path),
                         ("tr-1", "in", "http", "/home/user/data"))
        self.assertEqual((record.files, record.dirs, record.bytes, record.archive_bytes),
                         (3, 1, 4096, 812))
        self.assertEqual((record.sha256, record.ms, record.status, record.error),
                         ("ab" * 32, 41.5, "ok", None))
        self.assertTrue(record.ok)
        self.assertNotIn("type", record.raw)
        self.assertEqual(record.raw["new_field"], 1)

    def test_transfer_out_through_frames(self) -> None:
        out = dict(RECORD, direction="out", plugin="hostdir",
                   location="hostdir:results/run-42.tar.gz", sandbox_path="/home/user/results")
        self.fake.route("POST", SB_PATH + "/transfers", frames([
            ("j", {"type": "progress", "transfer_id": "tr-2", "bytes": 10, "rate_bps": 5}),
            ("j", dict(out, type="transfer"))]))
        record = self.sandbox().transfer_out("hostdir:results/run-42.tar.gz",
                                             "/home/user/results")
        self.assertEqual(self.fake.last().json(), {"direction": "out",
                                                   "dest": "hostdir:results/run-42.tar.gz",
                                                   "path": "/home/user/results"})
        self.assertEqual((record.direction, record.location), ("out",
                                                              "hostdir:results/run-42.tar.gz"))

    def test_a_record_that_is_not_ok_raises_with_its_error_text(self) -> None:
        for status, error in (
                ("denied", "URL 'https://evil.example/x.tgz' matches no transfer.http.allow "
                           "pattern"),
                ("error", "entry '../x': a '..' component (it would leave the target)"),
                ("cancelled", None)):
            with self.subTest(status=status):
                self.fake.route("POST", SB_PATH + "/transfers", ndjson([
                    dict(RECORD, type="transfer", status=status, error=error, sha256=None)]))
                with self.assertRaises(airlock.TransferError) as cm:
                    self.sandbox().transfer_in("https://evil.example/x.tgz", "/home/user/x")
                e = cm.exception
                self.assertIsInstance(e, airlock.AirlockError)
                self.assertEqual((e.code, e.transfer.status, e.transfer.sha256),
                                 (status, status, None))
                self.assertIn(f": {status}: ", str(e))
                self.assertIn(error or "no reason given", str(e))
                self.assertIn("https://evil.example/x.tgz", str(e))

    def test_refusals_and_a_cut_stream(self) -> None:
        self.fake.route("POST", SB_PATH + "/transfers", error_answer(
            400, "bad_request", "field 'path': must be an absolute path"))
        with self.assertRaises(airlock.InvalidRequestError) as cm:
            self.sandbox().transfer_in("hostdir:data/x", "/home/user/x")
        self.assertIn("field 'path'", str(cm.exception))
        self.fake.route("POST", SB_PATH + "/transfers", ndjson([
            {"type": "progress", "transfer_id": "tr-1", "bytes": 1, "rate_bps": 1}]))
        with self.assertRaises(airlock.SupervisorUnavailableError) as cm2:
            self.sandbox().transfer_in("hostdir:data/x", "/home/user/x")
        self.assertIn("before the 'transfer' event", str(cm2.exception))
        before = len(self.fake.requests)
        with self.assertRaises(airlock.InvalidRequestError):
            self.sandbox().transfer_out("", "/home/user/x")
        self.assertEqual([r.method for r in self.fake.requests[before:]], ["POST"],
                         "only the create: an empty destination is refused before sending")

    def test_list_and_cancel(self) -> None:
        base = SB_PATH + "/transfers"
        self.fake.route("GET", base, json_answer({"transfers": [
            dict(RECORD, status="running", error=None), dict(RECORD, id="tr-2"), "junk"]}))
        self.fake.route("DELETE", base + "/tr-1", Answer(204))
        self.fake.route("DELETE", base + "/tr-2", error_answer(
            409, "conflict", "transfer 'tr-2' already ended (ok)"))
        sbx = self.sandbox()
        listed = sbx.list_transfers()
        self.assertEqual([(t.id, t.status) for t in listed], [("tr-1", "running"), ("tr-2", "ok")])
        self.assertTrue(sbx.cancel_transfer("tr-1"))
        self.assertEqual(self.fake.last().method, "DELETE")
        self.assertFalse(sbx.cancel_transfer("tr-2"))
        self.assertFalse(sbx.cancel_transfer("tr-9"), "unknown: the fake answers 404")
        self.assertEqual(self.fake.last().path, base + "/tr-9")

    def test_upload_archive_bytes_and_file_object(self) -> None:
        received: list[bytes] = []

        def put(r: Request) -> Answer:
            received.append(r.body)
            return json_answer(dict(RECORD, id=None, plugin="upload", location="request body",
                                    sandbox_path=r.query["path"][0],
                                    archive_bytes=len(r.body)), 201)

        self.fake.route("PUT", SB_PATH + "/archive", put)
        sbx = self.sandbox()
        record = sbx.upload_archive("repo", b"\x1f\x8b tar.gz bytes")
        sent = self.fake.last("PUT")
        self.assertEqual(sent.query, {"path": ["/home/user/repo"]})
        self.assertEqual(sent.headers["content-type"], "application/octet-stream")
        self.assertFalse(sent.chunked)
        self.assertEqual((record.plugin, record.sandbox_path, record.archive_bytes),
                         ("upload", "/home/user/repo", 15))
        big = os.urandom(3 << 20)
        sbx.upload_archive("/tmp/big", io.BytesIO(big))
        self.assertTrue(self.fake.last("PUT").chunked)
        self.assertEqual(received[-1], big)
        with self.assertRaises(airlock.InvalidRequestError):
            sbx.upload_archive("/tmp/x", "a str is not an archive")  # type: ignore[arg-type]

    def test_upload_archive_refused_maps_to_the_error_type(self) -> None:
        self.fake.route("PUT", SB_PATH + "/archive", error_answer(
            400, "bad_request", "archive into /home/user/x: entry 'lnk': a symlink to "
                                "'/etc/passwd', outside the target"))
        with self.assertRaises(airlock.InvalidRequestError) as cm:
            self.sandbox().upload_archive("/home/user/x", b"tar")
        self.assertIn("outside the target", str(cm.exception))
        self.fake.route("PUT", SB_PATH + "/archive", error_answer(
            403, "forbidden", "profile 'default': transfer.plugins does not list 'archive'"))
        with self.assertRaises(airlock.ForbiddenError):
            self.sandbox().upload_archive("/home/user/x", b"tar")

    def test_download_archive_as_bytes_or_into_a_file(self) -> None:
        data = os.urandom(2500)

        def get(r: Request) -> Answer:
            return Answer(200, [data[i:i + 1000] for i in range(0, len(data), 1000)],
                          "application/octet-stream")

        self.fake.route("GET", SB_PATH + "/archive", get)
        sbx = self.sandbox()
        self.assertEqual(sbx.download_archive("/home/user/results"), data)
        self.assertEqual(self.fake.last().query, {"path": ["/home/user/results"],
                                                  "format": ["tar.gz"]})
        sink = io.BytesIO()
        self.assertEqual(sbx.download_archive("out", format="zip", file=sink), len(data))
        self.assertEqual(sink.getvalue(), data)
        self.assertEqual(self.fake.last().query, {"path": ["/home/user/out"], "format": ["zip"]})
        before = len(self.fake.requests)
        with self.assertRaises(airlock.InvalidRequestError) as cm:
            sbx.download_archive("/home/user/out", format="rar")
        self.assertIn("tar.zst", str(cm.exception))
        self.assertEqual(len(self.fake.requests), before, "refused before sending")


if __name__ == "__main__":
    unittest.main()
