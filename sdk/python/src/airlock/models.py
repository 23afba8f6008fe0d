"""What the API answers, as typed objects. Every `from_json` tolerates absent fields and ignores
unknown ones: the supervisor may add fields (an `audit` summary, ...) without breaking clients.
The raw answer stays available as `.raw` where one object maps one answer."""

from __future__ import annotations

import base64
import datetime
import enum
import json
import stat
from dataclasses import dataclass, field
from typing import Any


def _str(d: dict[str, Any], key: str, default: str = "") -> str:
    v = d.get(key)
    return v if isinstance(v, str) else default


def _opt_str(d: dict[str, Any], key: str) -> str | None:
    v = d.get(key)
    return v if isinstance(v, str) else None


def _int(d: dict[str, Any], key: str, default: int = 0) -> int:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _opt_int(d: dict[str, Any], key: str) -> int | None:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _float(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _dict(d: dict[str, Any], key: str) -> dict[str, Any]:
    v = d.get(key)
    return v if isinstance(v, dict) else {}


def _opt_dict(d: dict[str, Any], key: str) -> dict[str, Any] | None:
    v = d.get(key)
    return v if isinstance(v, dict) else None


def _time(d: dict[str, Any], key: str) -> datetime.datetime | None:
    ms = _float(d, key)
    return None if ms is None else datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)


def event_bytes(event: dict[str, Any], text_key: str = "data") -> bytes:
    """The bytes of an output event or document field: `bytes` from a frame, `data` as UTF-8
    text, or `data_base64`."""
    raw = event.get("bytes")
    if isinstance(raw, bytes):
        return raw
    text = event.get(text_key)
    if isinstance(text, str):
        return text.encode("utf-8")
    encoded = event.get(text_key + "_base64")
    if isinstance(encoded, str):
        return base64.b64decode(encoded)
    return b""


# ---- sandboxes ----


@dataclass
class Mount:
    """A host directory the operator declared ([transfer] roots), shown inside the sandbox
    (docs/transfer.md, Mounts). `source` is "hostdir:ROOT" or "hostdir:ROOT/sub/dir"; `path` is
    where the sandbox sees it, under /mnt (None at create: the supervisor's default
    /mnt/ROOT[/sub/dir]; a sandbox's mounts always have it); `writable` is allowed only for a
    root in [transfer] writable_roots (read-only otherwise)."""

    source: str
    path: str | None = None
    writable: bool = False

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"source": self.source}
        if self.path is not None:
            d["path"] = self.path
        if self.writable:
            d["writable"] = True
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Mount:
        return Mount(source=_str(d, "source"), path=_opt_str(d, "path"),
                     writable=d.get("writable") is True)


@dataclass
class SandboxInfo:
    """A sandbox as `GET /v1/sandboxes/{sb}` answers it."""

    id: str
    name: str | None
    tenant: str
    profile: str
    language: str | None
    isolation: str | None  # the backend it runs on ("namespaces", "gvisor")
    state: str
    metadata: dict[str, str]
    persistent: bool
    mounts: list[Mount]  # host directories shown inside, each with its path
    created_at: datetime.datetime | None
    last_active_at: datetime.datetime | None
    keep_alive_s: int | None
    idle_expires_at: datetime.datetime | None
    lifetime_s: int | None
    ends_at: datetime.datetime | None
    commands_running: int
    contexts: int
    raw: dict[str, Any] = field(repr=False)
    # What runs now, the longest-running first ({"kind": "command"|"code", "id", "started_at"});
    # None when idle.
    current_execution: dict[str, Any] | None = None
    # Executions refused since the sandbox started, by cause ({"review": 1}).
    recent_denials: dict[str, int] = field(default_factory=dict)
    # The fleet node holding it, the prefix of its id (docs/deploy.md); None on a single host.
    node: str | None = None

    @property
    def sandbox_id(self) -> str:
        return self.id

    @staticmethod
    def from_json(d: dict[str, Any]) -> SandboxInfo:
        mounts = d.get("mounts")
        return SandboxInfo(
            id=_str(d, "id"), name=_opt_str(d, "name") or None, tenant=_str(d, "tenant"),
            profile=_str(d, "profile"), language=_opt_str(d, "language"),
            isolation=_opt_str(d, "isolation"), state=_str(d, "state"),
            metadata={k: v for k, v in _dict(d, "metadata").items() if isinstance(v, str)},
            persistent=d.get("persistent") is True,
            mounts=[Mount.from_json(m) for m in mounts if isinstance(m, dict)]
            if isinstance(mounts, list) else [],
            created_at=_time(d, "created_at"),
            last_active_at=_time(d, "last_active_at"), keep_alive_s=_opt_int(d, "keep_alive_s"),
            idle_expires_at=_time(d, "idle_expires_at"), lifetime_s=_opt_int(d, "lifetime_s"),
            ends_at=_time(d, "ends_at"), commands_running=_int(d, "commands_running"),
            contexts=_int(d, "contexts"), raw=d,
            current_execution=_opt_dict(d, "current_execution"),
            recent_denials={k: v for k, v in _dict(d, "recent_denials").items()
                            if isinstance(v, int) and not isinstance(v, bool)},
            node=_opt_str(d, "node"))


@dataclass
class SandboxMetrics:
    """One sandbox's resource use, as `GET /v1/sandboxes/{sb}/metrics` answers it (read from its
    cgroup and workspace when asked; docs/api.md, "One sandbox's resource use"). A limit of
    None means unlimited, or not measurable (the disk of a gVisor or microVM sandbox)."""

    sandbox_id: str
    cpu_seconds: float
    memory_bytes: int
    memory_peak_bytes: int
    memory_limit_bytes: int | None
    pids: int
    pids_limit: int | None
    disk_bytes: int
    disk_limit_bytes: int | None
    oom_kills: int
    executions: int
    uptime_s: float
    sampled_at: datetime.datetime | None
    raw: dict[str, Any] = field(repr=False)

    @staticmethod
    def from_json(d: dict[str, Any]) -> SandboxMetrics:
        sampled = _opt_str(d, "sampled_at")
        try:
            sampled_at = datetime.datetime.fromisoformat(sampled) if sampled else None
        except ValueError:
            sampled_at = None
        return SandboxMetrics(
            sandbox_id=_str(d, "sandbox_id"), cpu_seconds=_float(d, "cpu_seconds") or 0.0,
            memory_bytes=_int(d, "memory_bytes"), memory_peak_bytes=_int(d, "memory_peak_bytes"),
            memory_limit_bytes=_opt_int(d, "memory_limit_bytes"), pids=_int(d, "pids"),
            pids_limit=_opt_int(d, "pids_limit"), disk_bytes=_int(d, "disk_bytes"),
            disk_limit_bytes=_opt_int(d, "disk_limit_bytes"), oom_kills=_int(d, "oom_kills"),
            executions=_int(d, "executions"), uptime_s=_float(d, "uptime_s") or 0.0,
            sampled_at=sampled_at, raw=d)


# ---- code ----


@dataclass
class OutputMessage:
    """One chunk of a code run's stdout or stderr, as the callbacks receive it (E2B's shape):
    `line` is the text (a chunk as the interpreter flushed it, not always a whole line)."""

    line: str
    error: bool
    timestamp: datetime.datetime

    def __str__(self) -> str:
        return self.line


_RESULT_FORMATS: dict[str, str] = {
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
}
# Chart data extracted from a matplotlib figure (E2B's chart shape; docs/api.md, Code).
CHART_TYPE = "application/vnd.airlock.chart+json"


@dataclass
class Result:
    """A rich value from a code run: the last expression's value (`is_main_result`) or a display
    (every matplotlib figure open at the end of a run comes back as one, with `png`).

    As in E2B and airlock's TypeScript SDK, every format is what the MIME bundle carries: `png`,
    `jpeg` and `pdf` are base64 strings (`base64.b64decode(result.png)` gives the image), the
    text formats are str, `json` is the decoded value. `chart` is the figure's data (type,
    title, axes, elements) as a dict when the run drew a matplotlib chart. `raw` (also `data`)
    is the MIME bundle as sent, `extra` holds MIME types without an attribute."""

    text: str | None = None
    html: str | None = None
    markdown: str | None = None
    svg: str | None = None
    png: str | None = None
    jpeg: str | None = None
    pdf: str | None = None
    latex: str | None = None
    json: Any = None
    javascript: str | None = None
    chart: dict[str, Any] | None = None
    is_main_result: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def data(self) -> dict[str, Any]:
        """E2B's name for the MIME bundle."""
        return self.raw

    def formats(self) -> list[str]:
        """The formats present besides `text`, as E2B lists them: "html", "png", "chart", ..."""
        present = [name for name in _RESULT_FORMATS.values() if getattr(self, name) is not None]
        if self.chart is not None:
            present.append("chart")
        return present + list(self.extra)

    def __str__(self) -> str:
        return self.text or ""

    @staticmethod
    def from_bundle(bundle: dict[str, Any], is_main_result: bool) -> Result:
        result = Result(is_main_result=is_main_result, raw=bundle)
        for mime, value in bundle.items():
            if mime == "text/plain":
                result.text = value if isinstance(value, str) else str(value)
                continue
            if mime == CHART_TYPE:
                chart = _json_value(value)
                result.chart = chart if isinstance(chart, dict) else None
                continue
            name = _RESULT_FORMATS.get(mime)
            if name is None:
                result.extra[mime] = value
            elif name == "json":
                result.json = _json_value(value)
            else:
                setattr(result, name, value if isinstance(value, str) else None)
        return result


def _json_value(value: Any) -> Any:
    """A JSON MIME value: sent as the value itself, or (by some producers) as its text."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


@dataclass
class ExecutionError:
    """An exception raised by the code (or the interpreter dying): `name` is the exception type,
    `value` its message, `traceback` the formatted traceback as one string."""

    name: str
    value: str
    traceback: str

    @property
    def traceback_lines(self) -> list[str]:
        return self.traceback.split("\n") if self.traceback else []

    def __str__(self) -> str:
        return f"{self.name}: {self.value}"

    def to_json(self) -> str:
        return json.dumps({"name": self.name, "value": self.value, "traceback": self.traceback})

    @staticmethod
    def from_event(event: dict[str, Any]) -> ExecutionError:
        tb = event.get("traceback")
        if isinstance(tb, list):
            traceback = "\n".join(str(line) for line in tb)
        else:
            traceback = tb if isinstance(tb, str) else ""
        return ExecutionError(name=_str(event, "name", "Error"), value=_str(event, "value"),
                              traceback=traceback)


@dataclass
class Connection:
    """One distinct connection attempt of an execution, with how often it was made."""

    verdict: str  # "allow" or "deny"
    protocol: str
    address: str
    port: int
    rule: str  # "rule:2", "loopback", "protected:10.0.0.0/8", "mode:none", ...
    rule_text: str
    count: int

    @staticmethod
    def from_json(d: dict[str, Any]) -> Connection:
        return Connection(verdict=_str(d, "verdict"), protocol=_str(d, "protocol"),
                          address=_str(d, "address"), port=_int(d, "port"),
                          rule=_str(d, "rule"), rule_text=_str(d, "rule_text"),
                          count=_int(d, "count"))


@dataclass
class AuditSummary:
    """What an execution did as the kernel saw it (docs/audit.md): the processes it started and
    the connections it tried, each with the rule that decided. `first_denial` names the rule that
    refused a connection; `failed` means events were dropped and the profile fails closed;
    `skipped` says why this execution has no summary of its own."""

    execution: str | None = None
    processes_started: int = 0
    processes: list[dict[str, Any]] = field(default_factory=list)
    connections_allowed: int = 0
    connections_denied: int = 0
    connections: list[Connection] = field(default_factory=list)
    bytes_sent: int = 0
    bytes_received: int = 0
    events_dropped: int = 0
    failed: bool = False
    first_denial: str | None = None
    skipped: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @staticmethod
    def from_json(d: Any) -> AuditSummary | None:
        if not isinstance(d, dict):
            return None
        processes = d.get("processes")
        connections = d.get("connections")
        return AuditSummary(
            execution=_opt_str(d, "execution"), processes_started=_int(d, "processes_started"),
            processes=[p for p in processes if isinstance(p, dict)]
            if isinstance(processes, list) else [],
            connections_allowed=_int(d, "connections_allowed"),
            connections_denied=_int(d, "connections_denied"),
            connections=[Connection.from_json(c) for c in connections if isinstance(c, dict)]
            if isinstance(connections, list) else [],
            bytes_sent=_int(d, "bytes_sent"), bytes_received=_int(d, "bytes_received"),
            events_dropped=_int(d, "events_dropped"), failed=d.get("failed") is True,
            first_denial=_opt_str(d, "first_denial") or None, skipped=_opt_str(d, "skipped"),
            raw=d)


@dataclass
class Logs:
    """The chunks a code run wrote to stdout and stderr, in order."""

    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({"stdout": self.stdout, "stderr": self.stderr})


@dataclass
class Execution:
    """The outcome of `Sandbox.run_code`. A Python exception in the code is `error` (it does not
    raise); `status` is the supervisor's: "ok", "error", "timeout" or "context_lost"."""

    results: list[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    error: ExecutionError | None = None
    status: str = ""
    execution_count: int | None = None  # per context, like Jupyter's In [N]
    duration_ms: float | None = None
    context_id: str | None = None
    context_restarted: bool = False
    review: dict[str, Any] | None = None
    audit: AuditSummary | None = None  # None: the profile audits nothing
    raw_end: dict[str, Any] = field(default_factory=dict, repr=False)
    # A run taken over from a supervisor that died (Sandbox.recovered_run): its
    # "supervisor_restart" event, with held_bytes and dropped_bytes. None for other runs.
    restart: dict[str, Any] | None = None

    @property
    def text(self) -> str | None:
        """The text of the main result (the value of the last expression), if any."""
        for result in reversed(self.results):
            if result.is_main_result:
                return result.text
        return None

    def to_json(self) -> str:
        """The execution as JSON text (E2B's `Execution.to_json`): results as their MIME
        bundles, logs, error, execution_count."""
        return json.dumps({
            "results": [r.raw for r in self.results],
            "logs": {"stdout": self.logs.stdout, "stderr": self.logs.stderr},
            "error": None if self.error is None else json.loads(self.error.to_json()),
            "execution_count": self.execution_count,
        })

    @property
    def stdout(self) -> str:
        return "".join(self.logs.stdout)

    @property
    def stderr(self) -> str:
        return "".join(self.logs.stderr)


@dataclass
class Context:
    """A stateful interpreter inside a sandbox (`create_code_context`)."""

    id: str
    language: str
    state: str = ""
    created_at: datetime.datetime | None = None
    runs: int = 0
    cwd: str = "/home/user"  # the context's working directory (E2B's Context.cwd)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def context_id(self) -> str:
        return self.id

    @staticmethod
    def from_json(d: dict[str, Any]) -> Context:
        return Context(id=_str(d, "context_id"), language=_str(d, "language"),
                       state=_str(d, "state"), created_at=_time(d, "created_at"),
                       runs=_int(d, "runs"), cwd=_str(d, "cwd", "/home/user"), raw=d)


# ---- commands ----


@dataclass
class CommandResult:
    """A finished command. `exit_code` is None when a signal ended it (`signal` says which) or
    the supervisor could not learn its end (`error` says why). A non-zero exit does not raise."""

    exit_code: int | None
    stdout: str
    stderr: str
    command_id: str = ""
    pid: int | None = None
    signal: int | None = None
    timed_out: bool = False
    error: str | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: float | None = None
    review: dict[str, Any] | None = None
    audit: AuditSummary | None = None  # None: the profile audits nothing
    raw_exit: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass
class CommandInfo:
    """A command as `GET /v1/sandboxes/{sb}/commands` lists it."""

    command_id: str
    argv: list[str]
    pid: int | None
    state: str
    background: bool
    started_at: datetime.datetime | None
    exit_code: int | None
    signal: int | None
    raw: dict[str, Any] = field(repr=False)

    @property
    def id(self) -> str:
        return self.command_id

    @staticmethod
    def from_json(d: dict[str, Any]) -> CommandInfo:
        argv = d.get("argv")
        return CommandInfo(
            command_id=_str(d, "command_id"),
            argv=[a for a in argv if isinstance(a, str)] if isinstance(argv, list) else [],
            pid=_opt_int(d, "pid"), state=_str(d, "state"), background=d.get("background") is True,
            started_at=_time(d, "started_at"), exit_code=_opt_int(d, "exit_code"),
            signal=_opt_int(d, "signal"), raw=d)


# ---- files ----


class FileType(str, enum.Enum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"
    OTHER = "other"


@dataclass
class EntryInfo:
    """A file, directory or link inside the sandbox."""

    name: str
    type: FileType
    path: str
    size: int
    mode: int
    modified_time: datetime.datetime | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def permissions(self) -> str:
        """The mode as `ls -l` shows it ("-rw-r--r--"), as E2B's EntryInfo has it."""
        kind = {FileType.DIR: stat.S_IFDIR, FileType.SYMLINK: stat.S_IFLNK}.get(self.type,
                                                                                  stat.S_IFREG)
        return stat.filemode(kind | (self.mode & 0o7777))

    @staticmethod
    def from_json(d: dict[str, Any], directory: str | None = None) -> EntryInfo:
        name = _str(d, "name")
        path = _str(d, "path")
        if not path and directory is not None:
            path = directory.rstrip("/") + "/" + name
        if not name and path:
            name = path.rstrip("/").rsplit("/", 1)[-1]
        try:
            kind = FileType(_str(d, "type", "other"))
        except ValueError:
            kind = FileType.OTHER
        mode = d.get("mode")
        if isinstance(mode, str):
            try:
                mode = int(mode, 8)
            except ValueError:
                mode = 0
        return EntryInfo(name=name, type=kind, path=path, size=_int(d, "size"),
                         mode=mode if isinstance(mode, int) else 0,
                         modified_time=_time(d, "mtime_ms"), raw=d)


@dataclass
class WriteInfo:
    """A file written by `files.write`."""

    path: str
    size: int
    name: str
    type: FileType = FileType.FILE

    @staticmethod
    def from_json(d: dict[str, Any], path: str) -> WriteInfo:
        written = _str(d, "path", path)
        return WriteInfo(path=written, size=_int(d, "size"),
                         name=written.rstrip("/").rsplit("/", 1)[-1])


# ---- transfers ----


@dataclass
class TransferRecord:
    """One transfer as the supervisor records it (docs/transfer.md, The record): an archive moved
    into a sandbox directory (`direction` "in") or a directory packed out ("out"). `status` is
    "ok", "error", "denied" (a rule refused it before any byte moved), "cancelled", or "running"
    in `list_transfers` while it runs; `error` says what was wrong, naming the entry, URL or
    rule."""

    id: str
    direction: str
    plugin: str  # "http", "hostdir", "archive"; "upload"/"download" for the archive routes
    location: str  # the source or destination with credentials removed
    sandbox_path: str
    files: int
    dirs: int
    links: int
    bytes: int  # unpacked (in) or packed (out)
    archive_bytes: int  # the archive's bytes that crossed
    sha256: str | None
    ms: float | None
    status: str
    error: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @staticmethod
    def from_json(d: dict[str, Any]) -> TransferRecord:
        return TransferRecord(
            id=_str(d, "id"), direction=_str(d, "direction"), plugin=_str(d, "plugin"),
            location=_str(d, "location"), sandbox_path=_str(d, "sandbox_path"),
            files=_int(d, "files"), dirs=_int(d, "dirs"), links=_int(d, "links"),
            bytes=_int(d, "bytes"), archive_bytes=_int(d, "archive_bytes"),
            sha256=_opt_str(d, "sha256"), ms=_float(d, "ms"), status=_str(d, "status"),
            error=_opt_str(d, "error"), raw=d)


@dataclass
class TransferProgress:
    """A `progress` event of a running transfer, about four a second: the archive bytes moved so
    far and the average rate."""

    transfer_id: str
    bytes: int
    rate_bps: int

    @staticmethod
    def from_event(event: dict[str, Any]) -> TransferProgress:
        return TransferProgress(transfer_id=_str(event, "transfer_id"),
                                bytes=_int(event, "bytes"), rate_bps=_int(event, "rate_bps"))
