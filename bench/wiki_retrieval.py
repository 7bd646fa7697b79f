"""Dense (all-MiniLM-L6-v2 + FAISS) vs BM25 on the offline Wikipedia corpus, side by side.

Builds (or loads from the cache) both indexes over the 10,033 article leads of
``treegrpo.data.wiki.wiki_corpus()`` and searches every question of one split
(``wiki_questions("test")`` unless ``--split train``); a hit is the gold article's title among
the top 1 / top 3. Reports index build time (the first dense build encodes every passage:
minutes on 2 CPU cores; later runs load it from the cache), hit rates and search time for the
whole question set.

    .venv/bin/python bench/wiki_retrieval.py      # writes bench/results/wiki_retrieval.json
    .venv/bin/python bench/wiki_retrieval.py --retrievers bm25 --split train --out /tmp/r.json
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import torch

from treegrpo.data.wiki import wiki_corpus, wiki_questions
from treegrpo.retrieval.base import SearchTool
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.retrieval.dense import DenseRetriever

ROOT = Path(__file__).resolve().parents[1]


BUILDERS = {"bm25": BM25Retriever, "dense": DenseRetriever}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--retrievers", nargs="+", choices=list(BUILDERS), default=list(BUILDERS))
    ap.add_argument("--split", choices=["train", "test"], default="test")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (the dense encoder)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "wiki_retrieval.json")
    args = ap.parse_args()

    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    corpus = wiki_corpus()
    questions = wiki_questions(args.split)
    tools: dict[str, SearchTool] = {}
    out: dict[str, object] = {"split": args.split, "questions": len(questions)}
    for name in args.retrievers:
        build = BUILDERS[name]
        t0 = time.perf_counter()
        tools[name] = build(corpus)
        out[f"{name}_build_s"] = time.perf_counter() - t0
    for name, tool in tools.items():
        t0 = time.perf_counter()
        hits = tool.search([q.question for q in questions], topk=3)
        seconds = time.perf_counter() - t0
        titles = [[h.contents.split("\n", 1)[0].strip('"') for h in hs] for hs in hits]
        golds = [q.golds[0] for q in questions]
        out[name] = {
            "top1": sum(t[:1] == [g] for t, g in zip(titles, golds, strict=True)) / len(golds),
            "top3": sum(g in t for t, g in zip(titles, golds, strict=True)) / len(golds),
            "search_s": seconds,
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
