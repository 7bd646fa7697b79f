"""The search-tool interface: a batch of queries in, the top-k passages of each out; and how
a tool call fails (``ToolFailed``, of which a failed search is one kind)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

C = TypeVar("C", bound="Closes")


@dataclass(frozen=True)
class Passage:
    """One retrieved passage in the Search-R1 corpus format: ``contents`` is ``"Title"\\ntext``."""

    id: str
    contents: str
    score: float | None = None

    @property
    def title(self) -> str:
        """First line of ``contents`` (kept as written, quotes included, as Search-R1 does)."""
        return self.contents.partition("\n")[0]

    @property
    def text(self) -> str:
        """Everything after the first line."""
        return self.contents.partition("\n")[2]


def format_passages(contents: Sequence[str]) -> str:
    """``Doc i(Title: T) text`` lines from Search-R1 ``contents`` (``"Title"\\ntext``): the
    body of a search's observation (docs/algorithm.md §1)."""
    docs = enumerate((c.partition("\n") for c in contents), start=1)
    return "\n".join(f"Doc {i}(Title: {title}) {text}" for i, (title, _, text) in docs)


class ToolFailed(RuntimeError):
    """A batch of tool calls that could not be answered (the server down, too slow, refusing); each
    failed call becomes an observation that says so (``tools.registry.Toolbox.run``). ``results``:
    None when every call failed, else each call's result in order, None where it failed."""

    def __init__(self, message: str, results: list[Any] | None = None) -> None:
        super().__init__(message)
        self.results = results  # pickled with the instance's __dict__, so Ray carries it


class SearchFailed(ToolFailed):
    """A search that could not be answered (``ToolFailed``; ``results``: passages, or None)."""


class Closes:
    """Holds connections, threads or a process until ``close``; a ``with`` block closes it."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: C) -> C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SearchTool(Protocol):
    """Anything that answers a batch of queries with ranked passages."""

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        """Return, for each query in order, at most ``topk`` passages, best first."""
        ...
