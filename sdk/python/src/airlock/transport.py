"""HTTP to the supervisor through httpx, over a Unix socket or TCP (http://, or https:// for a
supervisor serving TLS): pooled keep-alive connections, event streams (as frames, or NDJSON from
a supervisor without them) read as they arrive, raw byte bodies streamed both ways, and retries
with exponential backoff and jitter.

`Transport` is the blocking client (httpx.Client), `AsyncTransport` the asyncio one
(httpx.AsyncClient); everything else here (addresses, the retry policy, decoding events, mapping
errors) is shared by both.

Where the supervisor is: `url=` if given, else `AIRLOCK_URL`, else the default socket; the token
likewise from `token=` or `AIRLOCK_TOKEN`. A request without a token on the Unix socket is tenant
`default` (docs/api.md). For https://, the CA bundle is the system's, or SSL_CERT_FILE /
SSL_CERT_DIR when set (httpx reads them).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from airlock._unix_socket_writes import unix_transport
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
# The supervisor closes a connection idle for 60 s (docs/api.md); httpx drops ours sooner, so a
# request never goes out on a connection the server is closing.
_KEEPALIVE_EXPIRY = 45.0
# Event streams as frames (docs/api.md): output arrives as its own bytes, with no JSON escaping
# or base64 to undo, 5 bytes of framing per chunk. NDJSON stays the fallback.
FRAMES_TYPE = "application/vnd.airlock.frames"
_FRAME_STREAMS = {ord("o"): "stdout", ord("e"): "stderr"}
# Methods that may be sent again after the connection failed mid-request: doing them twice is
# the same as doing them once (RFC 9110 9.2.2).
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
# The statuses the supervisor answers when a limit refuses a request before doing any of it:
# 429 a client's or tenant's limit, 503 the server's own or draining (docs/api.md, Conventions).
_RETRY_STATUSES = frozenset({429, 503})

Query = Mapping[str, str] | Sequence[tuple[str, str]] | None
Body = bytes | Iterable[bytes] | None


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a request is sent again. A request is retried when the
    supervisor refuses it with 429 or 503 (after its `Retry-After` when it sends one, else the
    backoff), and when the connection fails: before anything was sent (any method), or mid-request
    for an idempotent method (GET, PUT, DELETE). A body that is a one-shot iterator (a file being
    streamed up) is never resent.

    The wait before attempt n+1 is the answer's Retry-After (at most `max_retry_after`) when
    there is one, else a random time in [0, min(max_delay, base_delay * 2**n)] ("full
    jitter", so clients refused together do not come back together); `max_attempts` counts the
    first one, so 1 turns retries off."""

    max_attempts: int = 4
    base_delay: float = 0.25
    max_delay: float = 8.0
    # A server's Retry-After is honoured as sent, up to this many seconds.
    max_retry_after: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ConfigurationError(
                f"RetryPolicy.max_attempts must be an int >= 1, got {self.max_attempts!r}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ConfigurationError("RetryPolicy delays must not be negative")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (0-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        return random.uniform(0, min(self.max_delay, self.base_delay * (2 ** attempt)))


NO_RETRIES = RetryPolicy(max_attempts=1)


def retry_after_seconds(value: str | None) -> float | None:
    """A `Retry-After` header: delay-seconds or an HTTP date (RFC 9110 10.2.3)."""
    if not value:
        return None
    value = value.strip()
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True)
class Endpoint:
    """A parsed supervisor address: a Unix socket path, or a TCP host and port."""

    url: str
    socket_path: str | None = None
    host: str | None = None
    port: int | None = None
    tls: bool = False

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
        if parsed.scheme in ("http", "https"):
            if not parsed.hostname:
                raise ConfigurationError(f"airlock URL {url!r}: no host, as in http://127.0.0.1:8080")
            if parsed.path not in ("", "/") or parsed.query or parsed.fragment:
                raise ConfigurationError(
                    f"airlock URL {url!r}: expected only a host and port, got path "
                    f"{parsed.path!r}")
            tls = parsed.scheme == "https"
            try:
                port = parsed.port or (443 if tls else 80)
            except ValueError as e:
                raise ConfigurationError(f"airlock URL {url!r}: bad port ({e})") from None
            return Endpoint(url=url, host=parsed.hostname, port=port, tls=tls)
        raise ConfigurationError(
            f"airlock URL {url!r}: expected unix:///path/to.sock, http://HOST:PORT or "
            f"https://HOST:PORT (scheme {parsed.scheme or 'missing'!r} is not supported)")

    @property
    def base_url(self) -> str:
        """The URL httpx sends to. Over a Unix socket the host part only fills the Host header."""
        if self.socket_path is not None:
            return "http://airlock"
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"


    def public_url(self, path: str) -> str:
        """The URL a client outside this SDK uses for a path the supervisor handed out (a port
        link): the address it was reached at, plus the path."""
        if self.socket_path is not None:
            return self.url.rstrip("/") + path
        return self.base_url + path


class EventDecoder:
    """Turns a stream's bytes into its events, each as soon as it is complete, whether they come
    as frames or as NDJSON (picked by the answer's Content-Type). Output events from frames carry
    their bytes under "bytes"; from NDJSON, "data" or "data_base64" (models.event_bytes reads
    both)."""

    def __init__(self, content_type: str, what: str) -> None:
        self._framed = content_type.startswith(FRAMES_TYPE)
        self._what = what
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        self._pending += chunk
        return self._frames() if self._framed else self._lines(final=False)

    def finish(self) -> list[dict[str, Any]]:
        if self._framed:
            if self._pending:
                raise SupervisorUnavailableError(
                    f"{self._what}: the stream ended inside a frame ({len(self._pending)} "
                    "bytes left)")
            return []
        return self._lines(final=True)

    def _frames(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        pending, at = self._pending, 0
        while len(pending) - at >= 5:
            size = int.from_bytes(pending[at + 1:at + 5], "big")
            if len(pending) - at - 5 < size:
                break
            kind, payload = pending[at], bytes(pending[at + 5:at + 5 + size])
            at += 5 + size
            stream = _FRAME_STREAMS.get(kind)
            if stream is not None:
                events.append({"type": stream, "bytes": payload})
            elif kind == ord("j"):
                events.append(self._decode(payload))
            else:
                raise SupervisorUnavailableError(
                    f"{self._what}: the supervisor sent a frame of unknown kind {kind}")
        del pending[:at]
        return events

    def _lines(self, final: bool) -> list[dict[str, Any]]:
        if not final and b"\n" not in self._pending:
            return []  # a long event still arriving
        *lines, rest = bytes(self._pending).split(b"\n")
        if final:
            lines.append(rest)
            rest = b""
        self._pending = bytearray(rest)
        return [self._decode(line) for line in lines if line.strip()]

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


def _decode_json(payload: bytes, status: int, what: str) -> Any:
    if not payload:
        return None
    try:
        return json.loads(payload)
    except ValueError:
        raise SupervisorUnavailableError(
            f"{what}: the supervisor answered {status} with a body that is not JSON: "
            f"{payload[:200]!r}") from None


class _Base:
    """What the blocking and the asyncio transport share: configuration, requests, errors."""

    def __init__(self, url: str | None, token: str | None, request_timeout: float | None,
                 retry: RetryPolicy | None) -> None:
        self.url = url or os.environ.get("AIRLOCK_URL") or DEFAULT_URL
        self.endpoint = Endpoint.parse(self.url)
        self.token = token if token is not None else os.environ.get("AIRLOCK_TOKEN") or None
        if self.token is not None and any(c in self.token for c in "\r\n"):
            raise ConfigurationError("airlock token: contains a line break")
        self.request_timeout = DEFAULT_REQUEST_TIMEOUT if request_timeout is None else request_timeout
        self.retry = retry or RetryPolicy()
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self._client_args: dict[str, Any] = {
            "base_url": self.endpoint.base_url, "headers": headers,
            "timeout": httpx.Timeout(self.request_timeout),
            # AIRLOCK_URL decides where requests go, never HTTP(S)_PROXY.
            "trust_env": False,
            "limits": httpx.Limits(max_connections=None, max_keepalive_connections=16,
                                   keepalive_expiry=_KEEPALIVE_EXPIRY),
        }
        self._transport_args: dict[str, Any] = {"retries": 0}
        if self.endpoint.socket_path is not None:
            self._transport_args["uds"] = self.endpoint.socket_path
        if self.endpoint.tls:
            # trust_env is off for proxies; the CA bundle variables are still honoured.
            self._transport_args["verify"] = (os.environ.get("SSL_CERT_FILE")
                                              or os.environ.get("SSL_CERT_DIR") or True)

    def _build(self, client: httpx.Client | httpx.AsyncClient, method: str, path: str,
               body: Any, headers: Mapping[str, str] | None, query: Query,
               timeout: float | None, default_timeout: bool) -> httpx.Request:
        if timeout is None and default_timeout:
            timeout = self.request_timeout
        params = list(query.items()) if isinstance(query, Mapping) else list(query or [])
        # httpx's timeout bounds each connect, read and write, not the whole exchange: a long
        # upload or stream lives as long as it keeps moving.
        return client.build_request(method, path, content=body, headers=dict(headers or {}),
                                    params=params or None, timeout=httpx.Timeout(timeout))

    @staticmethod
    def _replayable(body: Any) -> bool:
        return body is None or isinstance(body, (bytes, bytearray))

    def _retryable_error(self, method: str, error: httpx.TransportError, body: Any) -> bool:
        if not self._replayable(body):
            return False
        # Nothing reached the server: safe for any method.
        if isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout)):
            return True
        return method in _IDEMPOTENT and isinstance(
            error, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError))

    def _mapped(self, what: str, error: httpx.TransportError, timeout: float | None) -> Exception:
        if isinstance(error, httpx.TimeoutException):
            return TimeoutError(f"{what}: no answer from the supervisor at {self.url} within "
                                f"{timeout or self.request_timeout:g} s")
        if isinstance(error, httpx.ConnectError):
            return SupervisorUnavailableError(self._cannot_connect(what, error))
        return SupervisorUnavailableError(
            f"{what}: the supervisor at {self.url} closed the connection ({error or type(error).__name__})")

    def _socket_present(self) -> None:
        """A missing socket fails here, before httpcore opens a socket it would not close."""
        path = self.endpoint.socket_path
        if path is not None and not os.path.exists(path):
            raise httpx.ConnectError(f"[Errno 2] No such file or directory: {path!r}")

    def _cannot_connect(self, what: str, error: Exception) -> str:
        hint = ""
        text = str(error)
        if self.endpoint.socket_path is not None:
            if not os.path.exists(self.endpoint.socket_path):
                hint = " (no socket there: is `airlock serve` running? AIRLOCK_URL points elsewhere?)"
            elif "ermission denied" in text:
                hint = " (permission denied: the socket's group is set by the policy's [server])"
        elif "refused" in text:
            hint = " (connection refused: is `airlock serve` listening there with server.tcp?)"
        return f"{what}: cannot reach the airlock supervisor at {self.url}: {text}{hint}"


class Response:
    """An answer whose body is still to be read: for event streams and raw downloads. Closing it
    before the end closes the connection (the supervisor then stops the work, for commands);
    reading it to the end returns the connection to the pool."""

    def __init__(self, raw: httpx.Response, what: str, timeout: float | None) -> None:
        self.raw = raw
        self.status = raw.status_code
        self._what = what
        self._timeout = timeout

    def headers(self) -> httpx.Headers:
        return self.raw.headers

    def chunks(self) -> Iterator[bytes]:
        try:
            yield from self._guarded(self.raw.iter_bytes())
        finally:
            self.close()

    def events(self) -> Iterator[dict[str, Any]]:
        """The stream's events, each as soon as it is complete (EventDecoder)."""
        decoder = EventDecoder(self.raw.headers.get("Content-Type", ""), self._what)
        try:
            for chunk in self._guarded(self.raw.iter_raw()):
                yield from decoder.feed(chunk)
            yield from decoder.finish()
        finally:
            self.close()

    def _guarded(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        try:
            yield from chunks
        except httpx.TimeoutException:
            raise TimeoutError(f"{self._what}: the supervisor sent nothing for "
                               f"{self._timeout or 0:g} s") from None
        except httpx.TransportError as e:
            raise SupervisorUnavailableError(
                f"{self._what}: lost the connection to the supervisor mid-answer ({e})") from None

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Transport(_Base):
    """Blocking requests to one supervisor. Thread-safe (httpx.Client is): callbacks and
    background readers can call the API while a stream is open."""

    def __init__(self, url: str | None = None, token: str | None = None,
                 request_timeout: float | None = None, retry: RetryPolicy | None = None) -> None:
        super().__init__(url, token, request_timeout, retry)
        self._client = self._new_client()

    def _new_client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.HTTPTransport(**self._transport_args),
                            **self._client_args)

    # ---- the calls the rest of the SDK makes ----

    def json(self, method: str, path: str, body: Mapping[str, Any] | None = None,
             query: Query = None, timeout: float | None = None) -> Any:
        """One request with an optional JSON body; the decoded JSON answer (None for 204)."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        with self.open(method, path, data, headers=headers, query=query, timeout=timeout) as r:
            payload = b"".join(r.chunks())
        return _decode_json(payload, r.status, f"{method} {path}")

    def stream(self, method: str, path: str, body: Mapping[str, Any] | None = None,
               query: Query = None, timeout: float | None = None) -> Response:
        """A request whose event stream is read with `.events()`. `timeout` None waits as long as
        the supervisor takes: it enforces the run's own timeout, and a review hold parks the
        request until an operator decides."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": f"{FRAMES_TYPE}, application/x-ndjson"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        return self.open(method, path, data, headers=headers, query=query, timeout=timeout,
                         default_timeout=False)

    def open(self, method: str, path: str, body: Body = None, *,
             headers: Mapping[str, str] | None = None, query: Query = None,
             timeout: float | None = None, default_timeout: bool = True) -> Response:
        """Sends a request (retrying as the RetryPolicy allows) and returns its answer once the
        status line is in; raises the mapped error for a status >= 400. A body that is an
        iterable of bytes is sent chunked."""
        what = f"{method} {path}"
        if self._client.is_closed:  # closed by kill() or close(); the object stays usable
            self._client = self._new_client()
        attempt = 0
        while True:
            request = self._build(self._client, method, path, body, headers, query, timeout,
                                  default_timeout)
            try:
                self._socket_present()
                raw = self._client.send(request, stream=True)
            except httpx.TransportError as e:
                if attempt + 1 < self.retry.max_attempts and self._retryable_error(method, e, body):
                    time.sleep(self.retry.delay(attempt))
                    attempt += 1
                    continue
                raise self._mapped(what, e, timeout) from None
            if raw.status_code < 400:
                return Response(raw, what, timeout)
            try:
                payload = raw.read()
            except httpx.TransportError:
                payload = b""
            finally:
                raw.close()
            if (raw.status_code in _RETRY_STATUSES and self._replayable(body)
                    and attempt + 1 < self.retry.max_attempts):
                time.sleep(self.retry.delay(attempt, retry_after_seconds(
                    raw.headers.get("Retry-After"))))
                attempt += 1
                continue
            raise error_from_response(raw.status_code, payload, what)

    def close(self) -> None:
        self._client.close()

    def __del__(self) -> None:
        # A sandbox object dropped without kill() (it lives on, to connect to later) lets go of
        # its idle connections here instead of leaving them to the socket finalizers.
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()


class AsyncResponse:
    """`Response` for asyncio: `chunks()` and `events()` are async iterators."""

    def __init__(self, raw: httpx.Response, what: str, timeout: float | None) -> None:
        self.raw = raw
        self.status = raw.status_code
        self._what = what
        self._timeout = timeout

    def headers(self) -> httpx.Headers:
        return self.raw.headers

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._guarded(self.raw.aiter_bytes()):
                yield chunk
        finally:
            await self.aclose()

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        decoder = EventDecoder(self.raw.headers.get("Content-Type", ""), self._what)
        try:
            async for chunk in self._guarded(self.raw.aiter_raw()):
                for event in decoder.feed(chunk):
                    yield event
            for event in decoder.finish():
                yield event
        finally:
            await self.aclose()

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    async def _guarded(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        try:
            async for chunk in chunks:
                yield chunk
        except httpx.TimeoutException:
            raise TimeoutError(f"{self._what}: the supervisor sent nothing for "
                               f"{self._timeout or 0:g} s") from None
        except httpx.TransportError as e:
            raise SupervisorUnavailableError(
                f"{self._what}: lost the connection to the supervisor mid-answer ({e})") from None

    async def aclose(self) -> None:
        await self.raw.aclose()

    async def __aenter__(self) -> AsyncResponse:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncTransport(_Base):
    """`Transport` for asyncio, on httpx.AsyncClient: the same calls, awaited."""

    def __init__(self, url: str | None = None, token: str | None = None,
                 request_timeout: float | None = None, retry: RetryPolicy | None = None) -> None:
        super().__init__(url, token, request_timeout, retry)
        self._client = self._new_client()

    def _new_client(self) -> httpx.AsyncClient:
        args = dict(self._transport_args)
        uds = args.pop("uds", None)
        transport = (unix_transport(uds, **args) if uds is not None
                     else httpx.AsyncHTTPTransport(**args))
        return httpx.AsyncClient(transport=transport, **self._client_args)

    async def json(self, method: str, path: str, body: Mapping[str, Any] | None = None,
                   query: Query = None, timeout: float | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        r = await self.open(method, path, data, headers=headers, query=query, timeout=timeout)
        payload = await r.read()
        return _decode_json(payload, r.status, f"{method} {path}")

    async def stream(self, method: str, path: str, body: Mapping[str, Any] | None = None,
                     query: Query = None, timeout: float | None = None) -> AsyncResponse:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": f"{FRAMES_TYPE}, application/x-ndjson"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        return await self.open(method, path, data, headers=headers, query=query, timeout=timeout,
                               default_timeout=False)

    async def open(self, method: str, path: str, body: Any = None, *,
                   headers: Mapping[str, str] | None = None, query: Query = None,
                   timeout: float | None = None, default_timeout: bool = True) -> AsyncResponse:
        what = f"{method} {path}"
        if self._client.is_closed:  # closed by kill() or close(); the object stays usable
            self._client = self._new_client()
        if not self._replayable(body) and not hasattr(body, "__aiter__"):
            body = _async_chunks(body)  # httpx.AsyncClient streams only async iterables
        attempt = 0
        while True:
            request = self._build(self._client, method, path, body, headers, query, timeout,
                                  default_timeout)
            try:
                self._socket_present()
                raw = await self._client.send(request, stream=True)
            except httpx.TransportError as e:
                if attempt + 1 < self.retry.max_attempts and self._retryable_error(method, e, body):
                    await asyncio.sleep(self.retry.delay(attempt))
                    attempt += 1
                    continue
                raise self._mapped(what, e, timeout) from None
            if raw.status_code < 400:
                return AsyncResponse(raw, what, timeout)
            try:
                payload = await raw.aread()
            except httpx.TransportError:
                payload = b""
            finally:
                await raw.aclose()
            if (raw.status_code in _RETRY_STATUSES and self._replayable(body)
                    and attempt + 1 < self.retry.max_attempts):
                await asyncio.sleep(self.retry.delay(attempt, retry_after_seconds(
                    raw.headers.get("Retry-After"))))
                attempt += 1
                continue
            raise error_from_response(raw.status_code, payload, what)

    async def aclose(self) -> None:
        await self._client.aclose()


async def _async_chunks(chunks: Iterable[bytes]) -> AsyncIterator[bytes]:
    """A blocking iterator of chunks (a file object read in pieces) for httpx.AsyncClient.
    Each read is small (1 MiB) and local, so it runs in the event loop's thread."""
    for chunk in chunks:
        yield chunk


def quote(segment: str) -> str:
    """One path segment (a sandbox name, a command id) percent-encoded."""
    return urllib.parse.quote(segment, safe="")
