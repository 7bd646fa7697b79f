"""The real presets' starting point on a CPU: the starting model's held-out EM on the wiki
questions and on the harder description-only questions, with BM25's top-3 recall of the gold
article, side by side.

For each config (default: configs/real-smollm2-wiki.yaml and configs/real-smollm2-wiki-hard.yaml)
this prepares the job's inputs exactly as `treegrpo train --config FILE` does (the built-in
model, questions and corpus, built once and cached), evaluates the starting model greedily on
the config's held-out questions with the config's agent limits (what the run reports as
"before"), and measures how often BM25 ranks the gold article in the top 3 for the question
as asked.

    .venv/bin/python bench/wiki_start.py [--questions 100]

writes ``bench/results/wiki_start.json`` and prints a markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from treegrpo.jobs.data import evaluate_model_dir, prepare_inputs
from treegrpo.jobs.presets import TRAIN_SECTIONS
from treegrpo.train.yaml_config import load_config

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ("configs/real-smollm2-wiki.yaml", "configs/real-smollm2-wiki-hard.yaml")


def measure(config: str, questions: int | None) -> dict[str, Any]:
    data = load_config(ROOT / config, TRAIN_SECTIONS)["data"]
    if questions is not None:
        data = replace(data, eval_questions=questions)
    t0 = time.perf_counter()
    inputs = prepare_inputs(data)
    hits = inputs.tool.search([q.question for q in inputs.held_out], 3)
    found = [
        str(q.index) in {p.id for p in ps} for q, ps in zip(inputs.held_out, hits, strict=True)
    ]
    report = evaluate_model_dir(inputs.model_dir, inputs, data)
    assert report is not None
    return {
        "config": config,
        "questions": len(inputs.held_out),
        "top3_recall": sum(found) / len(found),
        "em": report["overall"]["em"],
        "f1": report["overall"]["f1"],
        "valid_format": report["overall"]["valid_format"],
        "tool_calls": report["overall"]["tool_calls"],
        "seconds": time.perf_counter() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS))
    ap.add_argument("--questions", type=int, default=None, help="default: the config's")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/wiki_start.json")
    args = ap.parse_args()
    rows = [measure(c, args.questions) for c in args.configs]
    args.out.write_text(json.dumps({"machine": platform.platform(), "rows": rows}, indent=2))
    print(
        "| config | held-out questions | BM25 top-3 has the article | EM | F1 | valid format "
        "| tool calls | seconds |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['config']} | {r['questions']} | {100 * r['top3_recall']:.0f}% | "
            f"{100 * r['em']:.1f} | {100 * r['f1']:.1f} | {100 * r['valid_format']:.0f}% | "
            f"{r['tool_calls']:.2f} | {r['seconds']:.0f} |"
        )


if __name__ == "__main__":
    main()
