"""Memorization check for the embedded job: does RL learn to search, or the training answers?

For each finished run directory, greedy EM of the warm start and of the run's final checkpoint
on two question sets of the same size: the first RL world (the train world of
``train_eval_worlds``, whose questions RL sampled from) and the held-out world. A run that
learned the training world's answers by heart gains much more on the first than on the second;
one that learned to search gains on both alike. Limits and question counts are the run's own
(read from its ``summary.json``).

    .venv/bin/python bench/transfer.py runs/default [more run dirs ...] --out transfer.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from treegrpo.data.synthetic import World
from treegrpo.eval.evaluate import evaluate
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.tools.bm25 import BM25Retriever
from treegrpo.train.checkpoint import latest_checkpoint
from treegrpo.train.embedded import held_out_items, load_model, rl_and_eval_worlds
from treegrpo.train.presets import EmbeddedConfig


def em_by_world(model_dir: Path, worlds: dict[str, World], cfg: EmbeddedConfig) -> dict[str, Any]:
    """Greedy EM (overall and per hop) of the model in ``model_dir`` on each named world."""
    model, tok = load_model(model_dir)
    limits = AgentLimits(cfg.max_turns, 3, cfg.max_context)
    out: dict[str, Any] = {}
    for name, world in worlds.items():
        tool = BM25Retriever(world.passages, use_cache=False)
        items = held_out_items(world, cfg.eval_questions)
        report = evaluate(model, tok, tool, items, limits, cfg.max_new_tokens, cfg.max_obs_tokens)
        out[name] = {
            "em": report["overall"]["em"],
            "n": report["overall"]["n"],
            "by_hops": {str(k): v["em"] for k, v in report["by_hops"].items()},
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="finished embedded-job run directories")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    results: dict[str, Any] = {}
    warm_cache: dict[tuple[str, str], dict[str, Any]] = {}
    for run in args.runs:
        summary = json.loads((run / "summary.json").read_text())
        cfg = EmbeddedConfig(**summary["config"]["embedded"])
        rl_worlds, eval_world = rl_and_eval_worlds(cfg)
        worlds = {"train world": rl_worlds[0], "held-out world": eval_world}
        final = latest_checkpoint(run)
        if final is None:
            raise SystemExit(f"{run}: no checkpoint (is the run finished?)")
        key = (summary["warm_start_dir"], json.dumps(summary["config"]["embedded"]))
        if key not in warm_cache:
            warm_cache[key] = em_by_world(Path(summary["warm_start_dir"]), worlds, cfg)
        results[str(run)] = {
            "train_worlds": cfg.train_worlds,
            "warm start": warm_cache[key],
            "after RL": em_by_world(final / "model", worlds, cfg),
        }

    print("| run | RL worlds | train world EM before → after | held-out EM before → after |")
    print("|---|---:|---:|---:|")
    for run, r in results.items():
        w, a = r["warm start"], r["after RL"]
        cells = [
            f"{100 * w[k]['em']:.1f} → {100 * a[k]['em']:.1f}"
            for k in ("train world", "held-out world")
        ]
        print(f"| {run} | {r['train_worlds']} | {cells[0]} | {cells[1]} |")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
