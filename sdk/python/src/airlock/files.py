"""Files inside a sandbox: `sbx.files`. Contents travel as raw bytes (`PUT`/`GET .../files`),
streamed both ways, so a file of any size within the workspace quota goes through without being
held in memory twice or base64-encoded."""

from __future__ import annotations

import builtins
import json
from collections.abc import AsyncIterator, Iterator
from typing import IO, Any, Literal, overload

from airlock.errors import ConflictError, InvalidRequestError, NotFoundError
from airlock.models import EntryInfo, WriteInfo
from airlock.transport import AsyncTransport, Transport, quote

_UPLOAD_CHUNK = 1 << 20


class Files:
    """`sbx.files`. Paths are absolute paths inside the sandbox (relative ones are taken from
    /home/user, the sandbox user's home)."""

    def __init__(self, transport: Transport, sandbox_id: str) -> None:
        self._transport = transport
        self._base = f"/v1/sandboxes/{quote(sandbox_id)}/files"

    def write(self, path: str, data: str | bytes | bytearray | memoryview | IO[Any],
              mode: int | None = None) -> WriteInfo:
        """Writes `data` (text as UTF-8, bytes, or a file object read to its end in 1 MiB chunks)
        to `path`, replacing it. `mode` is the permission bits (default 0o644). Raises
        QuotaExceededError when the file passes the sandbox's workspace quota."""
        path, body, query = _write_request(path, data, mode)
        # The request timeout bounds each socket read and write, not the whole transfer.
        with self._transport.open("PUT", self._base, body, headers=_OCTETS, query=query) as r:
            answer = _json_of(b"".join(r.chunks()))
        return WriteInfo.from_json(answer, path)

    @overload
    def read(self, path: str, format: Literal["text"] = "text") -> str: ...

    @overload
    def read(self, path: str, format: Literal["bytes"]) -> bytes: ...

    @overload
    def read(self, path: str, format: Literal["stream"]) -> Iterator[bytes]: ...

    def read(self, path: str, format: Literal["text", "bytes", "stream"] = "text"
             ) -> str | bytes | Iterator[bytes]:
        """The file's contents: "text" (UTF-8, undecodable bytes replaced), "bytes", or "stream"
        (an iterator of chunks for big files; the download stops when it is closed)."""
        _check_format(path, format)
        path = _absolute(path)
        response = self._transport.open("GET", self._base, query=[("path", path)])
        if format == "stream":
            return response.chunks()
        data = b"".join(response.chunks())
        return data if format == "bytes" else data.decode("utf-8", "replace")

    def list(self, path: str = "/home/user") -> builtins.list[EntryInfo]:
        path = _absolute(path)
        answer = self._transport.json("GET", self._base + "/list", query=[("path", path)])
        entries = answer.get("entries", []) if isinstance(answer, dict) else []
        return [EntryInfo.from_json(e, path) for e in entries if isinstance(e, dict)]

    def get_info(self, path: str) -> EntryInfo:
        path = _absolute(path)
        return EntryInfo.from_json(self._transport.json("GET", self._base + "/stat",
                                                        query=[("path", path)]))

    def exists(self, path: str) -> bool:
        try:
            self.get_info(path)
            return True
        except NotFoundError:
            return False

    def make_dir(self, path: str) -> bool:
        """Creates the directory and its missing parents. False when it already existed."""
        path = _absolute(path)
        if self.exists(path):
            return False
        try:
            self._transport.json("POST", self._base + "/mkdir", {"path": path, "parents": True})
        except ConflictError:
            return False  # made meanwhile by someone else
        return True

    def remove(self, path: str, recursive: bool = True) -> None:
        """Removes a file, or a directory with everything in it (as E2B does; `recursive=False`
        refuses a non-empty directory)."""
        self._transport.json("POST", self._base + "/remove",
                             {"path": _absolute(path), "recursive": recursive})

    def rename(self, old_path: str, new_path: str) -> EntryInfo:
        new_path = _absolute(new_path)
        self._transport.json("POST", self._base + "/rename",
                             {"from": _absolute(old_path), "to": new_path})
        return self.get_info(new_path)


_OCTETS = {"Content-Type": "application/octet-stream"}


def _write_request(path: str, data: Any, mode: int | None
                   ) -> tuple[str, bytes | Iterator[bytes], list[tuple[str, str]]]:
    path = _absolute(path)
    query = [("path", path)]
    if mode is not None:
        query.append(("mode", format(mode, "o")))
    body: bytes | Iterator[bytes]
    if isinstance(data, str):
        body = data.encode("utf-8")
    elif isinstance(data, (bytes, bytearray, memoryview)):
        body = bytes(data)
    elif hasattr(data, "read"):
        body = _chunks_of(data)  # sent chunked: the size need not be known up front
    else:
        raise InvalidRequestError(
            f"files.write {path}: data must be str, bytes or a file object, "
            f"not {type(data).__name__}")
    return path, body, query


def _check_format(path: str, format: str) -> None:
    if format not in ("text", "bytes", "stream"):
        raise InvalidRequestError(
            f"files.read {path}: format must be 'text', 'bytes' or 'stream', not {format!r}")


class AsyncFiles:
    """`sbx.files` of an AsyncSandbox: the calls of `Files`, awaited; `read(format="stream")`
    is an async iterator of chunks."""

    def __init__(self, transport: AsyncTransport, sandbox_id: str) -> None:
        self._transport = transport
        self._base = f"/v1/sandboxes/{quote(sandbox_id)}/files"

    async def write(self, path: str, data: str | bytes | bytearray | memoryview | IO[Any],
                    mode: int | None = None) -> WriteInfo:
        path, body, query = _write_request(path, data, mode)
        r = await self._transport.open("PUT", self._base, body, headers=_OCTETS, query=query)
        return WriteInfo.from_json(_json_of(await r.read()), path)

    async def read(self, path: str, format: Literal["text", "bytes", "stream"] = "text"
                   ) -> str | bytes | AsyncIterator[bytes]:
        _check_format(path, format)
        path = _absolute(path)
        response = await self._transport.open("GET", self._base, query=[("path", path)])
        if format == "stream":
            return response.chunks()
        data = await response.read()
        return data if format == "bytes" else data.decode("utf-8", "replace")

    async def list(self, path: str = "/home/user") -> builtins.list[EntryInfo]:
        path = _absolute(path)
        answer = await self._transport.json("GET", self._base + "/list", query=[("path", path)])
        entries = answer.get("entries", []) if isinstance(answer, dict) else []
        return [EntryInfo.from_json(e, path) for e in entries if isinstance(e, dict)]

    async def get_info(self, path: str) -> EntryInfo:
        path = _absolute(path)
        return EntryInfo.from_json(await self._transport.json("GET", self._base + "/stat",
                                                              query=[("path", path)]))

    async def exists(self, path: str) -> bool:
        try:
            await self.get_info(path)
            return True
        except NotFoundError:
            return False

    async def make_dir(self, path: str) -> bool:
        path = _absolute(path)
        if await self.exists(path):
            return False
        try:
            await self._transport.json("POST", self._base + "/mkdir",
                                       {"path": path, "parents": True})
        except ConflictError:
            return False
        return True

    async def remove(self, path: str, recursive: bool = True) -> None:
        await self._transport.json("POST", self._base + "/remove",
                                   {"path": _absolute(path), "recursive": recursive})

    async def rename(self, old_path: str, new_path: str) -> EntryInfo:
        new_path = _absolute(new_path)
        await self._transport.json("POST", self._base + "/rename",
                                   {"from": _absolute(old_path), "to": new_path})
        return await self.get_info(new_path)


def _absolute(path: str) -> str:
    if not isinstance(path, str) or not path:
        raise InvalidRequestError(f"file path must be a non-empty str, got {path!r}")
    return path if path.startswith("/") else "/home/user/" + path


def _chunks_of(source: IO[Any]) -> Iterator[bytes]:
    while True:
        chunk = source.read(_UPLOAD_CHUNK)
        if not chunk:
            return
        yield chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)


def _json_of(payload: bytes) -> dict[str, Any]:
    try:
        answer = json.loads(payload) if payload else {}
    except ValueError:
        return {}
    return answer if isinstance(answer, dict) else {}
