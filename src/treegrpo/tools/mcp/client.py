"""MCP servers' tools in the registry: ``mcp_tools`` connects every ``McpServer`` (a command over
stdio, or a streamable HTTP URL), and each tool they list registers in a ``Toolbox`` like any
other; a step's calls to a tool go out together. Names, usage lines, argument checks and failures:
docs/mcp.md, "What the model sees" and "When a call does not work".
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types
from mcp.shared.exceptions import MCPError

from treegrpo.retrieval.base import Closes, ToolFailed
from treegrpo.tools.mcp.connection import OUTAGE_CODES, McpConnection, McpServer, is_outage
from treegrpo.tools.mcp.schema import ArgumentParser
from treegrpo.tools.registry import NAME, RESERVED, Call, Failure

__all__ = ["McpServer", "McpTool", "McpTools", "mcp_tools", "result_text", "tool_name"]


def tool_name(prefix: str, name: str) -> str:
    """The registry name of an MCP tool: prefixed, with what a tag cannot hold as ``_``."""
    text = re.sub(r"[^A-Za-z0-9_.-]", "_", prefix + name)
    if not re.match(r"[A-Za-z_]", text):
        text = "_" + text
    return text[:64]


def first_sentence(text: str | None) -> str:
    """The description's first line, cut at its first sentence end."""
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    match = re.search(r"(?<=[.!?])\s", line)
    return line[: match.start()] if match else line


SDK_ERROR_PREFIX = re.compile(r"^Error executing tool [^:]*: ")
"""What the SDK's servers put before a tool's own error text (dropped: the observation already
names the tool)."""


@dataclass(frozen=True)
class McpTool:
    """One MCP tool as a registry ``Tool``: JSON arguments checked against its input schema,
    calls sent on its server's connection, the result's text as the observation."""

    connection: McpConnection
    spec: mcp_types.Tool
    name: str
    parser: ArgumentParser = field(repr=False)

    @classmethod
    def of(cls, connection: McpConnection, spec: mcp_types.Tool) -> McpTool:
        name = tool_name(connection.config.prefix, spec.name)
        return cls(connection, spec, name, ArgumentParser(name, spec.input_schema))

    @property
    def usage(self) -> str:
        return self.parser.usage

    @property
    def description(self) -> str:
        return first_sentence(self.spec.description) or self.spec.title or self.spec.name

    def parse(self, text: str) -> dict[str, Any]:
        return self.parser(text)

    def call(self, calls: Sequence[Call]) -> list[Any]:
        results = self.connection.call(self.spec.name, [c.argument for c in calls])
        out: list[Any] = []
        for r in results:
            if isinstance(r, mcp_types.CallToolResult):
                out.append(Failure(_error_text(r)) if r.is_error else r)
            elif isinstance(r, MCPError) and r.code not in OUTAGE_CODES:
                out.append(Failure(r.error.message))  # refused by a live server (bad params)
            else:
                out.append(None)
        if None in out:
            first = next(r for r in results if is_outage(r))
            raise ToolFailed(
                f"MCP server {self.connection.config.name}: {out.count(None)} of {len(calls)} "
                f"{self.name} calls got no answer: {first!r}",
                out,
            )
        return out

    def format(self, result: mcp_types.CallToolResult) -> str:
        return result_text(result)


def result_text(result: mcp_types.CallToolResult) -> str:
    """A tool result's text: text blocks (and embedded text resources) joined by newlines, other
    blocks as ``[image]``-like markers, the structured content as JSON when there is no text."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.EmbeddedResource) and isinstance(
            block.resource, mcp_types.TextResourceContents
        ):
            parts.append(block.resource.text)
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[{block.name}: {block.uri}]")
        else:
            parts.append(f"[{block.type}]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return "\n".join(parts).strip()


def _error_text(result: mcp_types.CallToolResult) -> str:
    text = result_text(result) or "the tool reported an error"
    return SDK_ERROR_PREFIX.sub("", text, count=1)


@dataclass
class McpTools(Closes):
    """The tools of some MCP servers, for ``Toolbox.register``, and their connections to
    ``close`` (or use as a context manager)."""

    tools: list[McpTool]
    connections: list[McpConnection]

    def __iter__(self) -> Iterator[McpTool]:
        return iter(self.tools)

    def close(self) -> None:
        """Close every connection (stdio servers exit)."""
        for connection in self.connections:
            connection.close()


def mcp_tools(servers: Sequence[McpServer]) -> McpTools:
    """Connect to every server and make a registry tool of each tool it lists (or of those in
    its ``tools``). Raises when a server cannot start, or when two tools would share a name
    (give the servers a ``prefix``); connections already open are closed first."""
    out = McpTools([], [])
    try:
        for server in servers:
            connection = McpConnection(server)
            out.connections.append(connection)
            out.tools.extend(McpTool.of(connection, spec) for spec in connection.tools)
        seen: dict[str, str] = {}
        for t in out.tools:
            where = f"{t.connection.config.name}:{t.spec.name}"
            if not NAME.fullmatch(t.name) or t.name in RESERVED:
                raise ValueError(f"MCP tool {where} cannot be named {t.name!r}: set a prefix")
            if t.name in seen:
                raise ValueError(
                    f"MCP tools {seen[t.name]} and {where} are both named {t.name!r}: "
                    "give their servers a prefix"
                )
            seen[t.name] = where
    except BaseException:
        with contextlib.suppress(Exception):
            out.close()
        raise
    return out
