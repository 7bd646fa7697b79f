"""Learning curves from a run's metrics.jsonl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure


def held_out_points(
    rows: list[dict[str, Any]], before: float | None = None, after: float | None = None
) -> list[tuple[int, float]]:
    """(step, held-out EM): ``before`` at step 0, the periodic evaluations of ``rows``, and
    ``after`` at the last step (unless a periodic evaluation already stands there)."""
    points = [] if before is None else [(0, before)]
    points += [(r["step"], r["eval/em"]) for r in rows if "eval/em" in r]
    last = max((r["step"] for r in rows), default=0)
    if after is not None and (not points or points[-1][0] != last):
        points.append((last, after))
    return points


def plot_learning_curve(
    run_dir: Path, before: float | None = None, after: float | None = None
) -> Path:
    """Train reward and EM per step, held-out EM (before, periodic, after): learning_curve.png."""
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x]
    steps = [r["step"] for r in rows if "reward/mean" in r]
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    ax.plot(steps, [r["reward/mean"] for r in rows if "reward/mean" in r], label="train reward")
    ax.plot(steps, [r["reward/em"] for r in rows if "reward/em" in r], label="train EM")
    evals = held_out_points(rows, before, after)
    if evals:
        ax.plot(*zip(*evals, strict=True), "o-", label="held-out EM (greedy)")
    ax.set_xlabel("RL step")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(run_dir.name)
    out = run_dir / "learning_curve.png"
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return out
