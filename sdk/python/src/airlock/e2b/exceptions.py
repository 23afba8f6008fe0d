"""E2B's exception names, each also an instance of the matching airlock error, so code written
for either catches them. `translated()` turns the errors of the native SDK into these at the
boundary of every airlock.e2b call."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import airlock.errors as native


class SandboxException(native.AirlockError):
    """Base of the E2B-named errors (E2B's `SandboxException`)."""


class InvalidArgumentException(SandboxException, native.InvalidRequestError):
    """An argument airlock cannot honour (a cloud-only option, `user="root"`, a bad value)."""


class NotFoundException(SandboxException, native.NotFoundError):
    """No such sandbox, context, file or process."""


class AuthenticationException(SandboxException, native.AuthenticationError):
    """The token (E2B's api_key) is missing or wrong."""


class RateLimitException(SandboxException, native.QuotaExceededError):
    """A tenant or host quota was reached, even after the transport's retries."""


class NotEnoughSpaceException(RateLimitException):
    """A file passed the sandbox's workspace quota."""


class TimeoutException(SandboxException, native.TimeoutError):
    """A code run or command hit its timeout, or the supervisor did not answer in time. As in
    the native SDK, `execution` (code runs) or `result` (commands) holds the partial output."""

    def __init__(self, message: str, *, execution: Any = None, result: Any = None) -> None:
        native.TimeoutError.__init__(self, message, execution=execution, result=result)


class CommandExitException(SandboxException):
    """`commands.run` (or `CommandHandle.wait`) of a command that exited non-zero, as in E2B:
    it carries the CommandResult's fields (`stdout`, `stderr`, `exit_code`, `error`)."""

    def __init__(self, stdout: str, stderr: str, exit_code: int, error: str | None) -> None:
        super().__init__(f"Command exited with code {exit_code} and error:\n{stderr or error or ''}")
        self.stdout = stdout
        self.stderr = stderr
        self.exit_code = exit_code
        self.error = error


_BY_NATIVE: list[tuple[type[native.AirlockError], type[SandboxException]]] = [
    (native.TimeoutError, TimeoutException),
    (native.NotFoundError, NotFoundException),
    (native.AuthenticationError, AuthenticationException),
    (native.InvalidRequestError, InvalidArgumentException),
    (native.QuotaExceededError, RateLimitException),
]


_COMBINED: dict[type[native.AirlockError], type[SandboxException]] = {}


def _combined(cls: type[native.AirlockError]) -> type[SandboxException]:
    """A SandboxException that is also the native error's class (ConflictError,
    DeniedByReview, ...), for the errors E2B has no name of its own for."""
    if cls not in _COMBINED:
        _COMBINED[cls] = type(cls.__name__, (SandboxException, cls),
                              {"__module__": __name__, "__doc__": cls.__doc__})
    return _COMBINED[cls]


def to_e2b(error: native.AirlockError) -> SandboxException:
    """The same error (message, status, code, body and any extra fields such as `execution`
    or `review`) as an instance of E2B's class for it."""
    if isinstance(error, SandboxException):
        return error
    if isinstance(error, native.QuotaExceededError) and error.status == 413:
        cls: type[SandboxException] = NotEnoughSpaceException
    else:
        cls = next((e2b for nat, e2b in _BY_NATIVE if isinstance(error, nat)), None) \
            or _combined(type(error))
    translated = cls.__new__(cls)
    translated.args = error.args
    translated.__dict__.update(error.__dict__)
    return translated


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Raises the E2B-named error for any airlock error raised inside."""
    try:
        yield
    except SandboxException:
        raise
    except native.AirlockError as e:
        raise to_e2b(e) from e
