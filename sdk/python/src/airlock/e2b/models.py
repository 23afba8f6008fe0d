"""The E2B-shaped values of airlock.e2b that differ from the native SDK's. Execution, Result,
Logs, ExecutionError, Context, EntryInfo and FileType are the native ones (they already carry
E2B's fields); here are those E2B shapes differently."""

from __future__ import annotations

import datetime
import enum
import time
from dataclasses import dataclass, field
from typing import Any

from airlock.models import SandboxInfo as NativeSandboxInfo
from airlock.models import SandboxMetrics as NativeSandboxMetrics


@dataclass
class OutputMessage:
    """One chunk of a code run's output as E2B's callbacks get it: `timestamp` is Unix time in
    nanoseconds, `error` is True for stderr."""

    line: str
    timestamp: int
    error: bool = False

    def __str__(self) -> str:
        return self.line


def now_ns() -> int:
    return time.time_ns()


class ChartType(str, enum.Enum):
    LINE = "line"
    SCATTER = "scatter"
    BAR = "bar"
    PIE = "pie"
    BOX_AND_WHISKER = "box_and_whisker"
    SUPERCHART = "superchart"
    UNKNOWN = "unknown"


class ChartData:
    """A chart (or one of its elements) read as attributes, as E2B's chart classes are:
    `chart.type`, `chart.title`, `chart.x_label`, `chart.elements[0].points`. Missing keys are
    None. `to_dict()` gives the JSON object back."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        value = self._data.get(name)
        if name == "type" and isinstance(value, str):
            try:
                return ChartType(value)
            except ValueError:
                return value
        return _wrap(value)

    def to_dict(self) -> dict[str, Any]:
        return self._data

    def __eq__(self, other: object) -> bool:
        return self._data == (other._data if isinstance(other, ChartData) else other)

    def __repr__(self) -> str:
        return f"ChartData({self._data!r})"


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return ChartData(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def chart_of(value: dict[str, Any] | None) -> ChartData | None:
    return None if value is None else ChartData(value)


@dataclass
class SandboxInfo:
    """E2B's `SandboxInfo`: `template_id` is the airlock profile, `end_at` when the sandbox ends
    if nothing touches it (the earlier of its idle deadline and its hard end)."""

    sandbox_id: str
    template_id: str
    name: str | None
    metadata: dict[str, str]
    started_at: datetime.datetime | None
    end_at: datetime.datetime | None
    state: str

    @staticmethod
    def from_native(info: NativeSandboxInfo) -> SandboxInfo:
        ends = [t for t in (info.idle_expires_at, info.ends_at) if t is not None]
        return SandboxInfo(sandbox_id=info.id, template_id=info.profile, name=info.name,
                           metadata=dict(info.metadata), started_at=info.created_at,
                           end_at=min(ends) if ends else None, state=info.state)


@dataclass
class SandboxMetrics:
    """E2B's `SandboxMetrics`, from one sample of airlock's `Sandbox.metrics()`. airlock keeps
    no history, so `get_metrics()` answers the one sample read now. `cpu_used_pct` is the
    average since the sandbox started, in percent of one CPU; `cpu_count` is not known to the
    API and is 0. A total airlock cannot give (no limit, or the disk of a gVisor or microVM
    sandbox) is 0."""

    cpu_count: int
    cpu_used_pct: float
    mem_used: int
    mem_total: int
    disk_used: int
    disk_total: int
    timestamp: datetime.datetime | None

    @staticmethod
    def from_native(m: NativeSandboxMetrics) -> SandboxMetrics:
        pct = 100.0 * m.cpu_seconds / m.uptime_s if m.uptime_s > 0 else 0.0
        return SandboxMetrics(cpu_count=0, cpu_used_pct=pct, mem_used=m.memory_bytes,
                              mem_total=m.memory_limit_bytes or 0, disk_used=m.disk_bytes,
                              disk_total=m.disk_limit_bytes or 0, timestamp=m.sampled_at)


@dataclass
class CommandResult:
    """E2B's CommandResult: a finished command's output and exit code."""

    stdout: str
    stderr: str
    exit_code: int
    error: str | None = None


@dataclass
class ProcessInfo:
    """A running command as E2B's `commands.list` gives it. `tag` is airlock's command id."""

    pid: int
    tag: str | None
    cmd: str
    args: list[str]
    envs: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None


@dataclass
class WriteEntry:
    """One file of a multiple-file `files.write`."""

    path: str
    data: str | bytes | Any


class FilesystemEventType(str, enum.Enum):
    CHMOD = "chmod"
    CREATE = "create"
    REMOVE = "remove"
    RENAME = "rename"
    WRITE = "write"


@dataclass
class FilesystemEvent:
    """A change `watch_dir` saw: `name` is the path relative to the watched directory."""

    name: str
    type: FilesystemEventType
