"""`AsyncSandbox`: `Sandbox` for asyncio, on httpx.AsyncClient. The same surface, awaited:
`await AsyncSandbox.create()`, `await sbx.run_code(...)`, `async with`, streams as async
iterators, and callbacks that may be coroutine functions."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from airlock.code import AsyncCodeRunner, ErrorHandler, OutputHandler, ResultHandler
from airlock.commands import AsyncCommands
from airlock.errors import InvalidRequestError, NotFoundError
from airlock.files import AsyncFiles
from airlock.models import Context, Execution, Mount, SandboxInfo, SandboxMetrics
from airlock.sandbox import create_body, keepalive_body, list_query, lists_per_node, port_number
from airlock.transport import AsyncTransport, RetryPolicy, quote


class AsyncSandbox:
    """A sandbox, for asyncio. Make one with `await AsyncSandbox.create()` or attach with
    `await AsyncSandbox.connect()`; `async with` kills it at the end of the block. Arguments
    and results are those of `Sandbox` (see there)."""

    def __init__(self, info: SandboxInfo, transport: AsyncTransport) -> None:
        """Use `AsyncSandbox.create` or `AsyncSandbox.connect`; this only wraps a sandbox."""
        self._info = info
        self._transport = transport
        self._code = AsyncCodeRunner(transport, info.id)
        self.commands = AsyncCommands(transport, info.id)
        self.files = AsyncFiles(transport, info.id)

    @classmethod
    async def create(cls, profile: str | None = None, language: str | None = None,
                     name: str | None = None, envs: Mapping[str, str] | None = None,
                     metadata: Mapping[str, str] | None = None, keep_alive: float | None = None,
                     lifetime: float | None = None, persistent: bool = False, *,
                     mounts: Iterable[Mount | str | Mapping[str, Any]] | None = None,
                     isolation: str | None = None, url: str | None = None,
                     token: str | None = None, request_timeout: float | None = None,
                     retry: RetryPolicy | None = None) -> AsyncSandbox:
        body = create_body(profile, language, name, envs, metadata, keep_alive, lifetime,
                           persistent, mounts, isolation)
        transport = AsyncTransport(url, token, request_timeout, retry)
        try:
            answer = await transport.json("POST", "/v1/sandboxes", body,
                                          timeout=max(transport.request_timeout, 120.0))
        except BaseException:
            await transport.aclose()
            raise
        return cls(SandboxInfo.from_json(answer), transport)

    @classmethod
    async def connect(cls, name_or_id: str, *, url: str | None = None,
                      token: str | None = None, request_timeout: float | None = None,
                      retry: RetryPolicy | None = None) -> AsyncSandbox:
        transport = AsyncTransport(url, token, request_timeout, retry)
        try:
            answer = await transport.json("GET", f"/v1/sandboxes/{quote(name_or_id)}")
        except BaseException:
            await transport.aclose()
            raise
        return cls(SandboxInfo.from_json(answer), transport)

    @staticmethod
    async def list(metadata: Mapping[str, str] | None = None, *, url: str | None = None,
                   token: str | None = None, node: str | None = None
                   ) -> builtins.list[SandboxInfo]:
        """As Sandbox.list: behind a fleet's proxy, every node in turn; `node=` asks one."""
        transport = AsyncTransport(url, token)
        try:
            try:
                answers = [await transport.json("GET", "/v1/sandboxes",
                                                query=list_query(metadata, node))]
            except InvalidRequestError as e:
                if node is not None or not lists_per_node(e):
                    raise
                nodes = (await transport.json("GET", "/v1/fleet")).get("nodes", [])
                answers = [await transport.json("GET", "/v1/sandboxes",
                                                query=list_query(metadata, n))
                           for n in nodes if isinstance(n, str)]
        finally:
            await transport.aclose()
        return [SandboxInfo.from_json(s) for a in answers for s in a.get("sandboxes", [])
                if isinstance(s, dict)]

    @property
    def id(self) -> str:
        return self._info.id

    @property
    def sandbox_id(self) -> str:
        return self._info.id

    @property
    def name(self) -> str | None:
        return self._info.name

    async def info(self) -> SandboxInfo:
        self._info = SandboxInfo.from_json(await self._transport.json("GET", self._path()))
        return self._info

    async def metrics(self) -> SandboxMetrics:
        """The sandbox's resource use now (see `Sandbox.metrics`)."""
        return SandboxMetrics.from_json(await self._transport.json("GET", self._path("/metrics")))

    async def is_running(self) -> bool:
        try:
            return (await self.info()).state == "running"
        except NotFoundError:
            return False

    async def set_timeout(self, seconds: float, lifetime: float | None = None) -> SandboxInfo:
        self._info = SandboxInfo.from_json(await self._transport.json(
            "POST", self._path("/keepalive"), keepalive_body(seconds, lifetime)))
        return self._info

    async def port_url(self, port: int) -> str:
        answer = await self._transport.json("POST",
                                            self._path(f"/ports/{port_number(port)}/link"))
        return self._transport.endpoint.public_url(answer["path"])

    async def kill(self) -> bool:
        try:
            await self._transport.json("DELETE", self._path())
            return True
        except NotFoundError:
            return False
        finally:
            await self._transport.aclose()

    async def close(self) -> None:
        """Lets go of the connections without killing the sandbox (it lives on to connect to)."""
        await self._transport.aclose()

    async def run_code(self, code: str, language: str | None = None,
                       context: Context | str | None = None,
                       on_stdout: OutputHandler | None = None,
                       on_stderr: OutputHandler | None = None,
                       on_result: ResultHandler | None = None,
                       on_error: ErrorHandler | None = None, timeout: float | None = None,
                       envs: Mapping[str, str] | None = None) -> Execution:
        return await self._code.run(code, language, context, on_stdout, on_stderr, on_result,
                                    on_error, timeout, envs)

    async def create_code_context(self, language: str = "python",
                                  cwd: str | None = None) -> Context:
        return await self._code.create_context(language, cwd)

    async def list_code_contexts(self) -> builtins.list[Context]:
        return await self._code.list_contexts()

    async def restart_code_context(self, context: Context | str) -> Context:
        return await self._code.restart_context(context)

    async def remove_code_context(self, context: Context | str) -> None:
        await self._code.remove_context(context)

    async def recovered_run(self, context: Context | str, run: str = "last",
                            on_stdout: OutputHandler | None = None,
                            on_stderr: OutputHandler | None = None,
                            on_result: ResultHandler | None = None,
                            on_error: ErrorHandler | None = None) -> Execution:
        """Sandbox.recovered_run for asyncio."""
        return await self._code.recovered_run(context, run, on_stdout, on_stderr, on_result,
                                              on_error)

    def _path(self, suffix: str = "") -> str:
        return f"/v1/sandboxes/{quote(self._info.id)}{suffix}"

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.kill()

    def __repr__(self) -> str:
        return f"AsyncSandbox(id={self.id!r}, name={self.name!r}, profile={self._info.profile!r})"
