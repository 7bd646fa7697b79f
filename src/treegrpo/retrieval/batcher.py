"""Async micro-batching: concurrent search requests (Search-R1 style trainers send one small
request per sample, many at once) become one ``retriever.search`` call, one thread hop for all.
The loop takes the requests waiting, waits at most ``max_wait_s`` for more while the batch is not
full, and runs the batch in one worker thread while it collects the next: under load batches form
by themselves, and an idle server adds at most ``max_wait_s`` of latency. One worker thread on
purpose: retrievers are CPU-bound and not guaranteed thread-safe, and the event loop needs the
other core for HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice

from treegrpo.retrieval.base import Passage

SearchFn = Callable[[list[str], int], list[list[Passage]]]


@dataclass
class _Job:
    queries: list[str]
    topk: int
    future: asyncio.Future[list[list[Passage]]]


class MicroBatcher:
    """Coalesce ``search`` calls made within a short window into batched calls of ``search_fn`` (the
    retriever's ``search``, run in a worker thread): at most ``max_batch`` queries a call (larger
    requests are split), waiting up to ``max_wait_s`` for more requests when idle."""

    def __init__(self, search_fn: SearchFn, max_batch: int = 64, max_wait_s: float = 0.002):
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self._search = search_fn
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self._queue: asyncio.Queue[_Job] | None = None
        self._task: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._inflight: list[_Job] = []
        self.batches = 0  # statistics, for tests and logs
        self.queries = 0

    async def start(self) -> None:
        """Start the batching loop on the running event loop."""
        self._queue = asyncio.Queue()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="retriever")
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        """Stop the loop; requests still waiting fail with ``RuntimeError``."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        pending = list(self._inflight)
        while self._queue is not None and not self._queue.empty():
            pending.append(self._queue.get_nowait())
        for job in pending:
            if not job.future.done():
                job.future.set_exception(RuntimeError("retriever server is shutting down"))
        if self._executor is not None:
            self._executor.shutdown(wait=False)
        self._task = self._queue = self._executor = None

    @contextlib.asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Running for as long as an app serves (``FastAPI(lifespan=batcher.lifespan)``)."""
        await self.start()
        try:
            yield
        finally:
            await self.stop()

    async def search(self, queries: list[str], topk: int) -> list[list[Passage]]:
        """Queue the queries and wait for their results (at most ``topk`` passages each)."""
        if self._queue is None:
            raise RuntimeError("MicroBatcher.start() was not called")
        if not queries:
            return []
        future: asyncio.Future[list[list[Passage]]] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Job(queries, topk, future))
        return await future

    async def _gather(self, queue: asyncio.Queue[_Job]) -> list[_Job]:
        jobs = self._inflight = [await queue.get()]  # stop() fails these if cancelled now
        n = len(jobs[0].queries)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_wait_s
        while n < self.max_batch:
            try:
                job = queue.get_nowait()
            except asyncio.QueueEmpty:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    job = await asyncio.wait_for(queue.get(), remaining)
                except asyncio.TimeoutError:  # not TimeoutError: Python 3.10 keeps them apart
                    break
            jobs.append(job)
            n += len(job.queries)
        return [j for j in jobs if not j.future.done()]  # drop requests whose client left

    def _run(self, jobs: list[_Job]) -> list[list[list[Passage]]]:
        """Search all jobs' queries with the largest topk, in chunks; split back per job."""
        queries = [q for j in jobs for q in j.queries]
        k = max(j.topk for j in jobs)
        results: list[list[Passage]] = []
        for i in range(0, len(queries), self.max_batch):
            chunk = queries[i : i + self.max_batch]
            found = self._search(chunk, k)
            if len(found) != len(chunk):
                raise RuntimeError(f"retriever answered {len(found)} lists for {len(chunk)}")
            results.extend(found)
        per_query = iter(results)  # each job's share, in job order
        return [[hits[: j.topk] for hits in islice(per_query, len(j.queries))] for j in jobs]

    async def _loop(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            self._inflight = jobs = await self._gather(self._queue)
            if not jobs:
                continue
            try:
                answers = await loop.run_in_executor(self._executor, self._run, jobs)
            except Exception as exc:
                for j in jobs:
                    if not j.future.done():
                        j.future.set_exception(exc)
                continue
            self.batches += 1
            self.queries += sum(len(j.queries) for j in jobs)
            for j, answer in zip(jobs, answers, strict=True):
                if not j.future.done():
                    j.future.set_result(answer)
