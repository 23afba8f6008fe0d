"""HTTP/1.1 to the supervisor over a Unix socket or loopback TCP, with keep-alive connections,
event streams (as frames, or NDJSON from a supervisor without them) read as they arrive, and raw
byte bodies streamed both ways.

Where the supervisor is: `url=` if given, else `AIRLOCK_URL`, else the default socket; the token
likewise from `token=` or `AIRLOCK_TOKEN`. A request without a token on the Unix socket is tenant
`default` (docs/api.md).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airlock.errors import (
    ConfigurationError,
    SupervisorUnavailableError,
    TimeoutError,
    error_from_response,
)

DEFAULT_URL = "unix:///run/airlock/airlock.sock"
# Ordinary calls (create, list, files, ...) answer in milliseconds; a minute means a stuck
# supervisor, not a slow one. Code runs and commands wait as long as their own timeout instead.
DEFAULT_REQUEST_TIMEOUT = 60.0
# The supervisor closes a connection idle for 60 s; one idle for longer than this is not reused.
_IDLE_REUSE_LIMIT = 45.0
_STREAM_CHUNK = 1 << 18
# Event streams as frames (docs/api.md): output arrives as its own bytes, with no JSON escaping
# or base64 to undo, 5 bytes of framing per chunk. NDJSON stays the fallback.
FRAMES_TYPE = "application/vnd.airlock.frames"
_FRAME_STREAMS = {ord("o"): "stdout", ord("e"): "stderr"}

Query = Mapping[str, str] | Sequence[tuple[str, str]] | None


@dataclass(frozen=True)
class Endpoint:
    """A parsed supervisor address: a Unix socket path, or a TCP host and port."""

    url: str
    socket_path: str | None = None
    host: str | None = None
    port: int | None = None

    @staticmethod
    def parse(url: str) -> Endpoint:
        if url.startswith("unix://"):
            path = urllib.parse.unquote(url[len("unix://"):])
            if not path.startswith("/"):
                raise ConfigurationError(
                    f"airlock URL {url!r}: a Unix socket URL needs an absolute path, "
                    "as in unix:///run/airlock/airlock.sock")
            return Endpoint(url=url, socket_path=path)
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme == "http":
            if not parsed.hostname:
                raise ConfigurationError(f"airlock URL {url!r}: no host, as in http://127.0.0.1:8080")
            if parsed.path not in ("", "/") or parsed.query or parsed.fragment:
                raise ConfigurationError(
                    f"airlock URL {url!r}: expected only a host and port, got path "
                    f"{parsed.path!r}")
            try:
                port = parsed.port or 80
            except ValueError as e:
                raise ConfigurationError(f"airlock URL {url!r}: bad port ({e})") from None
            return Endpoint(url=url, host=parsed.hostname, port=port)
        raise ConfigurationError(
            f"airlock URL {url!r}: expected unix:///path/to.sock or http://127.0.0.1:PORT "
            f"(scheme {parsed.scheme or 'missing'!r} is not supported)")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None) -> None:
        super().__init__("localhost", timeout=timeout)
        self._socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._socket_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class _PooledConnection:
    def __init__(self, conn: http.client.HTTPConnection) -> None:
        self.conn = conn
        self.idle_since = time.monotonic()
        self.used = False


class Response:
    """An answer whose body is still to be read: for NDJSON streams and raw downloads. Closing it
    before the end closes the connection (the supervisor then stops the work, for commands);
    reading it to the end returns the connection to the pool."""

    def __init__(self, transport: Transport, pooled: _PooledConnection,
                 raw: http.client.HTTPResponse, what: str, timeout: float | None) -> None:
        self._transport = transport
        self._timeout = timeout
        self._pooled: _PooledConnection | None = pooled
        self.raw = raw
        self.status = raw.status
        self._what = what

    def headers(self) -> http.client.HTTPMessage:
        return self.raw.headers

    def chunks(self, size: int = _STREAM_CHUNK) -> Iterator[bytes]:
        try:
            yield from self._body(size)
        finally:
            self.close()

    def events(self) -> Iterator[dict[str, Any]]:
        """The stream's events, each as soon as it is complete. Output events from frames carry
        their bytes under "bytes"; from NDJSON, "data" or "data_base64" (models.event_bytes reads
        both)."""
        framed = self.raw.getheader("Content-Type", "").startswith(FRAMES_TYPE)
        try:
            yield from (self._frames if framed else self._lines)(self._body(_STREAM_CHUNK))
        finally:
            self.close()

    def _body(self, size: int) -> Iterator[bytes]:
        while True:
            chunk = self._read(size)
            if not chunk:
                return
            yield chunk

    def _frames(self, body: Iterator[bytes]) -> Iterator[dict[str, Any]]:
        pending = bytearray()
        for chunk in body:
            pending += chunk
            at = 0
            while len(pending) - at >= 5:
                size = int.from_bytes(pending[at + 1:at + 5], "big")
                if len(pending) - at - 5 < size:
                    break
                kind, payload = pending[at], bytes(pending[at + 5:at + 5 + size])
                at += 5 + size
                stream = _FRAME_STREAMS.get(kind)
                if stream is not None:
                    yield {"type": stream, "bytes": payload}
                elif kind == ord("j"):
                    yield self._decode(payload)
                else:
                    raise SupervisorUnavailableError(
                        f"{self._what}: the supervisor sent a frame of unknown kind {kind}")
            del pending[:at]
        if pending:
            raise SupervisorUnavailableError(
                f"{self._what}: the stream ended inside a frame ({len(pending)} bytes left)")

    def _lines(self, body: Iterator[bytes]) -> Iterator[dict[str, Any]]:
        pending = bytearray()
        for chunk in body:
            pending += chunk
            if b"\n" not in chunk:
                continue  # a long event still arriving
            *lines, rest = bytes(pending).split(b"\n")
            pending = bytearray(rest)
            for line in lines:
                if line.strip():
                    yield self._decode(line)
        if pending.strip():
            yield self._decode(bytes(pending))

    def close(self) -> None:
        pooled, self._pooled = self._pooled, None
        if pooled is None:
            return
        if not self.raw.isclosed() and not self.raw.chunked and self.raw.length == 0:
            self.raw.read()  # read1 leaves a fully read Content-Length answer open; this ends it
        if self.raw.isclosed():  # read to the end: the connection can carry the next request
            self._transport._release(pooled)
        else:
            pooled.conn.close()

    def _read(self, size: int) -> bytes:
        try:
            return self.raw.read1(size)
        except socket.timeout:
            self.close()
            raise TimeoutError(f"{self._what}: the supervisor sent nothing for "
                               f"{self._timeout or 0:g} s") from None
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise SupervisorUnavailableError(
                f"{self._what}: lost the connection to the supervisor mid-answer ({e})") from None

    def _decode(self, line: bytes) -> dict[str, Any]:
        try:
            event = json.loads(line)
        except ValueError:
            raise SupervisorUnavailableError(
                f"{self._what}: the supervisor sent a line that is not JSON: "
                f"{line[:200]!r}") from None
        if not isinstance(event, dict):
            raise SupervisorUnavailableError(
                f"{self._what}: the supervisor sent an event that is not an object: {line[:200]!r}")
        return event

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Transport:
    """Requests to one supervisor. Thread-safe: each request takes an idle keep-alive connection
    or opens one, so callbacks and background readers can call the API while a stream is open."""

    def __init__(self, url: str | None = None, token: str | None = None,
                 request_timeout: float | None = None) -> None:
        self.url = url or os.environ.get("AIRLOCK_URL") or DEFAULT_URL
        self.endpoint = Endpoint.parse(self.url)
        self.token = token if token is not None else os.environ.get("AIRLOCK_TOKEN") or None
        if self.token is not None and any(c in self.token for c in "\r\n"):
            raise ConfigurationError("airlock token: contains a line break")
        self.request_timeout = DEFAULT_REQUEST_TIMEOUT if request_timeout is None else request_timeout
        self._idle: list[_PooledConnection] = []
        self._lock = threading.Lock()

    # ---- the calls the rest of the SDK makes ----

    def json(self, method: str, path: str, body: Mapping[str, Any] | None = None,
             query: Query = None, timeout: float | None = None) -> Any:
        """One request with an optional JSON body; the decoded JSON answer (None for 204)."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        with self.open(method, path, data, headers=headers, query=query, timeout=timeout) as r:
            payload = b"".join(r.chunks())
        if not payload:
            return None
        try:
            return json.loads(payload)
        except ValueError:
            raise SupervisorUnavailableError(
                f"{method} {path}: the supervisor answered {r.status} with a body that is not "
                f"JSON: {payload[:200]!r}") from None

    def stream(self, method: str, path: str, body: Mapping[str, Any] | None = None,
               query: Query = None, timeout: float | None = None) -> Response:
        """A request whose event stream is read with `.events()`. `timeout` None waits as long as
        the supervisor takes: it enforces the run's own timeout, and a review hold parks the
        request until an operator decides."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        headers["Accept"] = f"{FRAMES_TYPE}, application/x-ndjson"
        return self.open(method, path, data, headers=headers, query=query, timeout=timeout,
                         default_timeout=False)

    def open(self, method: str, path: str, body: bytes | Iterable[bytes] | None = None, *,
             headers: Mapping[str, str] | None = None, query: Query = None,
             timeout: float | None = None, default_timeout: bool = True) -> Response:
        """Sends a request and returns its answer once the status line is in; raises the mapped
        error for a status >= 400. A body that is an iterable of bytes is sent chunked."""
        target = path + ("?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
                         if query else "")
        what = f"{method} {path}"
        all_headers = {"Host": "airlock"}
        if self.token:
            all_headers["Authorization"] = f"Bearer {self.token}"
        all_headers.update(headers or {})
        if timeout is None and default_timeout:
            timeout = self.request_timeout
        # A reused connection the server closed meanwhile fails before the request reaches it:
        # that one is retried on a fresh connection. A one-shot iterator body cannot be resent,
        # so it always goes on a fresh connection.
        replayable = body is None or isinstance(body, (bytes, bytearray))
        for attempt in (0, 1):
            pooled = self._acquire(timeout, fresh=attempt == 1 or not replayable)
            reused = pooled.used
            pooled.used = True
            try:
                pooled.conn.request(method, target, body=body, headers=all_headers)
                raw = pooled.conn.getresponse()
            except socket.timeout:
                pooled.conn.close()
                raise TimeoutError(f"{what}: no answer from the supervisor at {self.url} "
                                   f"within {timeout:g} s") from None
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                pooled.conn.close()
                if reused and replayable and attempt == 0:
                    continue
                raise SupervisorUnavailableError(
                    f"{what}: the supervisor at {self.url} closed the connection ({e})") from None
            except OSError as e:
                pooled.conn.close()
                raise SupervisorUnavailableError(self._cannot_connect(what, e)) from None
            response = Response(self, pooled, raw, what, timeout)
            if raw.status >= 400:
                payload = b"".join(response.chunks())
                raise error_from_response(raw.status, payload, what)
            return response
        raise AssertionError("unreachable: the second attempt returns or raises")

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for pooled in idle:
            pooled.conn.close()

    def __del__(self) -> None:
        # A sandbox object dropped without kill() (it lives on, to connect to later) lets go of
        # its idle connections here instead of leaving them to the socket finalizers.
        if hasattr(self, "_lock"):  # not when __init__ refused the address
            self.close()

    # ---- connections ----

    def _acquire(self, timeout: float | None, fresh: bool) -> _PooledConnection:
        now = time.monotonic()
        with self._lock:
            while self._idle and not fresh:
                pooled = self._idle.pop()
                if now - pooled.idle_since < _IDLE_REUSE_LIMIT:
                    pooled.conn.timeout = timeout
                    if pooled.conn.sock is not None:
                        pooled.conn.sock.settimeout(timeout)
                    return pooled
                pooled.conn.close()
        conn: http.client.HTTPConnection
        if self.endpoint.socket_path is not None:
            conn = _UnixConnection(self.endpoint.socket_path, timeout)
        else:
            assert self.endpoint.host is not None
            conn = http.client.HTTPConnection(self.endpoint.host, self.endpoint.port,
                                              timeout=timeout)
        return _PooledConnection(conn)

    def _release(self, pooled: _PooledConnection) -> None:
        pooled.idle_since = time.monotonic()
        with self._lock:
            self._idle.append(pooled)

    def _cannot_connect(self, what: str, error: OSError) -> str:
        where = self.url
        hint = ""
        if self.endpoint.socket_path is not None:
            if not os.path.exists(self.endpoint.socket_path):
                hint = " (no socket there: is `airlock serve` running? AIRLOCK_URL points elsewhere?)"
            elif isinstance(error, PermissionError):
                hint = " (permission denied: the socket's group is set by the policy's [server])"
        elif isinstance(error, ConnectionRefusedError):
            hint = " (connection refused: is `airlock serve` listening there with server.tcp?)"
        return f"{what}: cannot reach the airlock supervisor at {where}: {error.strerror or error}{hint}"


def quote(segment: str) -> str:
    """One path segment (a sandbox name, a command id) percent-encoded."""
    return urllib.parse.quote(segment, safe="")
