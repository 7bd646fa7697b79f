"""A session with one MCP server for a synchronous caller (``tools.mcp.client``'s tools): the
SDK's ``mcp.Client`` is asynchronous and its context must be entered and left in one task, so each
``McpConnection`` runs an asyncio loop in a background thread, where one task holds the ``Client``
open, and a caller's batch goes onto that loop at once. Outages and reconnection: docs/mcp.md,
"When a call does not work".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from treegrpo.retrieval.base import Closes, ToolFailed

log = logging.getLogger(__name__)

OUTAGE_CODES = (mcp_types.CONNECTION_CLOSED, mcp_types.REQUEST_TIMEOUT)
"""JSON-RPC error codes that mean the server did not answer (as opposed to refusing a call)."""

CLOSE_TIMEOUT_S = 10.0
"""Longest wait for a session to wind down (the SDK stops a stdio server within ~6 s)."""


@dataclass(frozen=True)
class McpServer:
    """How to reach one MCP server and which of its tools to take."""

    name: str
    """The server's name in logs and errors."""
    command: str | None = None
    """stdio: the executable that runs the server (spoken to over its stdin and stdout)."""
    args: tuple[str, ...] = ()
    """stdio: the command's arguments."""
    env: dict[str, str] = field(default_factory=dict)
    """stdio: environment variables for the server, beyond the few the SDK passes (HOME, PATH)."""
    url: str | None = None
    """Streamable HTTP: the server's endpoint (``http://127.0.0.1:8001/mcp``), not ``command``."""
    prefix: str = ""
    """Put before each tool's name (``wiki.`` makes ``search`` ``wiki.search``): no clashes."""
    timeout_s: float = 30.0
    """Longest wait for one call's answer; a slower one fails as an outage."""
    start_timeout_s: float = 60.0
    """Longest wait for the server to start and list its tools (an index may load first)."""
    tools: tuple[str, ...] | None = None
    """Only these of the server's tools (its own names); None: all it lists."""

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r}: give either command (stdio) or url")
        if self.timeout_s <= 0 or self.start_timeout_s <= 0:
            raise ValueError(f"MCP server {self.name!r}: timeouts must be > 0")


@dataclass
class _Session:
    """One open MCP client session, held by a task on the connection's loop that enters and
    leaves the ``Client`` context (anyio wants both in one task)."""

    client: Client | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class McpConnection(Closes):
    """A session with one MCP server, kept open until ``close``; calls from any thread."""

    def __init__(self, config: McpServer) -> None:
        self.config = config
        self.tools: list[mcp_types.Tool] = []
        self.broken = False
        self.closed = False
        self._session: _Session | None = None
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"mcp-{config.name}", daemon=True
        )
        self._thread.start()
        try:
            self._connect()
        except BaseException:
            self.close()
            raise

    def __reduce__(self) -> tuple[type[McpConnection], tuple[McpServer]]:
        """A copy (a pickle sent to a Ray worker) opens its own session from the config, closed by
        ``close`` or at its process's exit (a stdio server reads the end of its input and stops)."""
        return (McpConnection, (self.config,))

    def _run(self, coro: Any, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _connect(self) -> None:
        """Open a session (closing any old one first) and list the server's tools."""
        self._drop()
        session = _Session()
        try:
            listed = self._run(self._open(session), self.config.start_timeout_s + CLOSE_TIMEOUT_S)
        except Exception as exc:
            where = self.config.url or " ".join((self.config.command or "", *self.config.args))
            what = "did not start" if self.config.command else "cannot be reached"
            hint = " (its stderr says why)" if self.config.command else ""
            raise ConnectionError(
                f"MCP server {self.config.name} ({where}) {what}: {exc!r}{hint}"
            ) from exc
        self._session = session
        self.tools = self._chosen(listed)
        self.broken = False

    def _drop(self) -> None:
        """Close the current session, if any (its server process ends with it)."""
        session, self._session = self._session, None
        if session is not None and self._loop.is_running():
            try:
                self._run(self._shut(session), CLOSE_TIMEOUT_S + 5)
            except Exception:  # closing a dead session may raise; the process is gone anyway
                log.debug("MCP server %s: closing raised", self.config.name, exc_info=True)

    def call(self, tool: str, arguments: Sequence[dict[str, Any]]) -> list[Any]:
        """Call ``tool`` once per arguments object, all at once; each call's ``CallToolResult``,
        or the exception it raised. Raises ``ToolFailed`` when no session can be opened."""
        with self._lock:
            if self.closed:
                raise ToolFailed(f"MCP server {self.config.name}: the connection is closed")
            if self.broken or self._session is None:
                log.warning("MCP server %s: reconnecting", self.config.name)
                try:
                    self._connect()
                except Exception as exc:
                    self.broken = True
                    raise ToolFailed(str(exc)) from exc
            session = self._session
        assert session is not None
        wait = self.config.timeout_s * 2 + 5  # the SDK times calls out; this guards the loop
        try:
            results: list[Any] = self._run(self._calls(session, tool, arguments), wait)
        except Exception as exc:
            self.broken = True
            raise ToolFailed(f"MCP server {self.config.name}: {exc!r}") from exc
        if any(is_outage(r) for r in results):
            try:
                self.broken = not self._run(self._answers(session), wait)
            except Exception:
                self.broken = True
        return results

    def close(self) -> None:
        """End the session (a stdio server process exits) and the loop thread. Idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._drop()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=CLOSE_TIMEOUT_S)
            if not self._thread.is_alive():
                self._loop.close()

    async def _open(self, session: _Session) -> list[mcp_types.Tool]:
        ready: asyncio.Future[list[mcp_types.Tool]] = self._loop.create_future()
        session.task = self._loop.create_task(self._hold(session, ready))
        try:
            return await asyncio.wait_for(asyncio.shield(ready), self.config.start_timeout_s)
        except asyncio.TimeoutError:
            session.task.cancel()  # the holder unwinds: a started server process is stopped
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(session.task, CLOSE_TIMEOUT_S)
            raise TimeoutError(f"no answer in {self.config.start_timeout_s:g} s") from None

    async def _hold(self, session: _Session, ready: asyncio.Future[list[mcp_types.Tool]]) -> None:
        """Enter the client, list the tools, wait for ``stop``, leave the client."""
        try:
            async with Client(
                self._transport(), read_timeout_seconds=self.config.timeout_s
            ) as client:
                tools = await _list_tools(client)
                session.client = client
                if not ready.done():
                    ready.set_result(tools)
                await session.stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(_cause(exc))
            if not isinstance(exc, Exception | asyncio.CancelledError):
                raise
            log.debug("MCP server %s: session ended: %r", self.config.name, exc)
        finally:
            session.client = None

    async def _shut(self, session: _Session) -> None:
        session.stop.set()
        if session.task is not None:
            try:
                await asyncio.wait_for(session.task, CLOSE_TIMEOUT_S)
            except asyncio.TimeoutError:  # wait_for has cancelled the holder: it unwinds now
                log.warning("MCP server %s: session did not close in time", self.config.name)

    async def _calls(
        self, session: _Session, tool: str, arguments: Sequence[dict[str, Any]]
    ) -> list[Any]:
        client = session.client
        if client is None:
            raise ConnectionError("the session has ended")
        return await asyncio.gather(
            *(client.call_tool(tool, a) for a in arguments), return_exceptions=True
        )

    async def _answers(self, session: _Session) -> bool:
        """Whether the server still answers (after a timeout: slow, or hung?)."""
        if session.client is None:
            return False
        try:
            await asyncio.wait_for(_list_tools(session.client), min(self.config.timeout_s, 5.0))
        except Exception:
            return False
        return True

    def _transport(self) -> Any:
        if self.config.url is not None:
            return self.config.url
        assert self.config.command is not None
        params = StdioServerParameters(
            command=self.config.command, args=list(self.config.args), env=dict(self.config.env)
        )
        return stdio_client(params, errlog=_errlog())

    def _chosen(self, tools: list[mcp_types.Tool]) -> list[mcp_types.Tool]:
        if self.config.tools is None:
            return tools
        listed = {t.name for t in tools}
        missing = [n for n in self.config.tools if n not in listed]
        if missing:
            raise ValueError(
                f"MCP server {self.config.name} has no tool {', '.join(missing)} "
                f"(it lists {', '.join(sorted(listed)) or 'none'})"
            )
        return [t for t in tools if t.name in self.config.tools]


async def _list_tools(client: Client) -> list[mcp_types.Tool]:
    """Every tool the server lists, page after page."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _cause(exc: BaseException) -> Exception:
    """The one exception inside anyio's task-group wrappers, or ``exc`` itself."""
    while isinstance(inner := getattr(exc, "exceptions", None), tuple) and len(inner) == 1:
        exc = inner[0]
    return exc if isinstance(exc, Exception) else RuntimeError(repr(exc))


def is_outage(result: Any) -> bool:
    if isinstance(result, MCPError):
        return result.code in OUTAGE_CODES
    return isinstance(result, BaseException)


def _errlog() -> TextIO:
    """Where a stdio server's stderr goes: ours, if a real file (a test's capture may not be)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__ if sys.__stderr__ is not None else sys.stderr
    return sys.stderr
