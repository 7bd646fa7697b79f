"""The test website (``pages.create_site``) on a real loopback socket, and a fetcher for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.live import LiveServer
from tests.tools.web.pages import Stats, create_site
from treegrpo.tools.web.fetch import PageFetcher


@pytest.fixture(scope="module")
def stats() -> Stats:
    return Stats()


@pytest.fixture(scope="module")
def site(stats: Stats) -> Iterator[str]:
    """The site's base URL, ``http://127.0.0.1:PORT``."""
    with LiveServer(create_site(stats)) as server:
        yield server.url


@pytest.fixture
def fetcher() -> Iterator[PageFetcher]:
    """Small limits so the limits are reached fast: 0.5 s reads, 1.5 s per page, 1 MB."""
    with PageFetcher(
        connect_timeout=1.0, read_timeout=0.5, total_timeout=1.5, max_bytes=1_000_000
    ) as f:
        yield f
