"""E2B-compatible API on airlock: code written for E2B's code interpreter SDK runs with only its
import changed,

    from airlock.e2b import Sandbox          # was: from e2b_code_interpreter import Sandbox

    with Sandbox.create() as sandbox:
        sandbox.run_code("x = 1")
        execution = sandbox.run_code("x+=1; x")
        print(execution.text)  # 2

and `AsyncSandbox` likewise for asyncio. The supervisor is AIRLOCK_URL (or `domain=`/`url=`),
the token AIRLOCK_TOKEN (or `api_key=`), and `template` names an airlock profile. What maps
how, and what is refused and why, is in docs/e2b.md.
"""

from airlock.e2b.async_sandbox import (
    AsyncCommandHandle,
    AsyncCommands,
    AsyncFilesystem,
    AsyncSandbox,
    AsyncWatchHandle,
)
from airlock.e2b.exceptions import (
    AuthenticationException,
    CommandExitException,
    InvalidArgumentException,
    NotEnoughSpaceException,
    NotFoundException,
    RateLimitException,
    SandboxException,
    TimeoutException,
)
from airlock.e2b.models import (
    ChartData,
    ChartType,
    CommandResult,
    FilesystemEvent,
    FilesystemEventType,
    OutputMessage,
    ProcessInfo,
    SandboxInfo,
    SandboxMetrics,
    WriteEntry,
)
from airlock.e2b.sandbox import CommandHandle, Commands, Filesystem, Sandbox, WatchHandle
from airlock.models import (
    Context,
    EntryInfo,
    Execution,
    ExecutionError,
    FileType,
    Logs,
    Result,
    WriteInfo,
)

__all__ = [
    "AsyncCommandHandle",
    "AsyncCommands",
    "AsyncFilesystem",
    "AsyncSandbox",
    "AsyncWatchHandle",
    "AuthenticationException",
    "ChartData",
    "ChartType",
    "CommandExitException",
    "CommandHandle",
    "CommandResult",
    "Commands",
    "Context",
    "EntryInfo",
    "Execution",
    "ExecutionError",
    "FileType",
    "Filesystem",
    "FilesystemEvent",
    "FilesystemEventType",
    "InvalidArgumentException",
    "Logs",
    "NotEnoughSpaceException",
    "NotFoundException",
    "OutputMessage",
    "ProcessInfo",
    "RateLimitException",
    "Result",
    "Sandbox",
    "SandboxException",
    "SandboxInfo",
    "SandboxMetrics",
    "TimeoutException",
    "WatchHandle",
    "WriteEntry",
    "WriteInfo",
]
