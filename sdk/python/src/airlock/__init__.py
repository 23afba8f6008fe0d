"""airlock: run AI-agent code in airlock sandboxes from Python.

    from airlock import Sandbox

    with Sandbox.create() as sbx:
        execution = sbx.run_code("x = 41\nx + 1")
        print(execution.text)  # 42

The supervisor is found through AIRLOCK_URL (unix:///path.sock or http://127.0.0.1:PORT) and
AIRLOCK_TOKEN, or `url=`/`token=`; the default is unix:///run/airlock/airlock.sock.
"""

from airlock.async_sandbox import AsyncSandbox
from airlock.commands import AsyncCommandHandle, AsyncCommands, CommandHandle, Commands
from airlock.errors import (
    AirlockError,
    AuthenticationError,
    ConfigurationError,
    ConflictError,
    DeniedByReview,
    ForbiddenError,
    InternalError,
    InvalidRequestError,
    NotFoundError,
    QuotaExceededError,
    SupervisorUnavailableError,
    TimeoutError,
    TransferError,
)
from airlock.files import AsyncFiles, Files
from airlock.models import (
    AuditSummary,
    CommandInfo,
    CommandResult,
    Connection,
    Context,
    EntryInfo,
    Execution,
    ExecutionError,
    FileType,
    Logs,
    Mount,
    OutputMessage,
    Result,
    SandboxInfo,
    SandboxMetrics,
    TransferProgress,
    TransferRecord,
    WriteInfo,
)
from airlock.sandbox import Sandbox
from airlock.transport import NO_RETRIES, RetryPolicy

__version__ = "0.1.0"

__all__ = [
    "AirlockError",
    "AsyncCommandHandle",
    "AsyncCommands",
    "AsyncFiles",
    "AsyncSandbox",
    "NO_RETRIES",
    "RetryPolicy",
    "AuthenticationError",
    "CommandHandle",
    "AuditSummary",
    "CommandInfo",
    "CommandResult",
    "Commands",
    "ConfigurationError",
    "ConflictError",
    "Connection",
    "Context",
    "DeniedByReview",
    "EntryInfo",
    "Execution",
    "ExecutionError",
    "FileType",
    "Files",
    "ForbiddenError",
    "InternalError",
    "InvalidRequestError",
    "Logs",
    "Mount",
    "NotFoundError",
    "OutputMessage",
    "QuotaExceededError",
    "Result",
    "Sandbox",
    "SandboxInfo",
    "SandboxMetrics",
    "SupervisorUnavailableError",
    "TimeoutError",
    "TransferError",
    "TransferProgress",
    "TransferRecord",
    "WriteInfo",
]
