"""Pieces the blocking and asyncio E2B classes share: converting the native SDK's values and
callbacks to E2B's shapes, command results, and the polling behind `watch_dir`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from airlock.e2b.exceptions import CommandExitException, InvalidArgumentException
from airlock.e2b.models import (
    CommandResult,
    FilesystemEvent,
    FilesystemEventType,
    OutputMessage,
    ProcessInfo,
    chart_of,
    now_ns,
)
from airlock.models import CommandInfo, EntryInfo, Execution, Result
from airlock.models import CommandResult as NativeCommandResult
from airlock.models import OutputMessage as NativeOutputMessage

# How often watch_dir lists the directory: the API has no watch route, so changes are found by
# comparing listings.
WATCH_INTERVAL_S = 0.25


def e2b_result(result: Result) -> Result:
    """The native Result with `chart` readable as attributes (E2B's chart objects)."""
    if isinstance(result.chart, dict):
        result.chart = chart_of(result.chart)  # type: ignore[assignment]
    return result


def e2b_execution(execution: Execution) -> Execution:
    for result in execution.results:
        e2b_result(result)
    return execution


def output_callback(fn: Callable[[OutputMessage], Any] | None
                    ) -> Callable[[NativeOutputMessage], Any] | None:
    """Wraps an E2B run_code output callback: it gets E2B's OutputMessage (timestamp in ns).
    A coroutine function's awaitable is passed back so the asyncio runner awaits it."""
    if fn is None:
        return None
    return lambda m: fn(OutputMessage(m.line, now_ns(), m.error))


def result_callback(fn: Callable[[Result], Any] | None) -> Callable[[Result], Any] | None:
    if fn is None:
        return None
    return lambda r: fn(e2b_result(r))


def check_language_and_context(language: str | None, context: Any) -> None:
    if language is not None and context is not None:
        raise InvalidArgumentException(
            "run_code: give language= or context=, not both (a context has its own language)")


def command_result(native: NativeCommandResult) -> CommandResult:
    """E2B's CommandResult; raises CommandExitException for a non-zero exit, as E2B does. A
    command ended by a signal has exit code -1 and says which signal in `error`."""
    error = native.error
    exit_code = native.exit_code
    if exit_code is None:
        exit_code = -1
        if native.signal is not None:
            error = error or f"killed by signal {native.signal}"
    result = CommandResult(stdout=native.stdout, stderr=native.stderr, exit_code=exit_code,
                           error=error)
    if exit_code != 0:
        raise CommandExitException(result.stdout, result.stderr, exit_code, error)
    return result


def process_info(info: CommandInfo) -> ProcessInfo:
    return ProcessInfo(pid=info.pid or 0, tag=info.command_id,
                       cmd=info.argv[0] if info.argv else "", args=info.argv[1:])


def command_id_of(pid: int, commands: Iterable[CommandInfo]) -> str | None:
    """E2B names commands by pid; the API by command id."""
    for info in commands:
        if info.pid == pid and info.state == "running":
            return info.command_id
    return None


Snapshot = dict[str, tuple[str, int, float | None, int]]


def snapshot(entries: Iterable[EntryInfo], root: str) -> Snapshot:
    prefix = root.rstrip("/") + "/"
    out: Snapshot = {}
    for e in entries:
        name = e.path[len(prefix):] if e.path.startswith(prefix) else e.name
        out[name] = (e.type.value, e.size,
                     e.modified_time.timestamp() if e.modified_time else None, e.mode)
    return out


def changes(before: Snapshot, after: Snapshot) -> list[FilesystemEvent]:
    """What changed between two listings: created, removed, written (size or mtime), or chmod.
    A rename shows as a remove and a create: listings cannot tell them apart."""
    events: list[FilesystemEvent] = []
    for name in sorted(after):
        old = before.get(name)
        new = after[name]
        if old is None:
            events.append(FilesystemEvent(name, FilesystemEventType.CREATE))
        elif old[0] != new[0]:
            events.append(FilesystemEvent(name, FilesystemEventType.REMOVE))
            events.append(FilesystemEvent(name, FilesystemEventType.CREATE))
        elif old[1] != new[1] or old[2] != new[2]:
            events.append(FilesystemEvent(name, FilesystemEventType.WRITE))
        elif old[3] != new[3]:
            events.append(FilesystemEvent(name, FilesystemEventType.CHMOD))
    for name in sorted(set(before) - set(after)):
        events.append(FilesystemEvent(name, FilesystemEventType.REMOVE))
    return events
