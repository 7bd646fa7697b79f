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

With ``--model`` it evaluates that model (a built-in name or a directory) instead, on each of
``--sets`` (``NAME`` or ``NAME=COUNT``: that many evenly spaced questions) with the agent limits
of the first config, and adds the share of the commonest answer, how often the first search
holds the question's key terms (``warmstart.reader_demos.key_terms``), where the answers come
from (the title of a retrieved Doc, a span of a retrieved passage's text, or neither: the
model's own words), why the misses were missed (``miss_kind``) and EM per question kind and
per hop count. ``NAME`` may be any question file (FlashRAG jsonl,
Search-R1 parquet) over the wiki corpus:

    .venv/bin/python bench/wiki_start.py --model smollm2-reader \
        --sets wiki-qa:test=100 wiki-qa2:test wiki:test=100 \
        --out bench/results/wiki_reader_start.json
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import re
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from treegrpo.agent.protocol import parse_action
from treegrpo.core.rewards import is_span, normalize_answer
from treegrpo.eval.evaluate import EvalItem
from treegrpo.jobs.data import (
    evaluate_model_dir,
    evenly_spaced,
    make_tool,
    prepare_inputs,
    resolve_model,
    resolve_questions,
)
from treegrpo.jobs.presets import TRAIN_SECTIONS
from treegrpo.jobs.runner import greedy_evaluator
from treegrpo.models.load import load_model
from treegrpo.train.yaml_config import load_config
from treegrpo.warmstart.reader_demos import key_terms

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


_SEARCH = re.compile(r"<search>(.*?)</search>", re.S)


def first_search(response: str) -> str | None:
    """The query of a response's first search step, or None."""
    m = _SEARCH.search(response)
    return parse_action(m[0]).text if m else None


def answer_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The commonest answer and its share of the questions; how often the answer only repeats
    words of the question (its subject: "Australia" for "What is the capital of Australia?",
    the habit of answering the retrieved article); how often the first search holds every key
    term of the question (and the mean share of key terms it holds)."""
    answers = Counter(normalize_answer(r["answer"]) for r in rows if r["answer"] is not None)
    echoes = sum(r["answer"] is not None and is_span(r["answer"], r["question"]) for r in rows)
    top, count = answers.most_common(1)[0] if answers else ("", 0)
    held = []
    for r in rows:
        terms = set(key_terms(r["question"]))
        query = first_search(r["response"])
        words = set(normalize_answer(query).split()) if query is not None else set()
        held.append(len(terms & words) / len(terms) if terms else float(query is not None))
    return {
        "top_answer": top,
        "top_answer_share": count / len(rows),
        "echo_share": echoes / len(rows),
        "first_search_all_key_terms": sum(h == 1.0 for h in held) / len(rows),
        "first_search_key_term_share": sum(held) / len(rows),
    }


MISS_KINDS = ("wrong span", "subject answered", "own words", "no search", "no answer")


def miss_kind(row: dict[str, Any]) -> str:
    """Why a missed question (EM 0) was missed, first match wins: "no answer" (the episode
    ended without one: turn limit, length limit), "no search" (answered without a tool call),
    "subject answered" (the answer only repeats words of the question), "wrong span" (a title
    or a span of what it retrieved, not the gold), "own words" (none of these)."""
    if row["answer"] is None:
        return "no answer"
    if row["tool_calls"] == 0:
        return "no search"
    if is_span(row["answer"], row["question"]):
        return "subject answered"
    return "wrong span" if row["answer_from"] in ("title", "span") else "own words"


def measure_model(
    model: str, sets: list[str], config: str, out: Path | None = None
) -> list[dict[str, Any]]:
    """``model`` evaluated greedily on each of ``sets`` with ``config``'s agent limits; the
    rows so far are written to ``out`` after each set."""
    data = replace(load_config(ROOT / config, TRAIN_SECTIONS)["data"], model=model)
    model_dir = resolve_model(model)
    tool = make_tool(data)
    lm, tokenizer = load_model(model_dir)
    rows: list[dict[str, Any]] = []
    for spec in sets:
        name, _, count = spec.partition("=")
        questions = evenly_spaced(resolve_questions([name]), int(count) if count else None)
        t0 = time.perf_counter()
        evaluate = greedy_evaluator(tool, [EvalItem.of(q) for q in questions], data)
        report = evaluate(lm, tokenizer, "hf")
        overall = report["overall"]
        row = {"model": model, "set": name, "questions": len(questions)}
        row |= {k: overall[k] for k in ("em", "f1", "valid_format", "tool_calls")}
        row |= answer_stats(report["rows"]) | {"seconds": time.perf_counter() - t0}
        row["answer_sources"] = report["answer_from"]  # ``eval.evaluate.answer_source`` shares
        missed = Counter(miss_kind(r) for r in report["rows"] if r["em"] < 1.0)
        row["misses"] = {k: missed[k] for k in MISS_KINDS}
        row["per_kind"] = {k: {"n": v["n"], "em": v["em"]} for k, v in report["by_kind"].items()}
        row["per_hops"] = {k: {"n": v["n"], "em": v["em"]} for k, v in report["by_hops"].items()}
        row["examples"] = [
            {k: r[k] for k in ("question", "golds", "answer", "em")} for r in report["rows"][:8]
        ]
        print(json.dumps({k: v for k, v in row.items() if k not in ("examples", "per_kind")}))
        rows.append(row)
        if out is not None:
            out.write_text(json.dumps({"machine": platform.platform(), "rows": rows}, indent=2))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS))
    ap.add_argument("--questions", type=int, default=None, help="default: the config's")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/wiki_start.json")
    ap.add_argument("--model", default=None, help="evaluate this model on --sets instead")
    ap.add_argument("--sets", nargs="+", default=["wiki-qa:test=100", "wiki-qa2:test"])
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.model is not None:
        rows = measure_model(args.model, args.sets, args.configs[0], args.out)
        print(
            "| model | set | questions | EM | F1 | valid format | tool calls | top answer share "
            "| answer repeats the question | first search has the key terms "
            "| answers: title / span / other | misses: " + " / ".join(MISS_KINDS) + " | seconds |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|")
        for r in rows:
            src = r["answer_sources"]
            print(
                f"| {r['model']} | {r['set']} | {r['questions']} | {100 * r['em']:.1f} | "
                f"{100 * r['f1']:.1f} | {100 * r['valid_format']:.0f}% | {r['tool_calls']:.2f} | "
                f"{100 * r['top_answer_share']:.1f}% ({r['top_answer']}) | "
                f"{100 * r['echo_share']:.0f}% | "
                f"{100 * r['first_search_all_key_terms']:.0f}% | "
                f"{100 * src['title']:.0f}% / {100 * src['span']:.0f}% / {100 * src['other']:.0f}% "
                f"| {' / '.join(str(r['misses'][k]) for k in MISS_KINDS)} | {r['seconds']:.0f} |"
            )
        return
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
