"""`Sandbox`: one isolated Linux sandbox on an airlock supervisor, with code contexts, commands
and files. Shaped after E2B Code Interpreter's `Sandbox` so that moving over is mostly a change of
import (see sdk/python/README.md for the mapping)."""

from __future__ import annotations

import builtins
import math
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import IO, Any

from airlock.code import CodeRunner, string_map, ErrorHandler, OutputHandler, ResultHandler
from airlock.commands import Commands
from airlock.errors import InvalidRequestError, NotFoundError
from airlock.files import Files
from airlock.models import Context, Execution, Mount, SandboxInfo, SandboxMetrics, TransferRecord
from airlock.transfers import ProgressHandler, Transfers
from airlock.transport import RetryPolicy, Transport, quote


class Sandbox:
    """A sandbox. Make one with `Sandbox.create()` or attach with `Sandbox.connect()`; as a
    context manager it is killed at the end of the `with` block."""

    def __init__(self, info: SandboxInfo, transport: Transport) -> None:
        """Use `Sandbox.create` or `Sandbox.connect`; this only wraps an existing sandbox."""
        self._info = info
        self._transport = transport
        self._code = CodeRunner(transport, info.id)
        self.commands = Commands(transport, info.id)
        self.files = Files(transport, info.id)
        self._transfers = Transfers(transport, info.id)

    # ---- making and finding sandboxes ----

    @classmethod
    def create(cls, profile: str | None = None, language: str | None = None,
               name: str | None = None, envs: Mapping[str, str] | None = None,
               metadata: Mapping[str, str] | None = None, keep_alive: float | None = None,
               lifetime: float | None = None, persistent: bool = False, *,
               mounts: Iterable[Mount | str | Mapping[str, Any]] | None = None,
               isolation: str | None = None, url: str | None = None, token: str | None = None,
               request_timeout: float | None = None, retry: RetryPolicy | None = None) -> Sandbox:
        """Creates a sandbox and returns once it can run code (milliseconds from the warm pool).

        `profile` picks the policy profile (limits, languages, review; the policy's default if
        None); `language` is the default for `run_code`; `name` must be unique among the
        tenant's sandboxes and can stand in for the id; `envs` are environment variables of
        everything run inside; `keep_alive` is the idle time in seconds before the sandbox is
        destroyed, `lifetime` its hard end; `persistent=True` (with a name) keeps /home/user on
        disk across sandboxes of that name; `mounts` shows host directories the operator
        declared inside (at most 16): each a `Mount(source, path=None, writable=False)`, a
        source string ("hostdir:ROOT[/sub/dir]", read-only at /mnt/ROOT[/sub/dir]) or a dict of
        the API's fields; `path` must be under /mnt, `writable=True` needs a root in the
        operator's writable_roots (InvalidRequestError for a bad source or path,
        ForbiddenError when the profile forbids the root or writes); `isolation` picks another
        backend ("gvisor") where the profile's `isolation_choices` allow it. `url`/`token`
        override AIRLOCK_URL/AIRLOCK_TOKEN; `request_timeout` bounds each ordinary call
        (seconds, default 60); `retry` sets how refused (429/503) and failed requests are sent
        again (`RetryPolicy`). Durations are whole seconds, as the API takes them: a fraction
        is rounded up."""
        body = create_body(profile, language, name, envs, metadata, keep_alive, lifetime,
                           persistent, mounts, isolation)
        transport = Transport(url, token, request_timeout, retry)
        # A cold start (no warm sandbox left) takes longer than an ordinary call.
        answer = transport.json("POST", "/v1/sandboxes", body,
                                timeout=max(transport.request_timeout, 120.0))
        return cls(SandboxInfo.from_json(answer), transport)

    @classmethod
    def connect(cls, name_or_id: str, *, url: str | None = None, token: str | None = None,
                request_timeout: float | None = None, retry: RetryPolicy | None = None) -> Sandbox:
        """Attaches to a running sandbox of this tenant by id or name; NotFoundError if none."""
        transport = Transport(url, token, request_timeout, retry)
        answer = transport.json("GET", f"/v1/sandboxes/{quote(name_or_id)}")
        return cls(SandboxInfo.from_json(answer), transport)

    @staticmethod
    def list(metadata: Mapping[str, str] | None = None, *, url: str | None = None,
             token: str | None = None, node: str | None = None) -> builtins.list[SandboxInfo]:
        """The tenant's sandboxes, keeping those whose metadata has every given key and value.

        Behind a fleet's proxy (docs/deploy.md), which lists per node, every node it names is
        asked in turn; `node=` asks one. A node that is down raises its error."""
        transport = Transport(url, token)
        try:
            query = list_query(metadata, node)
            try:
                answers = [transport.json("GET", "/v1/sandboxes", query=query)]
            except InvalidRequestError as e:
                if node is not None or not lists_per_node(e):
                    raise
                nodes = transport.json("GET", "/v1/fleet").get("nodes", [])
                answers = [transport.json("GET", "/v1/sandboxes", query=list_query(metadata, n))
                           for n in nodes if isinstance(n, str)]
        finally:
            transport.close()
        return [SandboxInfo.from_json(s) for a in answers for s in a.get("sandboxes", [])
                if isinstance(s, dict)]

    # ---- this sandbox ----

    @property
    def id(self) -> str:
        return self._info.id

    @property
    def sandbox_id(self) -> str:
        """E2B's name for `id`."""
        return self._info.id

    @property
    def name(self) -> str | None:
        return self._info.name

    def info(self) -> SandboxInfo:
        """The sandbox as the supervisor sees it now (state, timers, running commands)."""
        self._info = SandboxInfo.from_json(self._transport.json("GET", self._path()))
        return self._info

    def metrics(self) -> SandboxMetrics:
        """The sandbox's resource use now: CPU seconds, memory, processes, workspace disk, OOM
        kills (read from its cgroup when asked)."""
        return SandboxMetrics.from_json(self._transport.json("GET", self._path("/metrics")))

    def is_running(self) -> bool:
        try:
            return self.info().state == "running"
        except NotFoundError:
            return False

    def set_timeout(self, seconds: float, lifetime: float | None = None) -> SandboxInfo:
        """Resets the idle timer and sets the idle time allowed from now on to `seconds` (within
        the profile's maximum); `lifetime` moves the hard end too."""
        body = keepalive_body(seconds, lifetime)
        self._info = SandboxInfo.from_json(self._transport.json("POST", self._path("/keepalive"),
                                                                body))
        return self._info

    def port_url(self, port: int) -> str:
        """A URL that reaches `port` inside the sandbox through the supervisor, carrying its own
        authorization (an unguessable token bound to this tenant, sandbox and port, valid until
        the sandbox ends), so a browser can open it. It is the SDK's base URL plus the link's
        path; over a Unix socket that is a unix:// URL (reach it with a client that speaks
        Unix sockets, e.g. `curl --unix-socket`). ForbiddenError when the profile turns
        ports off."""
        return self._transport.endpoint.public_url(self._transport.json(
            "POST", self._path(f"/ports/{port_number(port)}/link"))["path"])

    def kill(self) -> bool:
        """Destroys the sandbox and everything in it. False when it was already gone."""
        try:
            self._transport.json("DELETE", self._path())
            return True
        except NotFoundError:
            return False
        finally:
            self._transport.close()

    # ---- code ----

    def run_code(self, code: str, language: str | None = None,
                 context: Context | str | None = None, on_stdout: OutputHandler | None = None,
                 on_stderr: OutputHandler | None = None, on_result: ResultHandler | None = None,
                 on_error: ErrorHandler | None = None, timeout: float | None = None,
                 envs: Mapping[str, str] | None = None) -> Execution:
        """Runs `code` in a stateful context (the sandbox's default one for the language unless
        `context` is given): variables, imports and files persist between calls.

        An exception in the code does not raise: it is `execution.error` (and `on_error`). A run
        that hits `timeout` (seconds; the profile's limit if None) raises `airlock.TimeoutError`
        with the partial `execution`. A review denial raises `DeniedByReview`. Callbacks get
        output chunks (`OutputMessage`), results (`Result`, displays included) and the error
        as they happen. `envs` are environment variables for this run only (os.environ in
        Python, exported in bash), restored after it."""
        return self._code.run(code, language, context, on_stdout, on_stderr, on_result,
                              on_error, timeout, envs)

    def create_code_context(self, language: str = "python", cwd: str | None = None) -> Context:
        """A new stateful interpreter ("python", "javascript", "bash", ...) whose working
        directory is `cwd` (default /home/user)."""
        return self._code.create_context(language, cwd)

    def list_code_contexts(self) -> builtins.list[Context]:
        return self._code.list_contexts()

    def restart_code_context(self, context: Context | str) -> Context:
        """A fresh interpreter under the same context id: its variables and imports are gone."""
        return self._code.restart_context(context)

    def remove_code_context(self, context: Context | str) -> None:
        self._code.remove_context(context)

    def recovered_run(self, context: Context | str, run: str = "last",
                      on_stdout: OutputHandler | None = None,
                      on_stderr: OutputHandler | None = None,
                      on_result: ResultHandler | None = None,
                      on_error: ErrorHandler | None = None) -> Execution:
        """The run of `context` that was in flight when the supervisor died, finished under the
        next one that adopted the sandbox (`run`: its id, or "last"). Waits for its end. Its
        `restart` says what the sandbox's agent held (`held_bytes`) and dropped
        (`dropped_bytes`) while no supervisor was there; output before that went to the run's
        first caller. Raises NotFoundError when no such run was taken over."""
        return self._code.recovered_run(context, run, on_stdout, on_stderr, on_result, on_error)

    # ---- transfers (docs/transfer.md) ----

    def transfer_in(self, source: str, path: str,
                    on_progress: ProgressHandler | None = None) -> TransferRecord:
        """Fetches the archive at `source` (an https:// or http:// URL, or hostdir:NAME/path)
        and unpacks it into the sandbox directory `path`, inside the sandbox. The format (tar,
        tar.gz, tar.zst, zip, ...) is read from the bytes. `on_progress` gets a
        `TransferProgress` about four times a second; raising in it cancels the transfer.

        Returns the record; raises `TransferError` (with `.transfer`) when its status is not
        "ok": a rule refused it ("denied"), the archive or the download was bad ("error"), or it
        was cancelled."""
        return self._transfers.start("in", source, path, on_progress)

    def transfer_out(self, dest: str, path: str,
                     on_progress: ProgressHandler | None = None) -> TransferRecord:
        """Packs the sandbox directory `path` and sends it to `dest`: a URL (uploaded with PUT,
        e.g. a presigned object-store URL; the format from the URL's path, else tar.gz) or
        hostdir:NAME/file.tar.gz. Errors as for `transfer_in`."""
        return self._transfers.start("out", dest, path, on_progress)

    def list_transfers(self) -> builtins.list[TransferRecord]:
        """The sandbox's transfers, running ("running") and recently ended."""
        return self._transfers.list()

    def cancel_transfer(self, transfer_id: str) -> bool:
        """Cancels a running transfer (what it unpacked so far is removed). False when it has
        already ended or is unknown."""
        return self._transfers.cancel(transfer_id)

    def upload_archive(self, path: str,
                       data: bytes | bytearray | memoryview | IO[Any]) -> TransferRecord:
        """Unpacks an archive from this process (bytes, or a binary file object streamed in
        1 MiB chunks) into the sandbox directory `path`. tar, tar.gz, tar.zst and zip; an entry
        that would leave the directory refuses the whole archive (InvalidRequestError)."""
        return self._transfers.upload(path, data)

    def download_archive(self, path: str, format: str = "tar.gz",
                         file: IO[bytes] | None = None) -> bytes | int:
        """The sandbox directory `path` packed as `format` ("tar", "tar.gz", "tar.zst" or
        "zip"): its bytes, or with `file` (a binary file object) written there as they arrive,
        returning the number of bytes written."""
        return self._transfers.download(path, format, file)

    # ---- plumbing ----

    def _path(self, suffix: str = "") -> str:
        return f"/v1/sandboxes/{quote(self._info.id)}{suffix}"

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.kill()

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, name={self.name!r}, profile={self._info.profile!r})"


def list_query(metadata: Mapping[str, str] | None, node: str | None) -> list[tuple[str, str]]:
    query = [(f"metadata.{k}", v) for k, v in (metadata or {}).items()]
    return query + ([("node", node)] if node is not None else [])


def lists_per_node(error: InvalidRequestError) -> bool:
    """A fleet's proxy answers a list with this 400: it cannot merge the nodes' lists."""
    return error.message.startswith("this fleet lists per node")


def create_body(profile: str | None, language: str | None, name: str | None,
                envs: Mapping[str, str] | None, metadata: Mapping[str, str] | None,
                keep_alive: float | None, lifetime: float | None, persistent: bool,
                mounts: Iterable[Mount | str | Mapping[str, Any]] | None,
                isolation: str | None) -> dict[str, Any]:
    """The body of `POST /v1/sandboxes` (the SandboxSpec schema)."""
    body: dict[str, Any] = {}
    for key, value in (("profile", profile), ("language", language), ("name", name),
                       ("isolation", isolation)):
        if value is not None:
            body[key] = value
    if keep_alive is not None:
        body["keep_alive_s"] = whole_seconds(keep_alive, "keep_alive")
    if lifetime is not None:
        body["lifetime_s"] = whole_seconds(lifetime, "lifetime")
    if envs:
        body["env"] = string_map(envs, "envs")
    if metadata:
        body["metadata"] = string_map(metadata, "metadata")
    if persistent:
        body["persistent"] = True
    if mounts is not None:
        wanted = [_mount_json(m) for m in mounts]
        if wanted:
            body["mounts"] = wanted
    return body


def keepalive_body(seconds: float | None, lifetime: float | None) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if seconds is not None:
        body["keep_alive_s"] = whole_seconds(seconds, "keep_alive")
    if lifetime is not None:
        body["lifetime_s"] = whole_seconds(lifetime, "lifetime")
    return body


def whole_seconds(value: float, what: str) -> int:
    """The API's durations are integers (`keep_alive_s`, `lifetime_s`): a fraction rounds up so
    a sandbox never ends earlier than asked."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise InvalidRequestError(f"{what}: a number of seconds, got {value!r}")
    if value <= 0:
        raise InvalidRequestError(f"{what}: must be more than 0 seconds, got {value!r}")
    return int(math.ceil(value))


def port_number(port: int) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise InvalidRequestError(f"port must be an int from 1 to 65535, got {port!r}")
    return port


def _mount_json(mount: Mount | str | Mapping[str, Any]) -> dict[str, Any]:
    """A `mounts` entry of the create body: a Mount, a bare source, or the API's fields."""
    if isinstance(mount, Mount):
        return mount.to_json()
    if isinstance(mount, str):
        return {"source": mount}
    if isinstance(mount, Mapping):
        return dict(mount)
    raise TypeError(f"a mount is a Mount, a source string or a dict, not {type(mount).__name__}")
