"""The errors the SDK raises, all under `AirlockError`, and the mapping from the API's error bodies.

Every error the supervisor answers is `{"error": {"code": ..., "message": ...}}` with a 4xx or 5xx
status (docs/api.md, Conventions). The `code` picks the class; the status is the fallback for an
answer without a usable body (a proxy, a crash mid-answer).
"""

from __future__ import annotations

import builtins
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airlock.models import CommandResult, Execution, TransferRecord


class AirlockError(Exception):
    """Base of every error the SDK raises. `status` and `code` are the HTTP status and the API's
    error code when the error came from an answer of the supervisor, else None."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None,
                 body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.body: dict[str, Any] = body or {}

    def __str__(self) -> str:
        return self.message


class ConfigurationError(AirlockError, ValueError):
    """The supervisor's address or token is malformed (AIRLOCK_URL, `url=`, `token=`)."""


class InvalidRequestError(AirlockError):
    """400 `bad_request` (or 405): the request had a wrong field, type or value."""


class AuthenticationError(AirlockError):
    """401 `unauthorized`: the bearer token is missing (TCP) or not valid."""


class ForbiddenError(AirlockError):
    """403 `forbidden`: the tenant may not use this profile."""


class DeniedByReview(ForbiddenError):
    """403 `denied_by_review`: the profile's review chain (or an operator, or the approval deadline)
    refused the code or command before it started. `review` is the verdict object:
    `verdict`, `reviewer`, `rule`, `reason`, `duration_ms`, `cached` (any may be absent)."""

    def __init__(self, message: str, *, review: dict[str, Any], status: int | None = 403,
                 code: str | None = "denied_by_review", body: dict[str, Any] | None = None) -> None:
        super().__init__(message, status=status, code=code, body=body)
        self.review = review

    @property
    def verdict(self) -> str | None:
        return _str_or_none(self.review.get("verdict"))

    @property
    def reviewer(self) -> str | None:
        return _str_or_none(self.review.get("reviewer"))

    @property
    def rule(self) -> str | None:
        return _str_or_none(self.review.get("rule"))

    @property
    def reason(self) -> str | None:
        return _str_or_none(self.review.get("reason"))


class NotFoundError(AirlockError):
    """404 `not_found`: no such sandbox, command, context, file or route (for this tenant)."""


class ConflictError(AirlockError):
    """409 `conflict`: name already taken, sandbox not running, context busy, workspace in use."""


class QuotaExceededError(AirlockError):
    """429 `too_many_requests` (a tenant or host quota) or 413 `payload_too_large` (a body over the
    limit, a file over the workspace quota)."""


class InternalError(AirlockError):
    """500 `internal`: an airlock bug or a host failure; the message names the step."""


class SupervisorUnavailableError(AirlockError):
    """The supervisor cannot be reached (no socket, connection refused, connection lost) or
    answered 503 `unavailable` because it is draining."""


class TimeoutError(AirlockError, builtins.TimeoutError):
    """A code run or command hit its timeout, or the supervisor did not answer in time.

    `run_code` raises it when the run's status is `timeout` (the run was interrupted); what the
    run printed until then is in `execution`. `commands.run` and `CommandHandle.wait` raise it
    when the command was killed by its timeout; its output is in `result`. Also an instance of
    the built-in `TimeoutError`, so `except TimeoutError` works either way."""

    def __init__(self, message: str, *, execution: Execution | None = None,
                 result: CommandResult | None = None) -> None:
        super().__init__(message)
        self.execution = execution
        self.result = result


class TransferError(AirlockError):
    """A transfer ended with a status other than "ok": "error" (a bad archive, a failed download,
    a limit), "denied" (a rule of the profile refused it before any byte moved) or "cancelled".
    `transfer` is the whole record; `code` is its status and the message its `error` text, which
    names the entry, URL or rule."""

    def __init__(self, message: str, *, transfer: TransferRecord) -> None:
        super().__init__(message, code=transfer.status, body=transfer.raw)
        self.transfer = transfer


_BY_CODE: dict[str, type[AirlockError]] = {
    "bad_request": InvalidRequestError,
    "method_not_allowed": InvalidRequestError,
    "unauthorized": AuthenticationError,
    "forbidden": ForbiddenError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "payload_too_large": QuotaExceededError,
    "too_many_requests": QuotaExceededError,
    "internal": InternalError,
    "unavailable": SupervisorUnavailableError,
}

_BY_STATUS: dict[int, type[AirlockError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    403: ForbiddenError,
    404: NotFoundError,
    405: InvalidRequestError,
    409: ConflictError,
    413: QuotaExceededError,
    429: QuotaExceededError,
    500: InternalError,
    503: SupervisorUnavailableError,
}


def error_from_response(status: int, payload: bytes, what: str) -> AirlockError:
    """The error for an answer with status >= 400. `what` names the request ("POST
    /v1/sandboxes") so a message without one from the server still says what failed."""
    body: dict[str, Any] = {}
    try:
        decoded = json.loads(payload) if payload else None
        if isinstance(decoded, dict):
            body = decoded
    except ValueError:
        pass
    error = body.get("error")
    if not isinstance(error, dict):
        error = {}
    code = error.get("code") if isinstance(error.get("code"), str) else None
    message = error.get("message") if isinstance(error.get("message"), str) else None
    if not message:
        text = payload[:200].decode("utf-8", "replace").strip()
        message = f"{what}: HTTP {status}" + (f": {text}" if text else "")
    if code == "denied_by_review":
        review = error.get("review")
        return DeniedByReview(message, review=review if isinstance(review, dict) else {},
                              status=status, code=code, body=body)
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status)
    if cls is None:
        cls = InternalError if status >= 500 else InvalidRequestError
    return cls(message, status=status, code=code, body=body)


def stream_ended_early(what: str, last_event: str) -> SupervisorUnavailableError:
    """A stream that stopped before its last event: the supervisor went away mid-run."""
    return SupervisorUnavailableError(
        f"{what}: the supervisor ended the event stream before the '{last_event}' event "
        "(it stopped or restarted?)")


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
