"""The retrieval tests' server: ``treegrpo``'s /retrieve app over BM25 on the shared
passages (``tests/passages.py``), on a real loopback socket."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.live import LiveServer
from treegrpo.retrieval.base import Passage


@pytest.fixture(scope="module")
def bm25_server(passages: list[Passage]) -> Iterator[LiveServer]:
    """``treegrpo``'s server over BM25 on the twenty passages, on a real loopback socket."""
    from treegrpo.retrieval.bm25 import BM25Retriever
    from treegrpo.retrieval.server import create_app

    retriever = BM25Retriever(passages, use_cache=False)
    with LiveServer(create_app(retriever, max_topk=10, batch_wait_ms=2.0)) as server:
        yield server
