"""Learning curves from a run's metrics.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

from matplotlib.figure import Figure


def plot_learning_curve(run_dir: Path, out: Path | None = None) -> Path:
    """Training reward and EM per step, and held-out EM where evaluated, as a PNG."""
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x]
    steps = [r["step"] for r in rows if "reward/mean" in r]
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    ax.plot(steps, [r["reward/mean"] for r in rows if "reward/mean" in r], label="train reward")
    ax.plot(steps, [r["reward/em"] for r in rows if "reward/em" in r], label="train EM")
    evals = [r for r in rows if "eval/em" in r]
    if evals:
        ax.plot(
            [r["step"] for r in evals],
            [r["eval/em"] for r in evals],
            "o-",
            label="held-out EM (greedy)",
        )
    ax.set_xlabel("RL step")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(run_dir.name)
    out = out or run_dir / "learning_curve.png"
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return out
