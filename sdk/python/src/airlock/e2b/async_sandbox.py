"""`airlock.e2b.AsyncSandbox`: E2B code interpreter's `AsyncSandbox`, on the native
`airlock.AsyncSandbox`. The same mapping as `airlock.e2b.Sandbox`, awaited; callbacks may be
coroutine functions."""

from __future__ import annotations

import asyncio
import builtins
import datetime
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

import airlock
from airlock.code import call
from airlock.e2b import options as opt
from airlock.e2b.common import (
    WATCH_INTERVAL_S,
    changes,
    check_language_and_context,
    command_id_of,
    command_result,
    e2b_execution,
    output_callback,
    process_info,
    result_callback,
    snapshot,
)
from airlock.e2b.exceptions import InvalidArgumentException, NotFoundException, translated
from airlock.e2b.models import (
    CommandResult,
    FilesystemEvent,
    OutputMessage,
    ProcessInfo,
    SandboxInfo,
    SandboxMetrics,
    WriteEntry,
)
from airlock.models import Context, EntryInfo, Execution, ExecutionError, Result, WriteInfo


class _ClassOrInstance:
    """E2B's AsyncSandbox methods that are awaited on an instance (`await sbx.kill()`) or on the
    class with a sandbox id (`await AsyncSandbox.kill(sandbox_id)`); the class form connects,
    calls, and lets go of the connection it made."""

    def __init__(self, method: Callable[..., Awaitable[Any]]) -> None:
        self._method = method
        functools.update_wrapper(self, method)  # type: ignore[arg-type]

    def __get__(self, obj: Any, cls: type) -> Callable[..., Awaitable[Any]]:
        if obj is not None:
            return functools.partial(self._method, obj)

        async def on_class(sandbox_id: str, *args: Any, api_key: str | None = None,
                           domain: str | None = None, request_timeout: float | None = None,
                           url: str | None = None, **kwargs: Any) -> Any:
            try:
                sbx = await cls.connect(sandbox_id, api_key=api_key, domain=domain,
                                        request_timeout=request_timeout, url=url)
            except NotFoundException:
                if self._method.__name__ == "kill":
                    return False
                raise
            try:
                return await self._method(sbx, *args, **kwargs)
            finally:
                await sbx.close()

        return on_class


class AsyncSandbox:
    """An airlock sandbox with E2B's AsyncSandbox API: `await AsyncSandbox.create(...)`,
    `async with` kills it at the end of the block."""

    def __init__(self, native: airlock.AsyncSandbox) -> None:
        """Use `await AsyncSandbox.create()` or `await AsyncSandbox.connect()`."""
        self._native = native
        self.commands = AsyncCommands(native)
        self.files = AsyncFilesystem(native)

    @classmethod
    async def create(cls, template: str | None = None, timeout: float | None = None,
                     metadata: Mapping[str, str] | None = None,
                     envs: Mapping[str, str] | None = None, api_key: str | None = None,
                     domain: str | None = None, request_timeout: float | None = None, *,
                     url: str | None = None, **options: Any) -> AsyncSandbox:
        opt.check_options(options, "AsyncSandbox.create")
        url, token = opt.supervisor_address(api_key, domain, url)
        seconds = opt.sandbox_seconds(timeout)
        with translated():
            native = await airlock.AsyncSandbox.create(
                profile=template, envs=envs, metadata=metadata, keep_alive=seconds,
                lifetime=seconds, url=url, token=token, request_timeout=request_timeout)
        return cls(native)

    @classmethod
    async def connect(cls, sandbox_id: str, timeout: float | None = None,
                      api_key: str | None = None, domain: str | None = None,
                      request_timeout: float | None = None, *, url: str | None = None,
                      **options: Any) -> AsyncSandbox:
        opt.check_options(options, "AsyncSandbox.connect")
        url, token = opt.supervisor_address(api_key, domain, url)
        with translated():
            native = await airlock.AsyncSandbox.connect(sandbox_id, url=url, token=token,
                                                        request_timeout=request_timeout)
        sbx = cls(native)
        if timeout is not None:
            await sbx.set_timeout(timeout)
        return sbx

    @staticmethod
    async def list(api_key: str | None = None, domain: str | None = None, *,
                   metadata: Mapping[str, str] | None = None, url: str | None = None,
                   **options: Any) -> builtins.list[SandboxInfo]:
        query = options.pop("query", None)
        if query is not None:
            metadata = getattr(query, "metadata", None) or metadata
        opt.check_options(options, "AsyncSandbox.list")
        url, token = opt.supervisor_address(api_key, domain, url)
        with translated():
            return [SandboxInfo.from_native(i)
                    for i in await airlock.AsyncSandbox.list(metadata, url=url, token=token)]

    @property
    def sandbox_id(self) -> str:
        return self._native.id

    @property
    def native(self) -> airlock.AsyncSandbox:
        return self._native

    @_ClassOrInstance
    async def kill(self, request_timeout: float | None = None) -> bool:
        with translated():
            return await self._native.kill()

    async def close(self) -> None:
        """Not in E2B: lets go of this object's connections without killing the sandbox. An
        asyncio client cannot close them when it is garbage-collected, so a connected
        AsyncSandbox that is not killed should be closed."""
        await self._native.close()

    @_ClassOrInstance
    async def set_timeout(self, timeout: float, request_timeout: float | None = None) -> None:
        """The sandbox now ends `timeout` seconds from now, used or idle (see docs/e2b.md)."""
        with translated():
            body = opt.keepalive_for(await self._native.info(), timeout)
            await self._native.set_timeout(body["keep_alive_s"], lifetime=body["lifetime_s"])

    @_ClassOrInstance
    async def get_info(self, request_timeout: float | None = None) -> SandboxInfo:
        with translated():
            return SandboxInfo.from_native(await self._native.info())

    @_ClassOrInstance
    async def get_metrics(self, start: datetime.datetime | None = None,
                          end: datetime.datetime | None = None,
                          request_timeout: float | None = None) -> builtins.list[SandboxMetrics]:
        """As `Sandbox.get_metrics`: one sample read now."""
        with translated():
            return [SandboxMetrics.from_native(await self._native.metrics())]

    async def is_running(self, request_timeout: float | None = None) -> bool:
        with translated():
            return await self._native.is_running()

    async def get_host(self, port: int) -> str:
        """As `Sandbox.get_host` (awaited: it asks the supervisor for the port's link)."""
        with translated():
            url = await self._native.port_url(port)
        return url.split("://", 1)[1] if "://" in url else url

    async def run_code(self, code: str, language: str | None = None,
                       context: Context | None = None,
                       on_stdout: Callable[[OutputMessage], Any] | None = None,
                       on_stderr: Callable[[OutputMessage], Any] | None = None,
                       on_result: Callable[[Result], Any] | None = None,
                       on_error: Callable[[ExecutionError], Any] | None = None,
                       envs: Mapping[str, str] | None = None, timeout: float | None = None,
                       request_timeout: float | None = None) -> Execution:
        check_language_and_context(language, context)
        with translated():
            execution = await self._native.run_code(
                code, language=language, context=context,
                on_stdout=output_callback(on_stdout), on_stderr=output_callback(on_stderr),
                on_result=result_callback(on_result), on_error=on_error,
                timeout=opt.code_timeout(timeout), envs=envs)
        return e2b_execution(execution)

    async def create_code_context(self, cwd: str | None = None, language: str | None = None,
                                  request_timeout: float | None = None) -> Context:
        with translated():
            return await self._native.create_code_context(language or "python", cwd=cwd)

    async def list_code_contexts(self) -> builtins.list[Context]:
        with translated():
            return await self._native.list_code_contexts()

    async def restart_code_context(self, context: Context | str,
                                   request_timeout: float | None = None) -> None:
        with translated():
            await self._native.restart_code_context(context)

    async def remove_code_context(self, context: Context | str,
                                  request_timeout: float | None = None) -> None:
        with translated():
            await self._native.remove_code_context(context)

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.kill()

    def __repr__(self) -> str:
        return f"AsyncSandbox(sandbox_id={self.sandbox_id!r})"


class AsyncCommandHandle:
    def __init__(self, native: airlock.AsyncCommandHandle) -> None:
        self._native = native

    @property
    def pid(self) -> int:
        return self._native.pid or 0

    async def wait(self, on_pty: Any = None, on_stdout: Callable[[str], Any] | None = None,
                   on_stderr: Callable[[str], Any] | None = None) -> CommandResult:
        if on_pty is not None:
            raise InvalidArgumentException("CommandHandle.wait: airlock commands have no PTY")
        with translated():
            return command_result(await self._native.wait(on_stdout, on_stderr))

    async def kill(self) -> bool:
        with translated():
            return await self._native.kill()

    async def disconnect(self) -> None:
        """Stops following the command; it keeps running."""


class AsyncCommands:
    def __init__(self, native: airlock.AsyncSandbox) -> None:
        self._native = native

    async def run(self, cmd: str, background: bool = False,
                  envs: Mapping[str, str] | None = None, user: str | None = None,
                  cwd: str | None = None, on_stdout: Callable[[str], Any] | None = None,
                  on_stderr: Callable[[str], Any] | None = None, stdin: bool | None = None,
                  timeout: float | None = None,
                  request_timeout: float | None = None) -> CommandResult | AsyncCommandHandle:
        opt.check_user(user, "commands.run")
        argv = ["bash", "-c", opt.shell_command(cmd)]
        seconds = opt.command_timeout(timeout)
        with translated():
            outcome = await self._native.commands.run(argv, background=background, envs=envs,
                                                      cwd=cwd, on_stdout=on_stdout,
                                                      on_stderr=on_stderr, timeout=seconds)
            if isinstance(outcome, airlock.AsyncCommandHandle):
                return AsyncCommandHandle(outcome)
            return command_result(outcome)

    async def list(self, request_timeout: float | None = None) -> builtins.list[ProcessInfo]:
        with translated():
            return [process_info(c) for c in await self._native.commands.list()
                    if c.state == "running"]

    async def kill(self, pid: int, request_timeout: float | None = None) -> bool:
        with translated():
            cid = command_id_of(pid, await self._native.commands.list())
            return cid is not None and await self._native.commands.kill(cid)

    async def send_stdin(self, pid: int, data: str,
                         request_timeout: float | None = None) -> None:
        with translated():
            await self._native.commands.send_stdin(await self._command_id(pid), data)

    async def connect(self, pid: int, timeout: float | None = None,
                      request_timeout: float | None = None) -> AsyncCommandHandle:
        with translated():
            return AsyncCommandHandle(
                await self._native.commands.connect(await self._command_id(pid)))

    async def _command_id(self, pid: int) -> str:
        cid = command_id_of(pid, await self._native.commands.list())
        if cid is None:
            raise NotFoundException(f"no running command with pid {pid} in this sandbox",
                                    status=404, code="not_found")
        return cid


class AsyncWatchHandle:
    """`files.watch_dir`'s handle: a task lists the directory every WATCH_INTERVAL_S and calls
    `on_event` for each change (the API has no watch route). `await stop()` ends it."""

    def __init__(self, files: AsyncFilesystem, path: str, recursive: bool,
                 on_event: Callable[[FilesystemEvent], Any],
                 on_exit: Callable[[Exception | None], Any] | None) -> None:
        self._files = files
        self._path = path
        self._depth = 64 if recursive else 1
        self._on_event = on_event
        self._on_exit = on_exit
        self._task: asyncio.Task[None] | None = None

    async def _start(self) -> None:
        first = snapshot(await self._files.list(self._path, depth=self._depth), self._path)
        self._task = asyncio.ensure_future(self._poll(first))

    async def _poll(self, last: Any) -> None:
        error: Exception | None = None
        try:
            while True:
                await asyncio.sleep(WATCH_INTERVAL_S)
                now = snapshot(await self._files.list(self._path, depth=self._depth), self._path)
                for event in changes(last, now):
                    await call(self._on_event, event)
                last = now
        except asyncio.CancelledError:
            pass
        except Exception as e:  # the sandbox ended, the directory went away: told to on_exit
            error = e
        if self._on_exit is not None:
            await call(self._on_exit, error)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


class AsyncFilesystem:
    def __init__(self, native: airlock.AsyncSandbox) -> None:
        self._native = native

    async def read(self, path: str, format: str = "text", user: str | None = None,
                   request_timeout: float | None = None) -> Any:
        opt.check_user(user, "files.read")
        with translated():
            return await self._native.files.read(path, format)  # type: ignore[arg-type]

    async def write(self, path: str | Sequence[WriteEntry], data: Any = None,
                    user: str | None = None, request_timeout: float | None = None
                    ) -> WriteInfo | builtins.list[WriteInfo]:
        opt.check_user(user, "files.write")
        if not isinstance(path, str):
            return await self.write_files(path, user=user)
        if data is None:
            raise InvalidArgumentException(f"files.write {path}: data is missing")
        with translated():
            return await self._native.files.write(path, data)

    async def write_files(self, files: Sequence[WriteEntry], user: str | None = None,
                          request_timeout: float | None = None) -> builtins.list[WriteInfo]:
        opt.check_user(user, "files.write_files")
        out = []
        with translated():
            for entry in files:
                path = entry.path if isinstance(entry, WriteEntry) else entry["path"]
                data = entry.data if isinstance(entry, WriteEntry) else entry["data"]
                out.append(await self._native.files.write(path, data))
        return out

    async def list(self, path: str, depth: int | None = 1, user: str | None = None,
                   request_timeout: float | None = None) -> builtins.list[EntryInfo]:
        opt.check_user(user, "files.list")
        depth = 1 if depth is None else depth
        if not isinstance(depth, int) or depth < 1:
            raise InvalidArgumentException(f"files.list: depth must be an int >= 1, got {depth!r}")
        with translated():
            return await self._list(path, depth)

    async def _list(self, path: str, depth: int) -> builtins.list[EntryInfo]:
        entries = await self._native.files.list(path)
        out = builtins.list(entries)
        if depth > 1:
            for e in entries:
                if e.type == airlock.FileType.DIR:
                    out.extend(await self._list(e.path, depth - 1))
        return out

    async def exists(self, path: str, user: str | None = None,
                     request_timeout: float | None = None) -> bool:
        with translated():
            return await self._native.files.exists(path)

    async def get_info(self, path: str, user: str | None = None,
                       request_timeout: float | None = None) -> EntryInfo:
        with translated():
            return await self._native.files.get_info(path)

    async def remove(self, path: str, user: str | None = None,
                     request_timeout: float | None = None) -> None:
        with translated():
            await self._native.files.remove(path)

    async def rename(self, old_path: str, new_path: str, user: str | None = None,
                     request_timeout: float | None = None) -> EntryInfo:
        with translated():
            return await self._native.files.rename(old_path, new_path)

    async def make_dir(self, path: str, user: str | None = None,
                       request_timeout: float | None = None) -> bool:
        with translated():
            return await self._native.files.make_dir(path)

    async def watch_dir(self, path: str, on_event: Callable[[FilesystemEvent], Any],
                        on_exit: Callable[[Exception | None], Awaitable[Any] | Any] | None = None,
                        user: str | None = None, request_timeout: float | None = None,
                        timeout: float | None = None, recursive: bool = False
                        ) -> AsyncWatchHandle:
        """Calls `on_event` (plain or coroutine function) for each change under `path` until
        `await handle.stop()`; `on_exit` gets the error that ended the watch, or None."""
        opt.check_user(user, "files.watch_dir")
        handle = AsyncWatchHandle(self, path, recursive, on_event, on_exit)
        await handle._start()
        return handle
