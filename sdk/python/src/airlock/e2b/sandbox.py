"""`airlock.e2b.Sandbox`: E2B code interpreter's blocking `Sandbox`, on the native
`airlock.Sandbox`. Arguments, units (seconds) and defaults are E2B's; docs/e2b.md has the
mapping and what is refused."""

from __future__ import annotations

import builtins
import datetime
import functools
import queue
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import airlock
from airlock.e2b import options as opt
from airlock.e2b.common import (
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
    """E2B methods callable on an instance (`sbx.kill()`) or on the class with a sandbox id
    (`Sandbox.kill(sandbox_id)`)."""

    def __init__(self, method: Callable[..., Any]) -> None:
        self._method = method
        functools.update_wrapper(self, method)  # type: ignore[arg-type]

    def __get__(self, obj: Any, cls: type) -> Callable[..., Any]:
        if obj is not None:
            return functools.partial(self._method, obj)

        def on_class(sandbox_id: str, *args: Any, api_key: str | None = None,
                     domain: str | None = None, request_timeout: float | None = None,
                     url: str | None = None, **kwargs: Any) -> Any:
            try:
                sbx = cls.connect(sandbox_id, api_key=api_key, domain=domain,
                                  request_timeout=request_timeout, url=url)
            except NotFoundException:
                if self._method.__name__ == "kill":
                    return False
                raise
            return self._method(sbx, *args, **kwargs)

        return on_class


class Sandbox:
    """An airlock sandbox with E2B's Sandbox API. `Sandbox.create(...)` (or `Sandbox(...)`, as
    E2B still allows) makes one; `with` kills it at the end of the block."""

    def __init__(self, template: str | None = None, timeout: float | None = None,
                 metadata: Mapping[str, str] | None = None,
                 envs: Mapping[str, str] | None = None, api_key: str | None = None,
                 domain: str | None = None, request_timeout: float | None = None, *,
                 url: str | None = None, _native: airlock.Sandbox | None = None,
                 **options: Any) -> None:
        if _native is None:
            opt.check_options(options, "Sandbox.create")
            url, token = opt.supervisor_address(api_key, domain, url)
            seconds = opt.sandbox_seconds(timeout)
            with translated():
                _native = airlock.Sandbox.create(
                    profile=template, envs=envs, metadata=metadata, keep_alive=seconds,
                    lifetime=seconds, url=url, token=token, request_timeout=request_timeout)
        self._native = _native
        self.commands = Commands(_native)
        self.files = Filesystem(_native)

    @classmethod
    def create(cls, template: str | None = None, timeout: float | None = None,
               metadata: Mapping[str, str] | None = None, envs: Mapping[str, str] | None = None,
               api_key: str | None = None, domain: str | None = None,
               request_timeout: float | None = None, *, url: str | None = None,
               **options: Any) -> Sandbox:
        """A new sandbox of profile `template` (the policy's default when None) that lives
        `timeout` seconds (default 300) unless `set_timeout` moves that. `api_key` is the airlock
        tenant token (else AIRLOCK_TOKEN), `domain` or `url` the supervisor (else AIRLOCK_URL)."""
        return cls(template, timeout, metadata, envs, api_key, domain, request_timeout, url=url,
                   **options)

    @classmethod
    def connect(cls, sandbox_id: str, timeout: float | None = None, api_key: str | None = None,
                domain: str | None = None, request_timeout: float | None = None, *,
                url: str | None = None, **options: Any) -> Sandbox:
        """Attaches to a running sandbox by id (or airlock name); `timeout` given resets its
        timeout as `set_timeout` does."""
        opt.check_options(options, "Sandbox.connect")
        url, token = opt.supervisor_address(api_key, domain, url)
        with translated():
            native = airlock.Sandbox.connect(sandbox_id, url=url, token=token,
                                             request_timeout=request_timeout)
        sbx = cls(_native=native)
        if timeout is not None:
            sbx.set_timeout(timeout)
        return sbx

    @staticmethod
    def list(api_key: str | None = None, domain: str | None = None, *,
             metadata: Mapping[str, str] | None = None, url: str | None = None,
             **options: Any) -> builtins.list[SandboxInfo]:
        """The tenant's running sandboxes (filtered by metadata), as E2B SandboxInfo."""
        query = options.pop("query", None)
        if query is not None:  # E2B's SandboxQuery(metadata=...)
            metadata = getattr(query, "metadata", None) or metadata
        opt.check_options(options, "Sandbox.list")
        url, token = opt.supervisor_address(api_key, domain, url)
        with translated():
            return [SandboxInfo.from_native(i)
                    for i in airlock.Sandbox.list(metadata, url=url, token=token)]

    @property
    def sandbox_id(self) -> str:
        return self._native.id

    @property
    def native(self) -> airlock.Sandbox:
        """The native airlock.Sandbox underneath (transfers, audit, review, port_url...)."""
        return self._native

    # ---- lifetime ----

    @_ClassOrInstance
    def kill(self, request_timeout: float | None = None) -> bool:
        """Destroys the sandbox; False when it was already gone."""
        with translated():
            return self._native.kill()

    @_ClassOrInstance
    def set_timeout(self, timeout: float, request_timeout: float | None = None) -> None:
        """The sandbox now ends `timeout` seconds from now, used or idle (see docs/e2b.md)."""
        with translated():
            info = self._native.info()
            body = opt.keepalive_for(info, timeout)
            self._native.set_timeout(body["keep_alive_s"], lifetime=body["lifetime_s"])

    @_ClassOrInstance
    def get_info(self, request_timeout: float | None = None) -> SandboxInfo:
        with translated():
            return SandboxInfo.from_native(self._native.info())

    @_ClassOrInstance
    def get_metrics(self, start: datetime.datetime | None = None,
                    end: datetime.datetime | None = None,
                    request_timeout: float | None = None) -> builtins.list[SandboxMetrics]:
        """The sandbox's resource use: one sample read now (airlock keeps no history, so `start`
        and `end` select nothing; see SandboxMetrics)."""
        with translated():
            return [SandboxMetrics.from_native(self._native.metrics())]

    def is_running(self, request_timeout: float | None = None) -> bool:
        with translated():
            return self._native.is_running()

    def get_host(self, port: int) -> str:
        """Where `port` inside the sandbox is reached, without the scheme (E2B's get_host): the
        supervisor's host and port plus a path whose token is the authorisation, so
        f"https://{host}" works against a TLS supervisor (http:// for a plain one). Over a Unix
        socket it is the unix:// URL's path part plus the link."""
        with translated():
            url = self._native.port_url(port)
        return url.split("://", 1)[1] if "://" in url else url

    # ---- code ----

    def run_code(self, code: str, language: str | None = None, context: Context | None = None,
                 on_stdout: Callable[[OutputMessage], Any] | None = None,
                 on_stderr: Callable[[OutputMessage], Any] | None = None,
                 on_result: Callable[[Result], Any] | None = None,
                 on_error: Callable[[ExecutionError], Any] | None = None,
                 envs: Mapping[str, str] | None = None, timeout: float | None = None,
                 request_timeout: float | None = None) -> Execution:
        """Runs `code` in the default context of `language` (Python if None) or in `context`.
        An exception in the code is `execution.error`, not raised; a timeout (seconds; the
        profile's limit if None) raises TimeoutException. `envs` hold for this run only."""
        check_language_and_context(language, context)
        with translated():
            execution = self._native.run_code(
                code, language=language, context=context,
                on_stdout=output_callback(on_stdout), on_stderr=output_callback(on_stderr),
                on_result=result_callback(on_result), on_error=on_error,
                timeout=opt.code_timeout(timeout), envs=envs)
        return e2b_execution(execution)

    def create_code_context(self, cwd: str | None = None, language: str | None = None,
                            request_timeout: float | None = None) -> Context:
        with translated():
            return self._native.create_code_context(language or "python", cwd=cwd)

    def list_code_contexts(self) -> builtins.list[Context]:
        with translated():
            return self._native.list_code_contexts()

    def restart_code_context(self, context: Context | str,
                             request_timeout: float | None = None) -> None:
        with translated():
            self._native.restart_code_context(context)

    def remove_code_context(self, context: Context | str,
                            request_timeout: float | None = None) -> None:
        with translated():
            self._native.remove_code_context(context)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.kill()

    def __repr__(self) -> str:
        return f"Sandbox(sandbox_id={self.sandbox_id!r})"


class CommandHandle:
    """A background command (E2B's CommandHandle): `wait()` returns its CommandResult or raises
    CommandExitException, `kill()` ends it."""

    def __init__(self, native: airlock.CommandHandle) -> None:
        self._native = native

    @property
    def pid(self) -> int:
        return self._native.pid or 0

    def wait(self, on_pty: Any = None, on_stdout: Callable[[str], Any] | None = None,
             on_stderr: Callable[[str], Any] | None = None) -> CommandResult:
        if on_pty is not None:
            raise InvalidArgumentException("CommandHandle.wait: airlock commands have no PTY")
        with translated():
            return command_result(self._native.wait(on_stdout, on_stderr))

    def kill(self) -> bool:
        with translated():
            return self._native.kill()

    def disconnect(self) -> None:
        """Stops following the command; it keeps running (connect by pid to follow it again)."""

    def __iter__(self) -> Iterator[tuple[str | None, str | None, None]]:
        """E2B's iteration over a background command: (stdout, stderr, pty) tuples, one side
        set, as the output arrives, until the command ends. `wait()` afterwards gives the
        result. (Output callbacks given to `run` take the output instead.)"""
        chunks: queue.SimpleQueue[tuple[str | None, str | None, None] | None] = \
            queue.SimpleQueue()

        def follow() -> None:
            try:
                self._native.wait(on_stdout=lambda s: chunks.put((s, None, None)),
                                  on_stderr=lambda s: chunks.put((None, s, None)))
            except airlock.AirlockError:
                pass  # wait() raises it again for the caller
            finally:
                chunks.put(None)

        threading.Thread(target=follow, name=f"e2b-command-{self.pid}", daemon=True).start()
        while (chunk := chunks.get()) is not None:
            yield chunk


class Commands:
    """`sbx.commands` with E2B's calls. Commands run with bash, as the sandbox's one user."""

    def __init__(self, native: airlock.Sandbox) -> None:
        self._native = native

    def run(self, cmd: str, background: bool = False, envs: Mapping[str, str] | None = None,
            user: str | None = None, cwd: str | None = None,
            on_stdout: Callable[[str], Any] | None = None,
            on_stderr: Callable[[str], Any] | None = None, stdin: bool | None = None,
            timeout: float | None = None,
            request_timeout: float | None = None) -> CommandResult | CommandHandle:
        """Runs `cmd` with bash. Foreground: waits and returns the CommandResult, raising
        CommandExitException on a non-zero exit and TimeoutException after `timeout` seconds
        (default 60, 0 for the profile's limit). `background=True` returns a CommandHandle."""
        opt.check_user(user, "commands.run")
        argv = ["bash", "-c", opt.shell_command(cmd)]
        seconds = opt.command_timeout(timeout)
        with translated():
            if background:
                return CommandHandle(self._native.commands.run_background(
                    argv, envs=envs, cwd=cwd, on_stdout=on_stdout, on_stderr=on_stderr,
                    timeout=seconds))
            native = self._native.commands.run(argv, envs=envs, cwd=cwd, on_stdout=on_stdout,
                                               on_stderr=on_stderr, timeout=seconds)
            return command_result(native)

    def list(self, request_timeout: float | None = None) -> builtins.list[ProcessInfo]:
        with translated():
            return [process_info(c) for c in self._native.commands.list()
                    if c.state == "running"]

    def kill(self, pid: int, request_timeout: float | None = None) -> bool:
        with translated():
            cid = command_id_of(pid, self._native.commands.list())
            return cid is not None and self._native.commands.kill(cid)

    def send_stdin(self, pid: int, data: str, request_timeout: float | None = None) -> None:
        with translated():
            self._native.commands.send_stdin(self._command_id(pid), data)

    def connect(self, pid: int, timeout: float | None = None,
                request_timeout: float | None = None) -> CommandHandle:
        with translated():
            return CommandHandle(self._native.commands.connect(self._command_id(pid)))

    def _command_id(self, pid: int) -> str:
        cid = command_id_of(pid, self._native.commands.list())
        if cid is None:
            raise NotFoundException(f"no running command with pid {pid} in this sandbox",
                                    status=404, code="not_found")
        return cid


class WatchHandle:
    """`files.watch_dir`'s handle. The API has no watch route: `get_new_events()` lists the
    directory and reports what changed since the last call (or since watch_dir)."""

    def __init__(self, files: Filesystem, path: str, recursive: bool) -> None:
        self._files = files
        self._path = path
        self._depth = 64 if recursive else 1
        self._stopped = False
        self._last = snapshot(self._files.list(path, depth=self._depth), path)

    def get_new_events(self) -> builtins.list[FilesystemEvent]:
        if self._stopped:
            raise InvalidArgumentException("watch_dir: this watch was stopped")
        now = snapshot(self._files.list(self._path, depth=self._depth), self._path)
        events, self._last = changes(self._last, now), now
        return events

    def stop(self) -> None:
        self._stopped = True


class Filesystem:
    """`sbx.files` with E2B's calls. Relative paths are from /home/user."""

    def __init__(self, native: airlock.Sandbox) -> None:
        self._native = native

    def read(self, path: str, format: str = "text", user: str | None = None,
             request_timeout: float | None = None) -> Any:
        """"text" (str), "bytes" or "stream" (an iterator of bytes chunks)."""
        opt.check_user(user, "files.read")
        with translated():
            return self._native.files.read(path, format)  # type: ignore[call-overload]

    def write(self, path: str | Sequence[WriteEntry], data: Any = None, user: str | None = None,
              request_timeout: float | None = None) -> WriteInfo | builtins.list[WriteInfo]:
        """Writes one file (`path`, `data`: str, bytes or a file object), or every WriteEntry
        of a list (returning a list)."""
        opt.check_user(user, "files.write")
        if not isinstance(path, str):
            return self.write_files(path, user=user)
        if data is None:
            raise InvalidArgumentException(f"files.write {path}: data is missing")
        with translated():
            return self._native.files.write(path, data)

    def write_files(self, files: Sequence[WriteEntry], user: str | None = None,
                    request_timeout: float | None = None) -> builtins.list[WriteInfo]:
        opt.check_user(user, "files.write_files")
        out = []
        with translated():
            for entry in files:
                path = entry.path if isinstance(entry, WriteEntry) else entry["path"]
                data = entry.data if isinstance(entry, WriteEntry) else entry["data"]
                out.append(self._native.files.write(path, data))
        return out

    def list(self, path: str, depth: int | None = 1, user: str | None = None,
             request_timeout: float | None = None) -> builtins.list[EntryInfo]:
        """The entries of `path`, and of its subdirectories down to `depth` levels."""
        opt.check_user(user, "files.list")
        depth = 1 if depth is None else depth
        if not isinstance(depth, int) or depth < 1:
            raise InvalidArgumentException(f"files.list: depth must be an int >= 1, got {depth!r}")
        with translated():
            return self._list(path, depth)

    def _list(self, path: str, depth: int) -> builtins.list[EntryInfo]:
        entries = self._native.files.list(path)
        out = builtins.list(entries)
        if depth > 1:
            for e in entries:
                if e.type == airlock.FileType.DIR:
                    out.extend(self._list(e.path, depth - 1))
        return out

    def exists(self, path: str, user: str | None = None,
               request_timeout: float | None = None) -> bool:
        with translated():
            return self._native.files.exists(path)

    def get_info(self, path: str, user: str | None = None,
                 request_timeout: float | None = None) -> EntryInfo:
        with translated():
            return self._native.files.get_info(path)

    def remove(self, path: str, user: str | None = None,
               request_timeout: float | None = None) -> None:
        with translated():
            self._native.files.remove(path)

    def rename(self, old_path: str, new_path: str, user: str | None = None,
               request_timeout: float | None = None) -> EntryInfo:
        with translated():
            return self._native.files.rename(old_path, new_path)

    def make_dir(self, path: str, user: str | None = None,
                 request_timeout: float | None = None) -> bool:
        with translated():
            return self._native.files.make_dir(path)

    def watch_dir(self, path: str, user: str | None = None,
                  request_timeout: float | None = None, recursive: bool = False) -> WatchHandle:
        """A WatchHandle whose `get_new_events()` says what changed (polling, see WatchHandle)."""
        opt.check_user(user, "files.watch_dir")
        with translated():
            return WatchHandle(self, path, recursive)
