"""Code runs in stateful contexts: `POST /v1/sandboxes/{sb}/code` streamed as events, and the
context routes. `Sandbox.run_code` and the `*_code_context` methods call in here (`CodeRunner`),
`AsyncSandbox`'s in `AsyncCodeRunner`; both fold the events with `ExecutionFolder`."""

from __future__ import annotations

import datetime
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from airlock.errors import InvalidRequestError, TimeoutError, stream_ended_early
from airlock.models import (
    AuditSummary,
    Context,
    Execution,
    ExecutionError,
    OutputMessage,
    Result,
    event_bytes,
)
from airlock.transport import AsyncTransport, Transport, quote

# A callback may be a plain function or (with AsyncSandbox) a coroutine function.
OutputHandler = Callable[[OutputMessage], Any]
ResultHandler = Callable[[Result], Any]
ErrorHandler = Callable[[ExecutionError], Any]
Call = tuple[Callable[[Any], Any], Any]


class ExecutionFolder:
    """Folds a code run's events into an Execution. `feed` returns the callbacks to make for
    the event, so the blocking runner calls them and the asyncio one awaits them."""

    def __init__(self, on_stdout: OutputHandler | None, on_stderr: OutputHandler | None,
                 on_result: ResultHandler | None, on_error: ErrorHandler | None) -> None:
        self.execution = Execution()
        self._on_stdout, self._on_stderr = on_stdout, on_stderr
        self._on_result, self._on_error = on_result, on_error

    def feed(self, event: dict[str, Any]) -> list[Call]:
        execution = self.execution
        kind = event.get("type")
        if kind in ("stdout", "stderr"):
            text = event_bytes(event).decode("utf-8", "replace")
            is_err = kind == "stderr"
            (execution.logs.stderr if is_err else execution.logs.stdout).append(text)
            handler = self._on_stderr if is_err else self._on_stdout
            if handler is not None:
                return [(handler, OutputMessage(text, is_err, _now()))]
        elif kind in ("result", "display"):
            data = event.get("data")
            result = Result.from_bundle(data if isinstance(data, dict) else {},
                                        is_main_result=kind == "result")
            execution.results.append(result)
            if self._on_result is not None:
                return [(self._on_result, result)]
        elif kind == "error":
            execution.error = ExecutionError.from_event(event)
            if self._on_error is not None:
                return [(self._on_error, execution.error)]
        elif kind == "end":
            _apply_end(execution, event)
        elif kind == "supervisor_restart":
            # A run taken over from a supervisor that died (Sandbox.recovered_run).
            execution.restart = event
        return []

    def finish(self, timeout: float | None) -> list[Call]:
        """After the stream: raises for a cut stream or a timeout; the callbacks still due."""
        execution = self.execution
        if not execution.status:
            raise stream_ended_early("code run", "end")
        if execution.status == "timeout":
            raise TimeoutError(
                f"code run timed out after {timeout:g} s and was interrupted" if timeout
                else "code run hit the profile's timeout and was interrupted",
                execution=execution)
        if execution.status == "context_lost" and execution.error is None:
            execution.error = ExecutionError(
                name="ContextLost",
                value=f"the interpreter of context '{execution.context_id}' died during the run "
                      "(killed, out of memory, or it exited); the next run starts a fresh one",
                traceback="")
            if self._on_error is not None:
                return [(self._on_error, execution.error)]
        return []


def run_body(code: str, language: str | None, context: Context | str | None,
             timeout: float | None, envs: Mapping[str, str] | None) -> dict[str, Any]:
    """The body of `POST .../code`. `envs` become the run's `env`: set for this run only."""
    if not isinstance(code, str):
        raise InvalidRequestError(f"run_code: code must be a str, not {type(code).__name__}")
    body: dict[str, Any] = {"code": code, "stream": True}
    if language is not None:
        body["language"] = language
    if context is not None:
        body["context_id"] = context.id if isinstance(context, Context) else context
    if timeout is not None:
        body["timeout_s"] = timeout
    if envs:
        body["env"] = string_map(envs, "envs")
    return body


def context_body(language: str, cwd: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"language": language}
    if cwd is not None:
        if not isinstance(cwd, str) or not cwd.startswith("/"):
            raise InvalidRequestError(f"code context cwd must be an absolute path, got {cwd!r}")
        body["cwd"] = cwd
    return body


def string_map(values: Mapping[str, str], what: str) -> dict[str, str]:
    """Environment variables as the API takes them: str to str, refused otherwise (the server
    would answer 400 without saying which one)."""
    out: dict[str, str] = {}
    for key, value in values.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidRequestError(
                f"{what}: names and values must be str, got {key!r}: {value!r}")
        out[key] = value
    return out


def _context_id(context: Context | str) -> str:
    return context.id if isinstance(context, Context) else context


class CodeRunner:
    def __init__(self, transport: Transport, sandbox_id: str) -> None:
        self._transport = transport
        self._base = f"/v1/sandboxes/{quote(sandbox_id)}"

    def run(self, code: str, language: str | None = None, context: Context | str | None = None,
            on_stdout: OutputHandler | None = None, on_stderr: OutputHandler | None = None,
            on_result: ResultHandler | None = None, on_error: ErrorHandler | None = None,
            timeout: float | None = None, envs: Mapping[str, str] | None = None) -> Execution:
        body = run_body(code, language, context, timeout, envs)
        folder = ExecutionFolder(on_stdout, on_stderr, on_result, on_error)
        # No socket timeout: the supervisor ends the run at its timeout and reports it, and a run
        # held for an operator's review waits for the decision before anything is answered.
        with self._transport.stream("POST", self._base + "/code", body) as r:
            for event in r.events():
                for fn, arg in folder.feed(event):
                    fn(arg)
        for fn, arg in folder.finish(timeout):
            fn(arg)
        return folder.execution

    def create_context(self, language: str = "python", cwd: str | None = None) -> Context:
        return Context.from_json(self._transport.json("POST", self._base + "/contexts",
                                                      context_body(language, cwd)))

    def list_contexts(self) -> list[Context]:
        answer = self._transport.json("GET", self._base + "/contexts")
        return [Context.from_json(c) for c in answer.get("contexts", []) if isinstance(c, dict)]

    def restart_context(self, context: Context | str) -> Context:
        return Context.from_json(self._transport.json(
            "POST", f"{self._base}/contexts/{quote(_context_id(context))}/restart"))

    def remove_context(self, context: Context | str) -> None:
        self._transport.json("DELETE", f"{self._base}/contexts/{quote(_context_id(context))}")

    def recovered_run(self, context: Context | str, run: str = "last",
                      on_stdout: OutputHandler | None = None,
                      on_stderr: OutputHandler | None = None,
                      on_result: ResultHandler | None = None,
                      on_error: ErrorHandler | None = None) -> Execution:
        folder = ExecutionFolder(on_stdout, on_stderr, on_result, on_error)
        with self._transport.stream("GET", _run_events_path(self._base, context, run)) as r:
            for event in r.events():
                for fn, arg in folder.feed(event):
                    fn(arg)
        for fn, arg in folder.finish(None):
            fn(arg)
        return folder.execution


class AsyncCodeRunner:
    """CodeRunner for asyncio: callbacks may be coroutine functions (they are awaited)."""

    def __init__(self, transport: AsyncTransport, sandbox_id: str) -> None:
        self._transport = transport
        self._base = f"/v1/sandboxes/{quote(sandbox_id)}"

    async def run(self, code: str, language: str | None = None,
                  context: Context | str | None = None, on_stdout: OutputHandler | None = None,
                  on_stderr: OutputHandler | None = None, on_result: ResultHandler | None = None,
                  on_error: ErrorHandler | None = None, timeout: float | None = None,
                  envs: Mapping[str, str] | None = None) -> Execution:
        body = run_body(code, language, context, timeout, envs)
        folder = ExecutionFolder(on_stdout, on_stderr, on_result, on_error)
        r = await self._transport.stream("POST", self._base + "/code", body)
        async with r:
            async for event in r.events():
                for fn, arg in folder.feed(event):
                    await call(fn, arg)
        for fn, arg in folder.finish(timeout):
            await call(fn, arg)
        return folder.execution

    async def create_context(self, language: str = "python", cwd: str | None = None) -> Context:
        return Context.from_json(await self._transport.json("POST", self._base + "/contexts",
                                                            context_body(language, cwd)))

    async def list_contexts(self) -> list[Context]:
        answer = await self._transport.json("GET", self._base + "/contexts")
        return [Context.from_json(c) for c in answer.get("contexts", []) if isinstance(c, dict)]

    async def restart_context(self, context: Context | str) -> Context:
        return Context.from_json(await self._transport.json(
            "POST", f"{self._base}/contexts/{quote(_context_id(context))}/restart"))

    async def remove_context(self, context: Context | str) -> None:
        await self._transport.json("DELETE",
                                   f"{self._base}/contexts/{quote(_context_id(context))}")

    async def recovered_run(self, context: Context | str, run: str = "last",
                            on_stdout: OutputHandler | None = None,
                            on_stderr: OutputHandler | None = None,
                            on_result: ResultHandler | None = None,
                            on_error: ErrorHandler | None = None) -> Execution:
        folder = ExecutionFolder(on_stdout, on_stderr, on_result, on_error)
        r = await self._transport.stream("GET", _run_events_path(self._base, context, run))
        async with r:
            async for event in r.events():
                for fn, arg in folder.feed(event):
                    await call(fn, arg)
        for fn, arg in folder.finish(None):
            await call(fn, arg)
        return folder.execution


def _run_events_path(base: str, context: Context | str, run: str) -> str:
    if not isinstance(run, str) or not run:
        raise InvalidRequestError("recovered_run: run must be a run id ('r3') or 'last'")
    return f"{base}/contexts/{quote(_context_id(context))}/runs/{quote(run)}/events"


async def call(fn: Callable[[Any], Any], arg: Any) -> None:
    """Calls a callback, awaiting it when it is a coroutine function (or returns an awaitable)."""
    outcome = fn(arg)
    if inspect.isawaitable(outcome):
        await outcome


def _apply_end(execution: Execution, event: dict[str, Any]) -> None:
    status = event.get("status")
    execution.status = status if isinstance(status, str) and status else "unknown"
    duration = event.get("duration_ms")
    count = event.get("execution_count")
    execution.execution_count = count if isinstance(count, int) and not isinstance(count, bool) else None
    execution.duration_ms = float(duration) if isinstance(duration, (int, float)) else None
    cid = event.get("context_id")
    execution.context_id = cid if isinstance(cid, str) else None
    execution.context_restarted = event.get("context_restarted") is True
    review = event.get("review")
    execution.review = review if isinstance(review, dict) else None
    execution.audit = AuditSummary.from_json(event.get("audit"))
    execution.raw_end = event


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)
