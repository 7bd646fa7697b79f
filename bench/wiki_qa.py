"""The wiki reading questions (``treegrpo.data.lead_questions``): how many of each kind, how
often BM25 finds what answers them, and how concentrated their answers are.

For every question of both splits, BM25 (the in-process retriever of ``--data.corpus
wiki:corpus``) searches the question text once, top 3. A single-hop question counts as
*answerable* when a gold answer is a span of one of the 3 passages (SQuAD-normalized, as the
reward compares); its own article among the 3 is reported beside it. A two-hop question counts
its first hop as found when the first article is among the 3 (the second one is named by the
first's answer, so a good agent searches again); how often the answer is already in the top 3
is reported too. Answers: the most common first gold answers of each set and their share.

    .venv/bin/python bench/wiki_qa.py      # about a minute; writes bench/results/wiki_qa.json

and prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from treegrpo.core.rewards import normalize_answer
from treegrpo.data import lead_questions as lq
from treegrpo.data.wiki import load_articles, wiki_corpus
from treegrpo.retrieval.bm25 import BM25Retriever

ROOT = Path(__file__).resolve().parents[1]
TOP = 3


def share(hits: list[bool]) -> float | None:
    return sum(hits) / len(hits) if hits else None


def measure(top_answers: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    built = lq.all_built()
    title = {a.index: a.title for a in load_articles()}
    build_s = time.perf_counter() - t0
    split = {b.question.uid: lq.question_split(b, title) for b in built}
    retriever = BM25Retriever(wiki_corpus())
    t0 = time.perf_counter()
    hits = retriever.search([b.question.question for b in built], topk=TOP)
    search_s = time.perf_counter() - t0
    # (hops, kind) → per-question flags; kind "all" sums a hop's kinds, "templated" the non-cloze
    count: dict[tuple[int, str], Counter[str]] = defaultdict(Counter)
    answer: dict[tuple[int, str], list[bool]] = defaultdict(list)
    article: dict[tuple[int, str], list[bool]] = defaultdict(list)
    examples: dict[str, dict[str, Any]] = {}
    for b, passages in zip(built, hits, strict=True):
        q = b.question
        ids = {p.id for p in passages}
        found_answer = any(lq.is_span(g, p.contents) for g in q.golds for p in passages)
        found_article = str(b.articles[0]) in ids  # the first hop's article
        keys = [(q.hops, q.kind), (q.hops, "all")]
        if q.hops == 1 and not q.kind.startswith("cloze-"):
            keys.append((1, "templated"))  # all single-hop kinds but the cloze fallback
        for key in keys:
            count[key][split[q.uid]] += 1
            answer[key].append(found_answer)
            article[key].append(found_article)
        if split[q.uid] == "test" and q.kind not in examples:
            examples[q.kind] = {"uid": q.uid, "question": q.question, "golds": list(q.golds)}
    first = {"all": 0, "templated": 1}
    kinds = sorted(count, key=lambda k: (k[0], first.get(k[1], 2), -sum(count[k].values()), k[1]))
    rows = [
        {
            "hops": hops,
            "kind": kind,
            "train": count[hops, kind]["train"],
            "test": count[hops, kind]["test"],
            "answer_in_top3": share(answer[hops, kind]),
            "first_article_in_top3": share(article[hops, kind]),
        }
        for hops, kind in kinds
    ]
    answers = {}
    for hops in (1, 2):
        golds = Counter(
            normalize_answer(b.question.golds[0]) for b in built if b.question.hops == hops
        )
        total = sum(golds.values())
        answers[f"hops{hops}"] = {
            "questions": total,
            "largest_share": golds.most_common(1)[0][1] / total,
            "top": [
                {"answer": a, "n": n, "share": n / total} for a, n in golds.most_common(top_answers)
            ],
        }
    return {
        "machine": platform.platform(),
        "build_s": build_s,
        "search_s": search_s,
        "rows": rows,
        "answers": answers,
        "examples": examples,
    }


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--top-answers", type=int, default=10, help="most common answers to list")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/wiki_qa.json")
    args = ap.parse_args()
    out = measure(args.top_answers)
    args.out.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    print(
        "| hops | kind | train | test | BM25 top-3 holds a gold span "
        "| top-3 holds the (first) article |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    for r in out["rows"]:
        kind = f"**{r['kind']}**" if r["kind"] in ("all", "templated") else r["kind"]
        print(
            f"| {r['hops']} | {kind} | {r['train']} | {r['test']} | {pct(r['answer_in_top3'])} "
            f"| {pct(r['first_article_in_top3'])} |"
        )
    for name, a in out["answers"].items():
        top = ", ".join(f"{t['answer']} {100 * t['share']:.1f}%" for t in a["top"][:5])
        print(
            f"\n{name}: {a['questions']} questions, largest answer share "
            f"{100 * a['largest_share']:.1f}% ({top})"
        )
    print(f"\nbuilt in {out['build_s']:.1f} s, searched in {out['search_s']:.1f} s")


if __name__ == "__main__":
    main()
