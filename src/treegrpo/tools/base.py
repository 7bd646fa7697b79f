"""The search-tool interface: a batch of queries in, the top-k passages of each out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Passage:
    """One retrieved passage in the Search-R1 corpus format.

    ``contents`` is ``"Title"\\ntext``: the title in double quotes on the first line.
    """

    id: str
    contents: str
    score: float | None = None

    @property
    def title(self) -> str:
        """First line of ``contents`` (kept as written, quotes included, as Search-R1 does)."""
        return self.contents.split("\n", 1)[0]

    @property
    def text(self) -> str:
        """Everything after the first line."""
        parts = self.contents.split("\n", 1)
        return parts[1] if len(parts) > 1 else ""


class SearchFailed(RuntimeError):
    """A search that could not be answered: the retriever is down, too slow, or refused the
    request. A rollout turns it into an observation that says so (``rollout.sampler``).

    ``results`` is None when every search of the call failed. When only some did (a server
    that refused one query of a batch), it holds each query's passages in order, None for
    each search that failed.
    """

    def __init__(self, message: str, results: list[list[Passage] | None] | None = None) -> None:
        super().__init__(message)
        self.results = results  # pickled with the instance's __dict__, so Ray carries it


class SearchTool(Protocol):
    """Anything that answers a batch of queries with ranked passages."""

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        """Return, for each query in order, at most ``topk`` passages, best first."""
        ...
