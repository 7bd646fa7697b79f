"""A web agent's evaluations per question kind: for each run directory of a web preset
(`treegrpo train --config configs/real-smollm2-web.yaml`), its held-out reports before and after
RL as EM, F1, searches and visits per question, how often a
gold answer stood in an observation (search or browsing found it), and where the answers came
from (a result's title, words of a snippet or page, the model's own words), per kind
(in-snippet, in-page, link) and overall.

    .venv/bin/python bench/web_agent.py RUN_DIR [RUN_DIR ...] --out bench/results/real-web.json

Reads ``eval-before.json`` and ``eval-after.json`` of each run (and the held-out EM of the
evaluations in between from ``metrics.jsonl``), recomputes ``answer_seen`` and ``answer_from``
from the rows (so reports written before these were recorded read the same), writes the JSON
and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from treegrpo.eval.evaluate import ANSWER_SOURCES, answer_seen, answer_source


def kind_rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per kind (then "overall"): n and the means of one evaluation report's rows."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in report["rows"]:
        groups[row.get("kind") or "none"].append(row)
        groups["overall"].append(row)
    out = {}
    for kind in sorted(groups, key=lambda k: (k == "overall", k)):
        rows = groups[kind]
        n = len(rows)
        sources = Counter(answer_source(r["answer"], r["response"]) for r in rows)
        out[kind] = {
            "n": n,
            "em": 100 * sum(r["em"] for r in rows) / n,
            "f1": 100 * sum(r["f1"] for r in rows) / n,
            "searches": sum(r.get("calls/search", r["tool_calls"]) for r in rows) / n,
            "visits": sum(r.get("calls/visit", 0.0) for r in rows) / n,
            "answer_seen": 100 * sum(answer_seen(r["golds"], r["response"]) for r in rows) / n,
            "answer_from": {s: 100 * sources[s] / n for s in ANSWER_SOURCES},
            "tokens": sum(r["generated_tokens"] for r in rows) / n,
        }
    return out


def run_reports(run: Path) -> dict[str, dict[str, Any]]:
    """The run's evaluation reports by name: before and after."""
    return {
        name: json.loads((run / f"eval-{name}.json").read_text())
        for name in ("before", "after")
        if (run / f"eval-{name}.json").is_file()
    }


def curve(run: Path) -> dict[int, float]:
    """Held-out EM (%) of the evaluations during the run, by step (``run.eval_every``)."""
    out = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        m = json.loads(line)
        if "eval/em" in m:
            out[int(m["step"])] = 100 * m["eval/em"]
    return out


def table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    lines = [
        "| run, evaluation | kind | n | EM | F1 | searches | visits | answer seen | "
        "answers: title / span / other |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, kinds in results.items():
        for kind, m in kinds.items():
            src = " / ".join(f"{m['answer_from'][s]:.0f}%" for s in ANSWER_SOURCES[:3])
            lines.append(
                f"| {name} | {kind} | {m['n']} | {m['em']:.1f} | {m['f1']:.1f} | "
                f"{m['searches']:.2f} | {m['visits']:.2f} | {m['answer_seen']:.0f}% | {src} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="run directories")
    parser.add_argument("--out", type=Path, default=Path("bench/results/real-web.json"))
    args = parser.parse_args()
    results = {
        f"{run.name} {name}": kind_rows(report)
        for run in args.runs
        for name, report in run_reports(run).items()
    }
    curves = {run.name: curve(run) for run in args.runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"by_kind": results, "curves": curves}, indent=1) + "\n")
    print(table(results))
    for name, points in curves.items():
        print(f"{name}: held-out EM during RL", {k: round(v, 1) for k, v in points.items()})


if __name__ == "__main__":
    main()
