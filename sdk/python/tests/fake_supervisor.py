"""A scripted stand-in for `airlock serve` on a Unix socket (or loopback TCP), for the unit tests:
each test routes (method, path) to a function that answers, and reads back what the SDK sent."""

from __future__ import annotations

import json
import os
import socketserver
import tempfile
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    chunked: bool

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Answer:
    status: int = 200
    body: bytes | Iterable[bytes] = b""
    content_type: str = "application/json"
    close: bool = False  # close the connection after the answer
    headers: dict[str, str] = field(default_factory=dict)


def json_answer(value: Any, status: int = 200) -> Answer:
    return Answer(status, json.dumps(value).encode())


def error_answer(status: int, code: str, message: str, **extra: Any) -> Answer:
    return json_answer({"error": {"code": code, "message": message, **extra}}, status)


def ndjson(events: list[dict[str, Any] | Callable[[], None]]) -> Answer:
    """A chunked NDJSON stream; a callable in the list runs between events (to wait on the
    client, for example)."""

    class Lines:  # iterable again for each request the route answers
        def __iter__(self) -> Iterator[bytes]:
            for e in events:
                if callable(e):
                    e()
                else:
                    yield (json.dumps(e) + "\n").encode()

    return Answer(200, Lines(), "application/x-ndjson")


def frames(items: list[tuple[str, bytes | dict[str, Any]]]) -> Answer:
    """A chunked stream of frames (docs/api.md): ("o"|"e", bytes) output, ("j", event) JSON."""

    class Frames:
        def __iter__(self) -> Iterator[bytes]:
            for kind, payload in items:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                yield kind.encode() + len(data).to_bytes(4, "big") + data

    return Answer(200, Frames(), "application/vnd.airlock.frames")


Route = Callable[[Request], Answer]


@dataclass
class FakeSupervisor:
    routes: dict[tuple[str, str], Route] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    tcp: bool = False

    def __post_init__(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                fake.connections += 1

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def handle_one_request(self) -> None:
                try:
                    super().handle_one_request()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def _dispatch(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                chunked = self.headers.get("Transfer-Encoding", "").lower() == "chunked"
                if chunked:
                    body = self._read_chunked()
                else:
                    body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = Request(self.command, url.path, urllib.parse.parse_qs(url.query),
                                  {k.lower(): v for k, v in self.headers.items()}, body, chunked)
                fake.requests.append(request)
                route = fake.routes.get((self.command, url.path))
                answer = route(request) if route else error_answer(
                    404, "not_found", f"no route {self.command} {url.path}")
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                if answer.close:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                if isinstance(answer.body, (bytes, bytearray)):
                    if answer.status != 204:
                        self.send_header("Content-Length", str(len(answer.body)))
                    self.end_headers()
                    self.wfile.write(answer.body)
                else:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for chunk in answer.body:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            do_GET = do_POST = do_PUT = do_DELETE = _dispatch

            def _read_chunked(self) -> bytes:
                out = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()

        self._dir = tempfile.mkdtemp(prefix="airlock-fake-")
        self.socket_path = os.path.join(self._dir, "airlock.sock")
        server: socketserver.ThreadingTCPServer | socketserver.ThreadingUnixStreamServer
        if self.tcp:
            server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
            self.url = f"http://127.0.0.1:{server.server_address[1]}"
        else:
            server = socketserver.ThreadingUnixStreamServer(self.socket_path, Handler)
            self.url = f"unix://{self.socket_path}"
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,),
                                        daemon=True)
        self._thread.start()

    def route(self, method: str, path: str, answer: Route | Answer) -> None:
        if isinstance(answer, Answer):
            fixed = answer
            self.routes[(method, path)] = lambda _request: fixed
        else:
            self.routes[(method, path)] = answer

    def last(self, method: str | None = None, path: str | None = None) -> Request:
        for r in reversed(self.requests):
            if (method is None or r.method == method) and (path is None or r.path == path):
                return r
        raise AssertionError(f"no request {method} {path}; got "
                             f"{[(r.method, r.path) for r in self.requests]}")

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        os.rmdir(self._dir)


SANDBOX = {
    "id": "3f2a9c0d1e4b5a67", "name": "analysis-42", "tenant": "default", "profile": "default",
    "language": "python", "state": "running", "metadata": {"user": "u1"}, "persistent": False,
    "created_at": 1795000000000, "last_active_at": 1795000004000, "keep_alive_s": 300,
    "idle_expires_at": 1795000304000, "lifetime_s": 3600, "ends_at": 1795003600000,
    "commands_running": 0, "contexts": 1, "mounts": [],
}
SB_PATH = "/v1/sandboxes/3f2a9c0d1e4b5a67"


def create_sandbox(request: Request) -> Answer:
    """POST /v1/sandboxes as the supervisor answers it: SANDBOX, with the requested mounts
    echoed and their defaults filled (path /mnt/ROOT[/sub/dir], writable false); a source that
    is not hostdir:, or a path outside /mnt, is a 400 as from the real one."""
    body = request.json() if request.body else {}
    mounts = []
    for m in body.get("mounts", []):
        source = m.get("source", "")
        if not source.startswith("hostdir:") or not source[len("hostdir:"):]:
            return error_answer(400, "bad_request", f"mounts: bad source '{source}'")
        path = m.get("path", "/mnt/" + source[len("hostdir:"):])
        if not path.startswith("/mnt/"):
            return error_answer(400, "bad_request", f"mounts: path '{path}' is not under /mnt")
        mounts.append({"source": source, "path": path, "writable": m.get("writable", False)})
    return json_answer(dict(SANDBOX, mounts=mounts), 201)
