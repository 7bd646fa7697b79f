"""An MCP server over a Search-R1 corpus: ``wiki_search`` (BM25, passages formatted as the
``search`` tool's observation) and ``wiki_page`` (a whole article), on the ``mcp`` SDK's
``MCPServer``, over stdio (where stdout carries the protocol: logs go to stderr) or streamable
HTTP. Usage: docs/mcp.md, "The wiki MCP server".
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from treegrpo.files import default_cache_root
from treegrpo.retrieval.base import format_passages
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.retrieval.corpus import read_corpus

log = logging.getLogger(__name__)

Transport = Literal["stdio", "http"]

MAX_TOPK = 10
"""Most passages one ``wiki_search`` returns (the schema says so, so clients can check)."""

DEFAULT_CORPUS = Path("corpora") / "wiki-offline.jsonl"
"""Where ``treegrpo prepare-corpus wiki`` writes the offline wiki corpus, under the cache root."""


def default_corpus() -> Path:
    """The cached offline wiki corpus; ``FileNotFoundError`` naming the command to build it."""
    path = default_cache_root() / DEFAULT_CORPUS
    if not path.is_file():
        raise FileNotFoundError(
            f"no corpus at {path}: pass --corpus, or build the wiki corpus with "
            "`treegrpo prepare-corpus wiki` (`treegrpo serve-mcp` builds it itself)"
        )
    return path


def wiki_server(
    corpus: str | Path,
    *,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    name: str = "treegrpo-wiki",
) -> MCPServer:
    """The MCP server over a Search-R1 jsonl ``corpus``; ``cache_dir``, ``use_cache``: BM25's."""
    retriever = BM25Retriever(corpus, cache_dir=cache_dir, use_cache=use_cache)
    parts: dict[str, list[str]] = {}  # title without Search-R1's quotes → its passages' texts
    for p in read_corpus(corpus):
        parts.setdefault(p.title.strip().strip('"'), []).append(p.text.strip())
    pages = {title: "\n".join(texts) for title, texts in parts.items()}
    by_folded = {t.casefold(): t for t in pages}
    server: MCPServer = MCPServer(
        name,
        instructions="Wikipedia articles: search them by keywords, then read one by its title.",
        log_level="WARNING",
    )

    @server.tool(structured_output=False)
    def wiki_search(query: str, topk: Annotated[int, Field(ge=1, le=MAX_TOPK)] = 3) -> str:
        """Searches Wikipedia by keywords; returns the best passages with their titles."""
        [hits] = retriever.search([query], topk)
        if not hits:
            return "No passage matches the query."
        return format_passages([p.contents for p in hits])

    @server.tool(structured_output=False)
    def wiki_page(title: str) -> str:
        """Returns the full text of the Wikipedia article with this title."""
        key = title.strip().strip('"')
        found = pages.get(key) or pages.get(by_folded.get(key.casefold(), ""))
        if found is None:
            raise ToolError(f"no article titled {key!r}; search for it first")
        return found

    log.info("MCP server %s: %d passages, %d articles", name, len(retriever), len(pages))
    return server


def run(
    corpus: str | Path,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8001,
    cache_dir: str | Path | None = None,
) -> None:
    """Serve ``corpus`` until interrupted or stdin closes; over HTTP at ``http://HOST:PORT/mcp``."""
    server = wiki_server(corpus, cache_dir=cache_dir)
    if transport == "stdio":
        server.run("stdio")
    else:
        print(f"MCP server on http://{host}:{port}/mcp", file=sys.stderr, flush=True)
        server.run("streamable-http", host=host, port=port)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m treegrpo.tools.mcp.server``: parse the flags and ``run``."""
    parser = argparse.ArgumentParser(
        prog="python -m treegrpo.tools.mcp.server", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument(
        "--corpus", type=Path, help="Search-R1 jsonl corpus (default: the cached wiki corpus)"
    )
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP only: interface to bind")
    parser.add_argument("--port", type=int, default=8001, help="HTTP only: TCP port")
    parser.add_argument("--cache-dir", type=Path, help="BM25 index cache root")
    args = parser.parse_args(argv)
    try:
        corpus = args.corpus if args.corpus is not None else default_corpus()
    except FileNotFoundError as exc:
        parser.error(str(exc))
    run(corpus, transport=args.transport, host=args.host, port=args.port, cache_dir=args.cache_dir)


if __name__ == "__main__":
    main()
