"""Whole writes on Unix sockets for httpx.AsyncClient.

anyio's UNIXSocketStream.send (anyio 3.6.2, Debian 12's python3-anyio, which httpcore's asyncio
backend uses for `uds=`) sends the whole buffer again after a partial write instead of its rest,
so any request body larger than the socket takes at once (a file upload, a big JSON body) arrives
with bytes repeated and the server sees garbage. This backend writes through asyncio's
`sock_sendall`, which continues where a partial write stopped; everything else is httpcore's own
asyncio backend. TCP connections are not affected and keep httpcore's default.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import httpx
from anyio.abc import SocketAttribute
from httpcore import WriteError, WriteTimeout
from httpcore.backends.asyncio import AsyncIOBackend, AsyncIOStream


class _WholeWritesStream(AsyncIOStream):
    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        sock = self._stream.extra(SocketAttribute.raw_socket)
        try:
            with anyio.fail_after(timeout):
                await asyncio.get_running_loop().sock_sendall(sock, buffer)
        except TimeoutError as e:
            raise WriteTimeout(e) from e
        except OSError as e:
            raise WriteError(e) from e


class _WholeWritesBackend(AsyncIOBackend):
    async def connect_unix_socket(self, path: str, timeout: float | None = None) -> Any:
        stream = await super().connect_unix_socket(path, timeout)
        return _WholeWritesStream(stream._stream)


def unix_transport(path: str, **kwargs: Any) -> httpx.AsyncHTTPTransport:
    """httpx's transport for a Unix socket, writing whole buffers (see the module's docstring).
    The backend is swapped on httpcore's pool, the one place httpx 0.23 lets it be chosen."""
    transport = httpx.AsyncHTTPTransport(uds=path, **kwargs)
    pool = getattr(transport, "_pool", None)
    if pool is not None and hasattr(pool, "_network_backend"):
        pool._network_backend = _WholeWritesBackend()
    return transport
