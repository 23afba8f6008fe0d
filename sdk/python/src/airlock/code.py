"""Code runs in stateful contexts: `POST /v1/sandboxes/{sb}/code` streamed as NDJSON events, and
the context routes. `Sandbox.run_code` and the `*_code_context` methods call in here."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from airlock.errors import TimeoutError, stream_ended_early
from airlock.models import (
    AuditSummary,
    Context,
    Execution,
    ExecutionError,
    OutputMessage,
    Result,
    event_bytes,
)
from airlock.transport import Transport, quote

OutputHandler = Callable[[OutputMessage], Any]
ResultHandler = Callable[[Result], Any]
ErrorHandler = Callable[[ExecutionError], Any]


class CodeRunner:
    def __init__(self, transport: Transport, sandbox_id: str) -> None:
        self._transport = transport
        self._base = f"/v1/sandboxes/{quote(sandbox_id)}"

    def run(self, code: str, language: str | None = None, context: Context | str | None = None,
            on_stdout: OutputHandler | None = None, on_stderr: OutputHandler | None = None,
            on_result: ResultHandler | None = None, on_error: ErrorHandler | None = None,
            timeout: float | None = None) -> Execution:
        body: dict[str, Any] = {"code": code, "stream": True}
        if language is not None:
            body["language"] = language
        if context is not None:
            body["context_id"] = context.id if isinstance(context, Context) else context
        if timeout is not None:
            body["timeout_s"] = timeout
        execution = Execution()
        # No socket timeout: the supervisor ends the run at its timeout and reports it, and a run
        # held for an operator's review waits for the decision before anything is answered.
        with self._transport.stream("POST", self._base + "/code", body) as r:
            for event in r.events():
                kind = event.get("type")
                if kind in ("stdout", "stderr"):
                    text = event_bytes(event).decode("utf-8", "replace")
                    is_err = kind == "stderr"
                    (execution.logs.stderr if is_err else execution.logs.stdout).append(text)
                    handler = on_stderr if is_err else on_stdout
                    if handler is not None:
                        handler(OutputMessage(text, is_err, _now()))
                elif kind in ("result", "display"):
                    data = event.get("data")
                    result = Result.from_bundle(data if isinstance(data, dict) else {},
                                                is_main_result=kind == "result")
                    execution.results.append(result)
                    if on_result is not None:
                        on_result(result)
                elif kind == "error":
                    execution.error = ExecutionError.from_event(event)
                    if on_error is not None:
                        on_error(execution.error)
                elif kind == "end":
                    _apply_end(execution, event)
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
            if on_error is not None:
                on_error(execution.error)
        return execution

    def create_context(self, language: str = "python") -> Context:
        return Context.from_json(self._transport.json("POST", self._base + "/contexts",
                                                      {"language": language}))

    def list_contexts(self) -> list[Context]:
        answer = self._transport.json("GET", self._base + "/contexts")
        return [Context.from_json(c) for c in answer.get("contexts", []) if isinstance(c, dict)]

    def restart_context(self, context: Context | str) -> Context:
        cid = context.id if isinstance(context, Context) else context
        return Context.from_json(self._transport.json(
            "POST", f"{self._base}/contexts/{quote(cid)}/restart"))

    def remove_context(self, context: Context | str) -> None:
        cid = context.id if isinstance(context, Context) else context
        self._transport.json("DELETE", f"{self._base}/contexts/{quote(cid)}")


def _apply_end(execution: Execution, event: dict[str, Any]) -> None:
    status = event.get("status")
    execution.status = status if isinstance(status, str) and status else "unknown"
    duration = event.get("duration_ms")
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
