"""Retrieval-server load: `treegrpo serve` (BM25) at 1, 8, 32 and 64 concurrent clients.

What it measures: requests/s, queries/s, p50/p99 request latency, non-200 responses, 5xx
responses and connection errors of the real server process (uvicorn + FastAPI + request limits +
micro-batcher + BM25 over a small synthetic corpus, the one ``bench/retrieval.py`` builds),
driven from this process by N concurrent keep-alive clients on loopback, each sending requests
back to back as a Search-R1 trainer does: 1 query per request, and 16 queries per request.
Each setting runs ``--seconds`` (or until ``--requests`` requests); the default run is 8
settings × 6 s, under a minute after the server is up. Clients and server share the machine's
cores, so run it on an otherwise idle machine.

The default client is a minimal asyncio HTTP/1.1 client (like ``wrk``: it measures the server);
``--client httpx`` drives the server with ``httpx.AsyncClient``, which spends ~2 ms of CPU per
request and on a small machine measures itself. A 200 whose result count differs from the
query count counts as an error.

Exits 1 if any request got a 5xx, a connection error or a wrong result: under load the server
must answer every well-formed request. Raw numbers go to ``bench/results/retrieval_load.json``.

    .venv/bin/python bench/retrieval_load.py                # ~1 minute after the index build
    .venv/bin/python bench/retrieval_load.py --seconds 3    # a quick check
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from retrieval import free_port, make_corpus, start_server
from treegrpo.files import default_cache_root

ROOT = Path(__file__).resolve().parent
CONCURRENCY = (1, 8, 32, 64)


def tail(path: Path, n: int = 2000) -> str:
    """The last ``n`` characters of a text file."""
    return path.read_text(errors="replace")[-n:]


class RawClient:
    """One keep-alive HTTP/1.1 connection on asyncio streams; ~0.05 ms of CPU per request."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, body: bytes) -> tuple[int, bytes]:
        """(status, body) of ``POST /retrieve``; reconnects when the server closed the last."""
        if self.streams is None:
            self.streams = await asyncio.open_connection("127.0.0.1", self.port)
        reader, writer = self.streams
        writer.write(
            b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head)}
        data = await reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            await self.aclose()
        return int(head[0].split(" ", 2)[1]), data

    async def aclose(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


class HttpxClient:
    """Requests through one shared ``httpx.AsyncClient``."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url = http, url

    async def post(self, body: bytes) -> tuple[int, bytes]:
        r = await self.http.post(self.url, content=body)
        return r.status_code, r.content

    async def aclose(self) -> None:
        pass


def answers(data: bytes, n: int) -> bool:
    """Whether ``data`` is a Search-R1 response with one result list for each of ``n`` queries."""
    try:
        result = json.loads(data)["result"]
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(result, list) and len(result) == n


@dataclass
class Run:
    """One setting: totals, failure counts and latency percentiles (ms)."""

    client: str
    clients: int
    per_request: int
    requests: int
    queries: int
    seconds: float
    requests_per_s: float
    queries_per_s: float
    p50_ms: float
    p99_ms: float
    non_200: int
    status_5xx: int
    connection_errors: int
    wrong_results: int
    statuses: dict[str, int] = field(default_factory=dict)


async def load(
    port: int,
    kind: str,
    queries: list[str],
    clients: int,
    per_request: int,
    seconds: float,
    max_requests: int,
) -> Run:
    """``clients`` tasks send requests back to back for ``seconds`` or ``max_requests`` in all."""
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    errors = {"connection": 0, "wrong": 0}
    stop = time.perf_counter() + seconds

    async def client(c: int, conn: RawClient | HttpxClient) -> None:
        i = c * 997
        while time.perf_counter() < stop and len(latencies) < max_requests:
            batch = [queries[(i + j) % len(queries)] for j in range(per_request)]
            i += per_request
            body = json.dumps({"queries": batch, "topk": 3, "return_scores": True}).encode()
            t0 = time.perf_counter()
            try:
                status, data = await conn.post(body)
            except (OSError, asyncio.IncompleteReadError, httpx.TransportError, ValueError):
                errors["connection"] += 1
                await conn.aclose()
                continue
            latencies.append(time.perf_counter() - t0)
            statuses[str(status)] = statuses.get(str(status), 0) + 1
            if status == 200 and not answers(data, per_request):
                errors["wrong"] += 1
        await conn.aclose()

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:
        url = f"http://127.0.0.1:{port}/retrieve"
        conns = [
            RawClient(port) if kind == "raw" else HttpxClient(http, url) for _ in range(clients)
        ]
        t0 = time.perf_counter()
        await asyncio.gather(*(client(c, conn) for c, conn in enumerate(conns)))
        elapsed = time.perf_counter() - t0
    lat = np.array(latencies or [float("nan")]) * 1e3
    n = len(latencies)
    return Run(
        client=kind,
        clients=clients,
        per_request=per_request,
        requests=n,
        queries=n * per_request,
        seconds=round(elapsed, 3),
        requests_per_s=n / elapsed,
        queries_per_s=n * per_request / elapsed,
        p50_ms=float(np.percentile(lat, 50)),
        p99_ms=float(np.percentile(lat, 99)),
        non_200=n - statuses.get("200", 0),
        status_5xx=sum(v for k, v in statuses.items() if k.startswith("5")),
        connection_errors=errors["connection"],
        wrong_results=errors["wrong"],
        statuses=statuses,
    )


def table(runs: list[Run]) -> str:
    """The runs as a markdown table."""
    rows = [
        "| clients | queries/request | requests/s | queries/s | p50 ms | p99 ms | non-200 | 5xx "
        "| conn. errors |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        rows.append(
            f"| {r.clients} | {r.per_request} | {r.requests_per_s:.0f} | {r.queries_per_s:.0f} "
            f"| {r.p50_ms:.1f} | {r.p99_ms:.1f} | {r.non_200} | {r.status_5xx} "
            f"| {r.connection_errors} |"
        )
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--passages", type=int, default=10_000, help="synthetic corpus size")
    p.add_argument("--seconds", type=float, default=6.0, help="duration of each setting")
    p.add_argument("--requests", type=int, default=100_000, help="most requests per setting")
    p.add_argument("--concurrency", type=int, nargs="+", default=list(CONCURRENCY))
    p.add_argument("--batched", type=int, default=16, help="queries per request, second setting")
    p.add_argument("--client", choices=("raw", "httpx"), default="raw")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "retrieval_load.json")
    args = p.parse_args()

    load_before = os.getloadavg()[0]
    if load_before > 0.5:
        print(f"warning: load average {load_before:.2f}; other work will skew the numbers")
    cache = default_cache_root()
    corpus = cache / "bench" / f"synthetic-{args.passages}.jsonl"
    if not corpus.exists():
        corpus.parent.mkdir(parents=True, exist_ok=True)
        make_corpus(corpus, args.passages)
    queries = json.loads(Path(f"{corpus}.queries.json").read_text())
    port = free_port()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        t0 = time.perf_counter()
        proc = start_server(corpus, cache, port, log)
        print(f"server up in {time.perf_counter() - t0:.1f} s", flush=True)
        try:
            asyncio.run(load(port, args.client, queries, 8, 1, 1.0, args.requests))  # warm-up
            for per_request in (1, args.batched):
                for clients in args.concurrency:
                    setting = (clients, per_request, args.seconds, args.requests)
                    run = asyncio.run(load(port, args.client, queries, *setting))
                    runs.append(run)
                    print(
                        f"  {clients:>3} clients x {per_request:>2} q/request: "
                        f"{run.requests_per_s:7.0f} req/s {run.queries_per_s:7.0f} q/s, "
                        f"p50 {run.p50_ms:6.1f} ms p99 {run.p99_ms:6.1f} ms, non-200 "
                        f"{run.non_200}, 5xx {run.status_5xx}, conn. errors "
                        f"{run.connection_errors}",
                        flush=True,
                    )
            health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        server_log = tail(log)
    meta: dict[str, Any] = {
        "passages": args.passages,
        "seconds": args.seconds,
        "max_requests": args.requests,
        "client": args.client,
        "load_average_before": round(load_before, 2),
        "server_batches": health["batches"],
        "server_queries": health["queries"],
        "limits": {k: health[k] for k in ("max_queries", "max_query_chars", "max_body_bytes")},
        "machine": f"{os.cpu_count()} CPU cores, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}",
        "command": "python bench/retrieval_load.py " + " ".join(sys.argv[1:]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"meta": meta, "runs": [asdict(r) for r in runs]}, indent=2) + "\n"
    )
    print(table(runs))
    print(f"wrote {args.out}")
    failed = sum(r.status_5xx + r.connection_errors + r.wrong_results for r in runs)
    if failed:
        print(f"FAILED: {failed} requests got a 5xx, a connection error or a wrong result")
        print(f"server log (tail):\n{server_log}")
        sys.exit(1)


if __name__ == "__main__":
    main()
