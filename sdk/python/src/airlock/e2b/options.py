"""How E2B's arguments map onto airlock, shared by the blocking and the asyncio classes: where
the supervisor is (api_key, domain), E2B's cloud-only options (accepted where harmless,
refused with the reason otherwise), `user`, and E2B's timeout as airlock's keep-alive and
lifetime. docs/e2b.md describes each mapping."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from airlock.e2b.exceptions import InvalidArgumentException
from airlock.models import SandboxInfo

# E2B's defaults, in seconds (E2B's Python SDK takes seconds).
DEFAULT_SANDBOX_TIMEOUT = 300
DEFAULT_COMMAND_TIMEOUT = 60

# Options of E2B's Sandbox.create/connect that name E2B cloud features. Each is refused with
# why when given a value other than its default; None means "not given".
_REFUSED: dict[str, str] = {
    "allow_internet_access": "network access is the airlock profile's [network] setting "
                             "(docs/policy.md): pick a profile with template=",
    "network": "network rules are the airlock profile's [network] setting (docs/policy.md): "
               "pick a profile with template=",
    "proxy": "it sets the HTTP proxy for E2B's cloud API; the SDK talks to the supervisor at "
             "AIRLOCK_URL directly",
    "debug": "it points E2B's SDK at a local debug envd; use AIRLOCK_URL to pick a supervisor",
    "auto_pause": "airlock sandboxes are not paused and resumed; set a longer timeout instead",
    "lifecycle": "airlock sandboxes end at their timeout (keep-alive and lifetime); see "
                 "docs/e2b.md",
    "on_timeout": "airlock sandboxes end at their timeout (keep-alive and lifetime); see "
                  "docs/e2b.md",
    "mcp": "E2B's MCP gateway inside the sandbox has no airlock equivalent; `airlock serve` "
           "serves MCP itself at /mcp",
    "volume_mounts": "use mounts= of the native airlock.Sandbox (operator-declared host "
                     "directories, docs/transfer.md)",
}
# Accepted and without effect, because airlock already behaves that way.
_ACCEPTED = {
    "secure": "every request is authorised by the tenant token (api_key); there is no "
              "separate access token to turn on or off",
}


def supervisor_address(api_key: str | None, domain: str | None,
                       url: str | None) -> tuple[str | None, str | None]:
    """(url, token) for the transport. `api_key` is the airlock tenant token (AIRLOCK_TOKEN
    when None; E2B_API_KEY is never read, it is a key for E2B's cloud). `domain` names the
    supervisor: a URL (unix://, http://, https://) as is, a bare host[:port] as https://."""
    if domain is not None and url is not None:
        raise InvalidArgumentException("give either domain= or url= for the supervisor, not both")
    if domain is not None:
        if not isinstance(domain, str) or not domain:
            raise InvalidArgumentException(f"domain must be a non-empty str, got {domain!r}")
        url = domain if "://" in domain else f"https://{domain}"
    return url, api_key


def check_options(options: Mapping[str, Any], what: str) -> None:
    for name, value in options.items():
        if name in _ACCEPTED:
            continue
        reason = _REFUSED.get(name)
        if reason is None:
            raise TypeError(f"{what}() got an unexpected keyword argument {name!r}")
        if value is not None:
            raise InvalidArgumentException(f"{what}: {name}= is not supported by airlock: {reason}")


def check_user(user: str | None, what: str) -> None:
    """Sandboxes run everything as one unprivileged user; E2B's default "user" is that one."""
    if user is None or user == "user":
        return
    if user == "root":
        raise InvalidArgumentException(
            f"{what}: user='root' is refused: an airlock sandbox runs everything as one "
            "unprivileged user (no root, no sudo, by design); leave user unset or 'user'")
    raise InvalidArgumentException(
        f"{what}: user={user!r} is refused: an airlock sandbox has a single user, 'user'")


def sandbox_seconds(timeout: float | None) -> int:
    """E2B's sandbox timeout (seconds, default 300) as whole seconds for the API."""
    if timeout is None:
        return DEFAULT_SANDBOX_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise InvalidArgumentException(
            f"timeout must be a number of seconds > 0, got {timeout!r}")
    return int(math.ceil(timeout))


def keepalive_for(info: SandboxInfo, timeout: float) -> dict[str, int]:
    """E2B's `set_timeout(t)`: the sandbox ends t seconds from now whether used or idle. In
    airlock terms: an idle allowance of t (so idleness cannot end it sooner) and a lifetime
    that ends t from now (the API's lifetime counts from the sandbox's creation)."""
    seconds = sandbox_seconds(timeout)
    now_ms = info.raw.get("last_active_at")  # the supervisor's clock: this GET touched it
    if not isinstance(now_ms, int) or isinstance(now_ms, bool):
        now_ms = int(time.time() * 1000)
    created_ms = info.raw.get("created_at")
    if not isinstance(created_ms, int) or isinstance(created_ms, bool):
        created_ms = now_ms
    elapsed = max(0.0, (now_ms - created_ms) / 1000)
    return {"keep_alive_s": seconds, "lifetime_s": int(math.ceil(elapsed + seconds))}


def command_timeout(timeout: float | None) -> float | None:
    """E2B's command timeout: seconds, default 60, 0 for none (airlock: the profile's limit)."""
    if timeout is None:
        return DEFAULT_COMMAND_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise InvalidArgumentException(f"timeout must be a number of seconds >= 0, got {timeout!r}")
    return None if timeout == 0 else float(timeout)


def code_timeout(timeout: float | None) -> float | None:
    """E2B's run_code timeout: seconds; None or 0 leave it to the profile's limit."""
    if timeout is None or timeout == 0:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise InvalidArgumentException(f"timeout must be a number of seconds >= 0, got {timeout!r}")
    return float(timeout)


def shell_command(cmd: str) -> str:
    if not isinstance(cmd, str):
        raise InvalidArgumentException(
            f"commands.run: cmd must be a str (run by bash), got {type(cmd).__name__}")
    return cmd
