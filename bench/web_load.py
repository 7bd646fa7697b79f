"""Offline website load: `treegrpo serve-web` (the wiki corpus) under 64 concurrent clients.

What it measures: the start-up time of the real server process (from launch to the first
``/healthz`` answer, and the site's own build time: link index and BM25 index), then
requests/s, p50/p95/p99 latency and errors for a fixed number of requests in two phases:

1. ``httpx``: 64 concurrent ``httpx.AsyncClient`` keep-alive clients in this process, a mix of
   searches (``/search?format=json``, 2-4 words of a random article's lead, or its title) and
   article pages (``/wiki/<slug>``), ``--search-share`` of them searches;
2. ``fetcher``: 64 threads calling ``tools.web.fetch.PageFetcher.fetch`` (its page cache off)
   on article pages and search result pages, each response parsed for its main text and
   links as the ``visit`` tool does (skipped when that module is not there).

An error is a non-200, a transport error, a search answer without a ``results`` list or a page
without its title (phase 1), a ``Failure`` or a page without text (phase 2); there must be
none. Clients and server share the machine's cores (2 here), so run it on an otherwise idle
machine. Raw numbers go to ``bench/results/web_load.json``.

    .venv/bin/python bench/web_load.py                 # well under 2 minutes
    .venv/bin/python bench/web_load.py --requests 2000 --fetch-requests 500   # a quick check
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import numpy as np

from treegrpo.data.wiki import load_articles
from treegrpo.website.corpus import slug

try:  # the fetcher phase runs only where the fetcher module exists
    from treegrpo.tools.registry import Failure
    from treegrpo.tools.web.fetch import PageFetcher
except ImportError:  # pragma: no cover - depends on the checkout
    PageFetcher = None  # type: ignore[assignment,misc]

ROOT = Path(__file__).resolve().parent


@dataclass
class Phase:
    """One phase's totals and latency percentiles (ms)."""

    name: str
    clients: int
    requests: int
    searches: int
    seconds: float
    rps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    errors: int
    first_errors: list[str]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(port: int, log: Path) -> tuple[subprocess.Popen[bytes], float, dict[str, Any]]:
    """`treegrpo serve-web` in a subprocess; returns once /healthz answers, with the seconds
    from launch to that answer and the answer."""
    cmd = [sys.executable, "-m", "treegrpo.cli", "serve-web", "--port", str(port)]
    t0 = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    while time.perf_counter() - t0 < 300:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            if r.status_code == 200:
                return proc, time.perf_counter() - t0, r.json()
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise TimeoutError("serve-web did not come up in 300 s")


def workload(n: int, search_share: float, seed: int) -> list[tuple[str, str, dict[str, str]]]:
    """``n`` requests (kind, path, query parameters), a fixed mix for a seed."""
    rng = random.Random(seed)
    articles = load_articles()
    out = []
    for _ in range(n):
        a = articles[rng.randrange(len(articles))]
        if rng.random() < search_share:
            words = a.extract.split()
            if rng.random() < 0.3 or len(words) < 8:
                q = a.title
            else:
                start = rng.randrange(len(words) - 4)
                q = " ".join(words[start : start + rng.randint(2, 4)])
            out.append(("search", "/search", {"q": q, "format": "json"}))
        else:
            out.append(("page", f"/wiki/{slug(a.title)}", {}))
    return out


def summarize(
    name: str,
    clients: int,
    latencies: list[float],
    searches: int,
    seconds: float,
    errors: list[str],
) -> Phase:
    ms = np.array(latencies) * 1e3
    return Phase(
        name=name,
        clients=clients,
        requests=len(latencies),
        searches=searches,
        seconds=round(seconds, 3),
        rps=round(len(latencies) / seconds, 1),
        p50_ms=round(float(np.percentile(ms, 50)), 2),
        p95_ms=round(float(np.percentile(ms, 95)), 2),
        p99_ms=round(float(np.percentile(ms, 99)), 2),
        errors=len(errors),
        first_errors=errors[:5],
    )


async def httpx_phase(url: str, work: list[tuple[str, str, dict[str, str]]], clients: int) -> Phase:
    """Phase 1: ``clients`` coroutines on one ``httpx.AsyncClient`` pool, requests back to back."""
    latencies: list[float] = []
    errors: list[str] = []
    queue = iter(work)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client(http: httpx.AsyncClient) -> None:
        for kind, path, params in queue:
            t = time.perf_counter()
            try:
                r = await http.get(path, params=params)
                ok = r.status_code == 200 and (
                    isinstance(r.json().get("results"), list)
                    if kind == "search"
                    else "<h1>" in r.text
                )
                if not ok:
                    errors.append(f"{r.status_code} {path} {params}")
            except httpx.HTTPError as exc:
                errors.append(f"{type(exc).__name__} {path}")
            latencies.append(time.perf_counter() - t)

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        seconds = time.perf_counter() - t0
    searches = sum(kind == "search" for kind, _, _ in work)
    return summarize("httpx", clients, latencies, searches, seconds, errors)


def fetcher_phase(url: str, work: list[tuple[str, str, dict[str, str]]], clients: int) -> Phase:
    """Phase 2: ``clients`` threads through one ``PageFetcher`` (no page cache): article pages
    and search result pages, each read for its main text and links."""
    urls = [
        f"{url}{path}" + (f"?{urlencode({'q': params['q']})}" if kind == "search" else "")
        for kind, path, params in work
    ]
    latencies: list[float] = []
    errors: list[str] = []
    with PageFetcher(cache_size=0, workers=clients) as fetcher:

        def one(target: str) -> None:
            t = time.perf_counter()
            page = fetcher.fetch(target)
            latencies.append(time.perf_counter() - t)
            if isinstance(page, Failure) or not page.text.strip():
                errors.append(f"{target}: {page}"[:200])

        t0 = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(one, urls))
        seconds = time.perf_counter() - t0
    searches = sum(kind == "search" for kind, _, _ in work)
    return summarize("fetcher", clients, latencies, searches, seconds, errors)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=8000, help="phase 1 requests")
    parser.add_argument("--fetch-requests", type=int, default=2000, help="phase 2 requests")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--search-share", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "web_load.json")
    args = parser.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "serve-web.log"
        proc, ready_s, health = start(port, log)
        try:
            warm = workload(200, args.search_share, args.seed + 1)
            asyncio.run(httpx_phase(url, warm, args.clients))  # connections, first pages
            phases = [
                asyncio.run(
                    httpx_phase(
                        url, workload(args.requests, args.search_share, args.seed), args.clients
                    )
                )
            ]
            if PageFetcher is not None:
                work = workload(args.fetch_requests, args.search_share, args.seed + 2)
                phases.append(fetcher_phase(url, work, args.clients))
            after = httpx.get(f"{url}/healthz", timeout=10).json()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    result = {
        "bench": "web_load",
        "command": "bench/web_load.py " + " ".join(sys.argv[1:]),
        "machine": f"{os.cpu_count()} CPU cores, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}",
        "startup": {
            "launch_to_healthz_s": round(ready_s, 2),
            "site_build_s": health["startup_s"],
            "articles": health["articles"],
            "links": health["links"],
        },
        "phases": [asdict(p) for p in phases],
        "server_after": after,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"serve-web: {health['articles']} pages, {health['links']} links; ready "
        f"{ready_s:.1f} s after launch (site build {health['startup_s']:.2f} s)"
    )
    print(f"{'phase':<8} {'clients':>7} {'requests':>8} {'searches':>8} {'req/s':>8} "
          f"{'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'errors':>6}")  # fmt: skip
    for p in phases:
        print(
            f"{p.name:<8} {p.clients:>7} {p.requests:>8} {p.searches:>8} {p.rps:>8.1f} "
            f"{p.p50_ms:>7.1f} {p.p95_ms:>7.1f} {p.p99_ms:>7.1f} {p.errors:>6}"
        )
    for p in phases:
        for e in p.first_errors:
            print(f"  {p.name} error: {e}")
    print(f"wrote {args.out}")
    return 1 if any(p.errors for p in phases) else 0


if __name__ == "__main__":
    sys.exit(main())
