"""Processes in a sandbox: `sbx.commands`. Foreground runs stream their output as NDJSON events;
background runs answer at once with a `CommandHandle` that attaches to the command's events
(buffered output first, then live) to wait for it."""

from __future__ import annotations

import asyncio
import base64
import builtins
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, overload

from airlock.errors import (
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    TimeoutError,
    stream_ended_early,
)
from airlock.code import call, string_map
from airlock.models import AuditSummary, CommandInfo, CommandResult, event_bytes
from airlock.transport import AsyncTransport, Transport, quote

OutputCallback = Callable[[str], Any]


class _Collector:
    """Folds one command's events into a CommandResult, calling the output callbacks as the
    chunks arrive."""

    def __init__(self, command_id: str, pid: int | None, on_stdout: OutputCallback | None,
                 on_stderr: OutputCallback | None) -> None:
        self.command_id = command_id
        self.pid = pid
        self._on_stdout = on_stdout
        self._on_stderr = on_stderr
        self._stdout: list[bytes] = []
        self._stderr: list[bytes] = []
        self._errors: list[str] = []
        self.exit: dict[str, Any] | None = None

    def feed(self, event: dict[str, Any]) -> list[tuple[OutputCallback, str]]:
        """Takes one event; returns the output callbacks to make for it (called by the blocking
        client, awaited by the asyncio one)."""
        kind = event.get("type")
        if kind == "start":
            cid, pid = event.get("command_id"), event.get("pid")
            self.command_id = cid if isinstance(cid, str) else self.command_id
            self.pid = pid if isinstance(pid, int) else self.pid
        elif kind in ("stdout", "stderr"):
            data = event_bytes(event)
            (self._stdout if kind == "stdout" else self._stderr).append(data)
            handler = self._on_stdout if kind == "stdout" else self._on_stderr
            if handler is not None:
                return [(handler, data.decode("utf-8", "replace"))]
        elif kind == "error":
            message = event.get("message")
            if isinstance(message, str):
                self._errors.append(message)
        elif kind == "exit":
            self.exit = event
        return []

    def feed_and_call(self, event: dict[str, Any]) -> None:
        for fn, arg in self.feed(event):
            fn(arg)

    def result(self, what: str, timeout: float | None) -> CommandResult:
        if self.exit is None:
            raise stream_ended_early(what, "exit")
        e = self.exit
        error = e.get("error") if isinstance(e.get("error"), str) else None
        if error is None and self._errors:
            error = "; ".join(self._errors)
        exit_code, sig, duration = e.get("exit_code"), e.get("signal"), e.get("duration_ms")
        review = e.get("review")
        result = CommandResult(
            exit_code=exit_code if isinstance(exit_code, int) else None,
            stdout=b"".join(self._stdout).decode("utf-8", "replace"),
            stderr=b"".join(self._stderr).decode("utf-8", "replace"),
            command_id=self.command_id, pid=self.pid,
            signal=sig if isinstance(sig, int) and sig != 0 else None,
            timed_out=e.get("timed_out") is True, error=error,
            stdout_truncated=e.get("stdout_truncated") is True,
            stderr_truncated=e.get("stderr_truncated") is True,
            duration_ms=float(duration) if isinstance(duration, (int, float)) else None,
            review=review if isinstance(review, dict) else None,
            audit=AuditSummary.from_json(e.get("audit")), raw_exit=e)
        if result.timed_out:
            limit = f"after {timeout:g} s" if timeout else "(the profile's timeout)"
            raise TimeoutError(f"{what}: timed out {limit} and was killed", result=result)
        return result


class CommandHandle:
    """A command running in the background. `wait()` attaches to its events and returns the
    CommandResult; `kill()`, `send_stdin()` and `signal()` act on it meanwhile. With output
    callbacks given, a reader thread attaches at once so they are called live."""

    def __init__(self, commands: Commands, command_id: str, pid: int | None,
                 on_stdout: OutputCallback | None = None, on_stderr: OutputCallback | None = None,
                 timeout: float | None = None) -> None:
        self._commands = commands
        self.id = command_id
        self.pid = pid
        self._timeout = timeout
        self._on_stdout = on_stdout
        self._on_stderr = on_stderr
        self._reader: threading.Thread | None = None
        self._outcome: CommandResult | BaseException | None = None
        self._lock = threading.Lock()
        if on_stdout is not None or on_stderr is not None:
            self._reader = threading.Thread(target=self._read_in_background,
                                            name=f"airlock-command-{command_id}", daemon=True)
            self._reader.start()

    @property
    def command_id(self) -> str:
        return self.id

    def wait(self, on_stdout: OutputCallback | None = None,
             on_stderr: OutputCallback | None = None) -> CommandResult:
        """Blocks until the command exits. Raises `TimeoutError` (with `.result`) when its timeout
        killed it; a non-zero exit is returned, not raised."""
        if self._reader is not None:
            self._reader.join()
        with self._lock:
            if self._outcome is None:
                self._outcome = self._attach(on_stdout or self._on_stdout,
                                             on_stderr or self._on_stderr)
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome

    def kill(self) -> bool:
        """SIGKILL to all its processes. False when the command has already exited."""
        return self._commands.kill(self.id)

    def send_stdin(self, data: str | bytes, eof: bool = False) -> None:
        self._commands.send_stdin(self.id, data, eof=eof)

    def close_stdin(self) -> None:
        self._commands.send_stdin(self.id, b"", eof=True)

    def signal(self, signal: str | int) -> None:
        """Sends a signal by name ("SIGTERM") or number."""
        self._commands.signal(self.id, signal)

    def _attach(self, on_stdout: OutputCallback | None,
                on_stderr: OutputCallback | None) -> CommandResult | BaseException:
        collector = _Collector(self.id, self.pid, on_stdout, on_stderr)
        try:
            with self._commands._transport.stream("GET", self._commands._path(self.id, "/events")) as r:
                for event in r.events():
                    collector.feed_and_call(event)
            return collector.result(f"command {self.id}", self._timeout)
        except Exception as e:  # kept, and raised by wait() in the caller's thread
            return e

    def _read_in_background(self) -> None:
        outcome = self._attach(self._on_stdout, self._on_stderr)
        with self._lock:
            self._outcome = outcome

    def __repr__(self) -> str:
        return f"CommandHandle(id={self.id!r}, pid={self.pid!r})"


class Commands:
    """`sbx.commands`: run processes, list them, attach to them."""

    def __init__(self, transport: Transport, sandbox_id: str) -> None:
        self._transport = transport
        self._base = f"/v1/sandboxes/{quote(sandbox_id)}/commands"

    @overload
    def run(self, cmd: str | Sequence[str], background: Literal[False] = False,
            envs: Mapping[str, str] | None = None, cwd: str | None = None,
            stdin: str | bytes | None = None, on_stdout: OutputCallback | None = None,
            on_stderr: OutputCallback | None = None,
            timeout: float | None = None) -> CommandResult: ...

    @overload
    def run(self, cmd: str | Sequence[str], background: Literal[True],
            envs: Mapping[str, str] | None = None, cwd: str | None = None,
            stdin: str | bytes | None = None, on_stdout: OutputCallback | None = None,
            on_stderr: OutputCallback | None = None,
            timeout: float | None = None) -> CommandHandle: ...

    @overload
    def run(self, cmd: str | Sequence[str], background: bool,
            envs: Mapping[str, str] | None = None, cwd: str | None = None,
            stdin: str | bytes | None = None, on_stdout: OutputCallback | None = None,
            on_stderr: OutputCallback | None = None,
            timeout: float | None = None) -> CommandResult | CommandHandle: ...

    def run(self, cmd: str | Sequence[str], background: bool = False,
            envs: Mapping[str, str] | None = None, cwd: str | None = None,
            stdin: str | bytes | None = None, on_stdout: OutputCallback | None = None,
            on_stderr: OutputCallback | None = None,
            timeout: float | None = None) -> CommandResult | CommandHandle:
        """Runs `cmd` (a string for `/bin/sh -c`) or an argv list (argv[0] looked up on PATH).

        Foreground: waits and returns a CommandResult, calling `on_stdout`/`on_stderr` with each
        chunk as it arrives; a non-zero exit is returned, a timeout raises `TimeoutError`.
        `background=True` returns a CommandHandle at once; its stdin stays open for
        `send_stdin`."""
        if background:
            return self.run_background(cmd, envs=envs, cwd=cwd, stdin=stdin, on_stdout=on_stdout,
                                       on_stderr=on_stderr, timeout=timeout)
        body = self._body(cmd, envs, cwd, stdin, timeout)
        collector = _Collector("", None, on_stdout, on_stderr)
        # No socket timeout, as for code runs: the supervisor enforces the command's timeout.
        with self._transport.stream("POST", self._base, body) as r:
            for event in r.events():
                collector.feed_and_call(event)
        return collector.result(f"command {_describe(cmd)}", timeout)

    def run_background(self, cmd: str | Sequence[str], envs: Mapping[str, str] | None = None,
                       cwd: str | None = None, stdin: str | bytes | None = None,
                       on_stdout: OutputCallback | None = None,
                       on_stderr: OutputCallback | None = None,
                       timeout: float | None = None) -> CommandHandle:
        body = self._body(cmd, envs, cwd, stdin, timeout)
        body["background"] = True
        answer = self._transport.json("POST", self._base, body)
        pid = answer.get("pid")
        return CommandHandle(self, str(answer.get("command_id", "")),
                             pid if isinstance(pid, int) else None, on_stdout, on_stderr, timeout)

    def list(self) -> builtins.list[CommandInfo]:
        answer = self._transport.json("GET", self._base)
        return [CommandInfo.from_json(c) for c in answer.get("commands", []) if isinstance(c, dict)]

    def connect(self, command_id: str, on_stdout: OutputCallback | None = None,
                on_stderr: OutputCallback | None = None) -> CommandHandle:
        """A handle on a command started earlier (by any client): `wait()` replays its buffered
        output, then follows it live. Raises NotFoundError for an unknown id."""
        for info in self.list():
            if info.command_id == command_id:
                return CommandHandle(self, command_id, info.pid, on_stdout, on_stderr)
        raise NotFoundError(f"command '{command_id}' not found in this sandbox", status=404,
                            code="not_found")

    def kill(self, command_id: str) -> bool:
        """SIGKILL to all the command's processes. False when it has already exited (409) or is
        unknown (404)."""
        try:
            self._transport.json("DELETE", self._path(command_id))
            return True
        except (NotFoundError, ConflictError):
            return False

    def send_stdin(self, command_id: str, data: str | bytes, eof: bool = False) -> None:
        body: dict[str, Any] = {"eof": eof}
        if isinstance(data, str):
            body["data"] = data
        else:
            body["data_base64"] = base64.b64encode(data).decode("ascii")
        self._transport.json("POST", self._path(command_id, "/stdin"), body)

    def signal(self, command_id: str, signal: str | int) -> None:
        self._transport.json("POST", self._path(command_id, "/signal"), {"signal": signal})

    def _path(self, command_id: str, suffix: str = "") -> str:
        return f"{self._base}/{quote(command_id)}{suffix}"

    @staticmethod
    def _body(cmd: str | Sequence[str], envs: Mapping[str, str] | None, cwd: str | None,
              stdin: str | bytes | None, timeout: float | None) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if isinstance(cmd, str):
            body["cmd"] = cmd
        else:
            argv = list(cmd)
            if not argv or not all(isinstance(a, str) for a in argv):
                raise InvalidRequestError(f"commands.run: argv must be a non-empty list of str, got {cmd!r}")
            body["argv"] = argv
        if envs:
            body["env"] = string_map(envs, "commands.run envs")
        if cwd is not None:
            body["cwd"] = cwd
        if isinstance(stdin, str):
            body["stdin"] = stdin
        elif stdin is not None:
            body["stdin_base64"] = base64.b64encode(stdin).decode("ascii")
        if timeout is not None:
            body["timeout_s"] = timeout
        return body


def _describe(cmd: str | Sequence[str]) -> str:
    text = cmd if isinstance(cmd, str) else " ".join(cmd)
    return repr(text if len(text) <= 60 else text[:57] + "...")


class AsyncCommandHandle:
    """CommandHandle for asyncio: `await handle.wait()`, `await handle.kill()`. With output
    callbacks given (plain or coroutine functions), a task attaches at once so they are called
    live."""

    def __init__(self, commands: AsyncCommands, command_id: str, pid: int | None,
                 on_stdout: OutputCallback | None = None, on_stderr: OutputCallback | None = None,
                 timeout: float | None = None) -> None:
        self._commands = commands
        self.id = command_id
        self.pid = pid
        self._timeout = timeout
        self._on_stdout = on_stdout
        self._on_stderr = on_stderr
        self._reader: asyncio.Task[CommandResult] | None = None
        if on_stdout is not None or on_stderr is not None:
            self._reader = asyncio.ensure_future(self._attach(on_stdout, on_stderr))

    @property
    def command_id(self) -> str:
        return self.id

    async def wait(self, on_stdout: OutputCallback | None = None,
                   on_stderr: OutputCallback | None = None) -> CommandResult:
        if self._reader is None:
            self._reader = asyncio.ensure_future(self._attach(on_stdout or self._on_stdout,
                                                              on_stderr or self._on_stderr))
        return await asyncio.shield(self._reader)

    async def kill(self) -> bool:
        return await self._commands.kill(self.id)

    async def send_stdin(self, data: str | bytes, eof: bool = False) -> None:
        await self._commands.send_stdin(self.id, data, eof=eof)

    async def close_stdin(self) -> None:
        await self._commands.send_stdin(self.id, b"", eof=True)

    async def signal(self, signal: str | int) -> None:
        await self._commands.signal(self.id, signal)

    async def _attach(self, on_stdout: OutputCallback | None,
                      on_stderr: OutputCallback | None) -> CommandResult:
        collector = _Collector(self.id, self.pid, on_stdout, on_stderr)
        r = await self._commands._transport.stream("GET", self._commands._path(self.id, "/events"))
        async with r:
            async for event in r.events():
                for fn, arg in collector.feed(event):
                    await call(fn, arg)
        return collector.result(f"command {self.id}", self._timeout)

    def __repr__(self) -> str:
        return f"AsyncCommandHandle(id={self.id!r}, pid={self.pid!r})"


class AsyncCommands:
    """`sbx.commands` of an AsyncSandbox: the calls of `Commands`, awaited."""

    def __init__(self, transport: AsyncTransport, sandbox_id: str) -> None:
        self._transport = transport
        self._base = f"/v1/sandboxes/{quote(sandbox_id)}/commands"

    async def run(self, cmd: str | Sequence[str], background: bool = False,
                  envs: Mapping[str, str] | None = None, cwd: str | None = None,
                  stdin: str | bytes | None = None, on_stdout: OutputCallback | None = None,
                  on_stderr: OutputCallback | None = None,
                  timeout: float | None = None) -> CommandResult | AsyncCommandHandle:
        """As `Commands.run`; callbacks may be coroutine functions."""
        body = Commands._body(cmd, envs, cwd, stdin, timeout)
        if background:
            body["background"] = True
            answer = await self._transport.json("POST", self._base, body)
            pid = answer.get("pid")
            return AsyncCommandHandle(self, str(answer.get("command_id", "")),
                                      pid if isinstance(pid, int) else None, on_stdout,
                                      on_stderr, timeout)
        collector = _Collector("", None, on_stdout, on_stderr)
        r = await self._transport.stream("POST", self._base, body)
        async with r:
            async for event in r.events():
                for fn, arg in collector.feed(event):
                    await call(fn, arg)
        return collector.result(f"command {_describe(cmd)}", timeout)

    async def list(self) -> builtins.list[CommandInfo]:
        answer = await self._transport.json("GET", self._base)
        return [CommandInfo.from_json(c) for c in answer.get("commands", []) if isinstance(c, dict)]

    async def connect(self, command_id: str, on_stdout: OutputCallback | None = None,
                      on_stderr: OutputCallback | None = None) -> AsyncCommandHandle:
        for info in await self.list():
            if info.command_id == command_id:
                return AsyncCommandHandle(self, command_id, info.pid, on_stdout, on_stderr)
        raise NotFoundError(f"command '{command_id}' not found in this sandbox", status=404,
                            code="not_found")

    async def kill(self, command_id: str) -> bool:
        try:
            await self._transport.json("DELETE", self._path(command_id))
            return True
        except (NotFoundError, ConflictError):
            return False

    async def send_stdin(self, command_id: str, data: str | bytes, eof: bool = False) -> None:
        body: dict[str, Any] = {"eof": eof}
        if isinstance(data, str):
            body["data"] = data
        else:
            body["data_base64"] = base64.b64encode(data).decode("ascii")
        await self._transport.json("POST", self._path(command_id, "/stdin"), body)

    async def signal(self, command_id: str, signal: str | int) -> None:
        await self._transport.json("POST", self._path(command_id, "/signal"), {"signal": signal})

    def _path(self, command_id: str, suffix: str = "") -> str:
        return f"{self._base}/{quote(command_id)}{suffix}"
