"""The data job's tools (``DataConfig``): Search-R1's retriever alone by default, or a toolbox
with web search, ``visit``, ``find``, ``calculate`` and any MCP servers' tools (docs/tools.md,
docs/mcp.md). Search URL ``"wiki:web"`` is the offline wiki site started in this process."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from treegrpo.data.wiki_web import WIKI_WEB, wiki_web
from treegrpo.jobs.presets import DataConfig
from treegrpo.retrieval.base import SearchTool
from treegrpo.tools.calculator import calculate
from treegrpo.tools.mcp.client import mcp_tools
from treegrpo.tools.mcp.connection import McpServer
from treegrpo.tools.registry import FunctionTool, RetrieverTool, Tool, Toolbox
from treegrpo.tools.web.browse import FindTool, VisitTool
from treegrpo.tools.web.fetch import PageFetcher
from treegrpo.tools.web.search import JsonSearch, SearxngSearch, WebSearch, WebSearchTool

CALCULATE = ("calculate", "expression", "evaluates arithmetic; the value comes back")
"""The calculator's name, usage and description in the prompt."""


def search_r1_only(data: DataConfig) -> bool:
    """Whether the agent is Search-R1's: ``search`` over passages, nothing else."""
    return data.tools == ("search",) and data.search_url is None and not data.mcp_servers


def make_toolbox(data: DataConfig, retriever: Callable[[], SearchTool]) -> Toolbox:
    """The toolbox ``data`` names, in its order, then the MCP servers' tools. ``retriever``
    makes the passage retriever, called only when ``search`` searches passages. The toolbox
    owns its web clients and MCP connections: ``close()`` it when done."""
    box = Toolbox()
    fetcher = None
    if {"visit", "find"} & set(data.tools):  # wiki:web's fetcher reaches the in-process site
        fetcher = wiki_web().fetcher() if data.search_url == WIKI_WEB else PageFetcher()
        box.owns(fetcher)
    for name in data.tools:
        tool: Tool
        if name == "search" and data.search_url is None:
            tool = RetrieverTool(retriever(), data.topk)
        elif name == "search":
            client = web_search(data)
            box.owns(client)
            tool = WebSearchTool(client, data.topk)
        elif name == "visit":
            assert fetcher is not None
            tool = VisitTool(fetcher, data.visit_chars)
        elif name == "find":
            tool = FindTool(data.visit_chars)
        else:
            tool = FunctionTool(CALCULATE[0], calculate, *CALCULATE[1:])
        box.register(tool)
    if data.mcp_servers:
        servers = mcp_tools(mcp_servers(data.mcp_servers))
        box.owns(servers)
        for tool in servers.tools:
            box.register(tool)
    return box


def web_search(data: DataConfig) -> WebSearch:
    """The client of ``data.search_url``: SearXNG's JSON API, or a JSON API by field names; the
    in-process offline wiki site for ``"wiki:web"`` (started on first use)."""
    assert data.search_url is not None
    if data.search_url == WIKI_WEB:
        return wiki_web().search_client()
    if data.search_api == "searxng":
        return SearxngSearch(data.search_url)
    return JsonSearch(data.search_url, fields=data.json_fields)


def mcp_servers(specs: tuple[str, ...]) -> list[McpServer]:
    """``DataConfig.mcp_servers`` as servers: an http(s) URL (streamable HTTP), else a command."""
    out = []
    for i, spec in enumerate(specs):
        if spec.startswith(("http://", "https://")):
            out.append(McpServer(f"mcp{i}", url=spec))
            continue
        argv = shlex.split(spec)
        if not argv:
            raise ValueError(f"data.mcp_servers[{i}]: empty command")
        out.append(McpServer(f"mcp{i}", command=argv[0], args=tuple(argv[1:])))
    return out
