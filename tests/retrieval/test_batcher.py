"""The micro-batcher: concurrent calls coalesce into few retriever calls, results go home."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.batcher import MicroBatcher

T = TypeVar("T")


class Recorder:
    """A fake retriever: the hits of query q are q#0, q#1, …; records every call."""

    def __init__(self, delay: float = 0.0, fail_on: str | None = None) -> None:
        self.calls: list[tuple[list[str], int]] = []
        self.threads: set[str] = set()
        self.delay, self.fail_on = delay, fail_on

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        self.calls.append((list(queries), topk))
        self.threads.add(threading.current_thread().name)
        if self.fail_on in queries:
            raise RuntimeError(f"cannot search {self.fail_on!r}")
        time.sleep(self.delay)
        return [[Passage(f"{q}#{i}", q, float(-i)) for i in range(topk)] for q in queries]


async def _with_batcher(
    rec: Recorder, coro_fn: Callable[[MicroBatcher], Awaitable[T]], **kwargs: Any
) -> T:
    batcher = MicroBatcher(rec.search, **kwargs)
    await batcher.start()
    try:
        return await coro_fn(batcher)
    finally:
        await batcher.stop()


def test_concurrent_requests_share_calls_and_get_their_own_results() -> None:
    rec = Recorder(delay=0.01)

    async def run(b: MicroBatcher) -> list[list[list[Passage]]]:
        jobs = [b.search([f"q{i}", f"r{i}"], topk=1 + i % 3) for i in range(20)]
        results: list[list[list[Passage]]] = await asyncio.gather(*jobs)
        return results

    results = asyncio.run(_with_batcher(rec, run, max_batch=64, max_wait_s=0.005))
    for i, res in enumerate(results):
        assert [[p.id for p in hits] for hits in res] == [
            [f"q{i}#{j}" for j in range(1 + i % 3)],
            [f"r{i}#{j}" for j in range(1 + i % 3)],
        ]
    assert len(rec.calls) < 20  # batched
    assert sum(len(q) for q, _ in rec.calls) == 40  # every query searched exactly once
    for queries, k in rec.calls:  # each call uses the largest topk among its requests
        assert k == max(1 + int(q[1:]) % 3 for q in queries)
    assert all(name.startswith("retriever") for name in rec.threads)  # off the event loop


def test_large_request_is_split_into_max_batch_chunks() -> None:
    rec = Recorder()
    queries = [f"q{i}" for i in range(10)]
    result = asyncio.run(_with_batcher(rec, lambda b: b.search(queries, 2), max_batch=4))
    assert [len(q) for q, _ in rec.calls] == [4, 4, 2]
    assert [hits[0].id for hits in result] == [f"{q}#0" for q in queries]


def test_retriever_error_fails_only_that_batch() -> None:
    rec = Recorder(fail_on="boom")

    async def run(b: MicroBatcher) -> list[Passage]:
        with pytest.raises(RuntimeError, match="cannot search 'boom'"):
            await b.search(["boom"], 1)
        found = await b.search(["fine"], 1)  # the loop survived
        return found[0]

    assert [p.id for p in asyncio.run(_with_batcher(rec, run, max_wait_s=0))] == ["fine#0"]


def test_empty_request_and_unstarted_batcher() -> None:
    rec = Recorder()
    assert asyncio.run(_with_batcher(rec, lambda b: b.search([], 3))) == []
    assert rec.calls == []
    with pytest.raises(RuntimeError, match="start"):
        asyncio.run(MicroBatcher(rec.search).search(["q"], 1))
    with pytest.raises(ValueError, match="max_batch"):
        MicroBatcher(rec.search, max_batch=0)


def test_stop_fails_waiting_requests_instead_of_hanging() -> None:
    rec = Recorder(delay=0.2)

    async def run() -> None:
        b = MicroBatcher(rec.search, max_wait_s=0)
        await b.start()
        pending = [asyncio.ensure_future(b.search([f"q{i}"], 1)) for i in range(3)]
        await asyncio.sleep(0.05)  # the first batch is in the worker thread
        await b.stop()
        results = await asyncio.wait_for(
            asyncio.gather(*pending, return_exceptions=True), timeout=2
        )
        assert all(isinstance(r, RuntimeError) for r in results)

    asyncio.run(run())
