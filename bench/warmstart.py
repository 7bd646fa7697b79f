"""Warm-start diagnostics: build (or load from the cache) the embedded job's warm start for a
setting and report what it can do before any RL.

1. Held-out EM, greedy, on the default job's 150 eval-world questions (overall and per hop).
2. Teacher-forced next-token accuracy on perfect eval-world demonstrations, split by what the
   token is: a name continued once started, or a name's first token per step and position
   ("step1<think>#2": the third name started in the second thought). This separates copying
   (continuations) from choosing what to copy (name starts) and from reading a fact.

    .venv/bin/python bench/warmstart.py                          # the defaults
    .venv/bin/python bench/warmstart.py --set '{"two_token": 0}'   # a WarmStartConfig variant
"""

from __future__ import annotations

import argparse
import collections
import json
from dataclasses import replace

import numpy as np
import torch

from treegrpo.agent.protocol import SearchProtocol
from treegrpo.data.synthetic import train_eval_worlds
from treegrpo.eval.evaluate import evaluate
from treegrpo.models.demos import build_demos
from treegrpo.models.search_tokenizer import name_start_ids
from treegrpo.models.warmstart import WarmStartConfig, warm_start
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.tools.bm25 import BM25Retriever
from treegrpo.train.embedded import held_out_items, load_model
from treegrpo.train.presets import DEFAULT_EMBEDDED


def teacher_forced(model: torch.nn.Module, tok: object, n_demos: int) -> dict[str, float]:
    """Accuracy per token category on ``n_demos`` perfect eval-world demonstrations."""
    _, world = train_eval_worlds(DEFAULT_EMBEDDED.world_seed)
    protocol = SearchProtocol(tok, DEFAULT_EMBEDDED.max_obs_tokens)
    perfect = {"perfect": 1.0, "vague": 0.0, "skip": 0.0, "early": 0.0}
    tool = BM25Retriever(world.passages, use_cache=False)
    demos = build_demos([(world, tool)], tok, protocol, n_demos, perfect, seed=5)  # type: ignore[arg-type]
    starts = set(name_start_ids(tok))  # type: ignore[arg-type]
    tags = {tok.convert_tokens_to_ids(t): t for t in ("<think>", "<search>", "<answer>")}  # type: ignore[attr-defined]
    hits: dict[str, list[int]] = collections.defaultdict(list)
    for d in demos:
        with torch.no_grad():
            pred = model(input_ids=torch.tensor([d.ids])).logits[0].argmax(-1)  # (T,)
        seg, k, step, in_name = "", 0, -1, False
        for i in range(1, len(d.ids)):
            t = d.ids[i]
            if not d.mask[i]:
                in_name = False
                continue
            if t in tags:
                seg, k = tags[t], 0
                step += seg == "<think>"
                in_name = False
                continue
            text = str(tok.decode([t]))  # type: ignore[attr-defined]
            ok = int(pred[i - 1] == t)
            if t in starts:
                hits[f"name start step{step}{seg}#{k}"].append(ok)
                k += 1
                in_name = True
            elif in_name and text.isalpha() and text.islower():
                hits["name continued"].append(ok)
            else:
                in_name = False
    return {key: float(np.mean(v)) for key, v in sorted(hits.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", default="{}", help="JSON object of WarmStartConfig fields")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--demos", type=int, default=80)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = replace(WarmStartConfig(), **json.loads(args.set))
    path = warm_start(cfg, progress=False)
    stats = json.loads((path / "warmstart.json").read_text())
    model, tok = load_model(path)
    job = DEFAULT_EMBEDDED  # the default job's held-out set and agent limits
    _, world = train_eval_worlds(job.world_seed)
    items = held_out_items(world, job.eval_questions)
    tool = BM25Retriever(world.passages, use_cache=False)
    limits = AgentLimits(job.max_turns, 3, job.max_context)
    report = evaluate(model, tok, tool, items, limits, job.max_new_tokens, job.max_obs_tokens)
    out = {
        "warm_start": str(path),
        "sft_loss_last": stats["sft_loss_last"],
        "build_seconds": stats["seconds"],
        "em": report["overall"]["em"],
        "valid_format": report["overall"]["valid_format"],
        "tool_calls": report["overall"]["tool_calls"],
        "em_by_hops": {h: v["em"] for h, v in report["by_hops"].items()},
        "teacher_forced": teacher_forced(model, tok, args.demos),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
