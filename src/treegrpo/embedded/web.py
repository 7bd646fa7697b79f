"""The embedded world as a small in-process web: ``search`` (BM25 over the fact pages) lists
titles only, ``visit`` opens result ``n`` of the last search or a page by its exact title, so a
hop is a search and a visit (docs/embedded.md, "The web variant").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from treegrpo.agent.prompt import ToolLine
from treegrpo.retrieval.base import Passage, SearchTool
from treegrpo.tools.registry import Call, Failure, RetrieverTool, Toolbox

_NUMBER = re.compile(r"\[?(\d+)\]?")


def _title(p: Passage) -> str:
    return p.title.strip().strip('"')


@dataclass(frozen=True)
class TitleSearch(RetrieverTool):
    """``search``: a retriever's ranked passages, shown as page titles (``[k] Title`` lines)."""

    topk: int = 1
    description: str = "searches the pages; each result is a number and a page title"

    def format(self, result: list[Passage]) -> str:
        return "\n".join(f"[{k}] {_title(p)}" for k, p in enumerate(result, start=1))


class PageVisit:
    """``visit``: result ``n`` of the last search, or the page of ``pages`` with this title."""

    name = "visit"
    usage = "result number"
    description = "opens a result of the last search; the page's text comes back"

    def __init__(self, pages: Sequence[Passage]) -> None:
        self._by_title = {_title(p): p for p in pages}

    def parse(self, text: str) -> int | str:
        m = _NUMBER.fullmatch(text)
        return int(m[1]) if m else text

    def call(self, calls: Sequence[Call]) -> list[Passage | Failure]:
        return [self._open(c) for c in calls]

    def _open(self, call: Call) -> Passage | Failure:
        if isinstance(call.argument, str):
            page = self._by_title.get(call.argument.strip('"'))
            return page if page is not None else Failure(f"no page is titled {call.argument!r}")
        last = call.last("search")
        if last is None:
            return Failure("there are no results to open yet: search first")
        results: list[Passage] = last.result
        k = int(call.argument)
        if not 1 <= k <= len(results):
            return Failure(f"the last search has results 1 to {len(results)}")
        return results[k - 1]

    def format(self, result: Passage) -> str:
        return result.text


def world_web(retriever: SearchTool, pages: Sequence[Passage], topk: int = 1) -> Toolbox:
    """The web variant's toolbox over a world's pages (``retriever`` indexes ``pages``)."""
    return Toolbox([TitleSearch(retriever, topk), PageVisit(pages)])


WEB_TOOLS = tuple(ToolLine(t.name, t.usage, t.description) for t in (TitleSearch, PageVisit))
"""The web variant's tools as the prompt lists them (what ``world_web`` registers)."""
