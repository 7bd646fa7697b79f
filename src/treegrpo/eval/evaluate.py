"""Greedy evaluation of a search agent: EM and F1 per data source and per hop count, tool calls,
valid-format share (ALGORITHM.md §5: evaluation is greedy, pure EM)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from treegrpo.agent.prompt import render_prompt
from treegrpo.agent.protocol import SearchProtocol
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.sampler import AgentLimits, sample_forest
from treegrpo.rollout.scoring import score_leaves
from treegrpo.tools.base import SearchTool


@dataclass(frozen=True)
class EvalItem:
    question: str
    golds: list[str]
    source: str = "default"
    hops: int | None = None


def evaluate(
    model: Any,
    tokenizer: Any,
    tool: SearchTool,
    items: Sequence[EvalItem],
    limits: AgentLimits = AgentLimits(),
    max_new_tokens: int = 500,
    max_obs_tokens: int = 500,
    batch_size: int = 64,
) -> dict[str, Any]:
    """Run every question once, greedily, and return aggregate and per-group metrics."""
    protocol = SearchProtocol(tokenizer, max_obs_tokens)
    engine = HFEngine(model, tokenizer, StepStopper(tokenizer))
    greedy = SamplingParams(greedy=True, max_new_tokens=max_new_tokens)
    rows: list[dict[str, Any]] = []
    was_training = getattr(model, "training", False)
    model.eval()
    for start in range(0, len(items), batch_size):
        chunk = list(items[start : start + batch_size])
        prompts = [render_prompt(tokenizer, it.question) for it in chunk]
        rollout = sample_forest(engine, protocol, tool, prompts, TreeShape(1), greedy, limits)
        leaves = [int(x) for x in rollout.forest.leaves()]  # one per prompt, in prompt order
        scores = score_leaves(rollout, leaves, [it.golds for it in chunk], protocol.decode)
        for i, it in enumerate(chunk):
            rows.append(
                {
                    "source": it.source,
                    "hops": it.hops,
                    "em": float(scores.em[i]),
                    "f1": float(scores.f1[i]),
                    "valid_format": float(scores.valid_format[i]),
                    "tool_calls": float(scores.tool_calls[i]),
                    "answer": _answer(rollout, leaves[i], protocol),
                }
            )
    if was_training:
        model.train()
    return summarize(rows)


def _answer(rollout: Any, leaf: int, protocol: SearchProtocol) -> str | None:
    from treegrpo.core.rewards import extract_answer

    return extract_answer(protocol.decode(rollout.action_ids(leaf)))


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means overall, per source and per hop count."""

    def means(rs: Sequence[dict[str, Any]]) -> dict[str, float]:
        return {
            k: float(np.mean([r[k] for r in rs]))
            for k in ("em", "f1", "valid_format", "tool_calls")
        } | {"n": len(rs)}

    by_source: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_hops: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_source[r["source"]].append(r)
        if r["hops"] is not None:
            by_hops[str(r["hops"])].append(r)
    return {
        "overall": means(rows) if rows else {},
        "by_source": {k: means(v) for k, v in sorted(by_source.items())},
        "by_hops": {k: means(v) for k, v in sorted(by_hops.items())},
        "rows": list(rows),
    }


def format_table(report: dict[str, Any], title: str = "evaluation") -> str:
    """A markdown table: one row per source and hop count, then overall."""
    lines = [
        f"### {title}",
        "",
        "| group | n | EM | F1 | valid format | tool calls |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    groups = [(f"source {k}", v) for k, v in report["by_source"].items()]
    groups += [(f"{k}-hop", v) for k, v in report["by_hops"].items()]
    groups.append(("overall", report["overall"]))
    for name, m in groups:
        lines.append(
            f"| {name} | {m['n']} | {100 * m['em']:.1f} | {100 * m['f1']:.1f} | "
            f"{100 * m['valid_format']:.1f} | {m['tool_calls']:.2f} |"
        )
    return "\n".join(lines)


def write_report(report: dict[str, Any], out_dir: Path, name: str = "eval") -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(report, indent=2))
    (out_dir / f"{name}.md").write_text(format_table(report, name) + "\n")
