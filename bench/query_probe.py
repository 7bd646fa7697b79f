"""Is a warm start prone to collapse before RL? Teacher-forced query copying by depth.

For each warm start, the flawless demonstrations of another demonstration draw (seed 100, so
no warm start was fitted on them) with three or more searches are run through the model once;
at the k-th ``<search>`` of each, the query is read off greedily token by token under teacher
forcing. Reported per depth k: the share of queries written exactly, and the mean summed NLL of
their tokens. A query copies the entity just read and the next relation from the thought
before it ("<think> Bari's rival </think><search> Bari's rival </search>"), so a low share at
depth 3 means the policy writes deep queries badly from a perfect context: on the EPYC AVX-512
the warm starts whose RL runs ended below 85 had the lowest shares (docs/algorithm.md §9).

The same pass reads every action turn of the flawless demonstrations (``turns``): "go k", the
k-th search turn, thought included, and "stop h", the final turn of an h-hop question ("<think>
Zc </think><answer> Zc </answer>" after the h-th observation), where a policy that has lost
count writes another search ("<think> Zc's friend ...").

    python bench/query_probe.py --warm-starts 0:mkl 0:onednn 1:mkl 1:onednn 2:mkl \\
        0:mkl:hidden=192 2:mkl:layers=6 --out bench/results/query_probe.json

A warm start is SEED:PATH[:FIELD=INT...] over ``warmstart.tiny.WarmStartConfig`` (built on
first use, then cached).
"""

from __future__ import annotations

import argparse
import json
from itertools import groupby
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from treegrpo.train.sft import SFTExample
from treegrpo.warmstart.tiny import WarmStartConfig, demonstrations, warm_start

PROBE_SEED = 100  # the demonstration draw probed: not any warm start's own


def recipe(spec: str) -> WarmStartConfig:
    """``SEED:PATH[:FIELD=INT...]`` as a warm-start recipe."""
    seed, path, *extra = spec.split(":")
    fields = {k: int(v) for k, v in (e.split("=") for e in extra)}
    return WarmStartConfig(seed=int(seed), linear=path, **fields)  # type: ignore[arg-type]


def _log_probs(model: Any, d: SFTExample) -> torch.Tensor:
    """(T-1, V): the log-probabilities of each next token of ``d`` under teacher forcing."""
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([d.ids])).logits[0, :-1].float(), -1)


def _summary(exact: dict[Any, list[bool]], nll: dict[Any, list[float]]) -> dict[Any, Any]:
    """Per key: the count, the share written exactly and the mean summed NLL."""
    return {
        k: {"n": len(v), "exact": sum(v) / len(v), "nll": sum(nll[k]) / len(v)}
        for k, v in sorted(exact.items())
    }


def probe(model: Any, demos: list[SFTExample], open_id: int, close_id: int) -> dict[int, Any]:
    """Per search depth: (queries written exactly, mean summed NLL of the query tokens)."""
    exact: dict[int, list[bool]] = {}
    nll: dict[int, list[float]] = {}
    for d in demos:
        logp = _log_probs(model, d)  # (T-1, V)
        depth, inside, hits, loss = 0, False, [], 0.0
        for t in range(1, len(d.ids)):
            if d.ids[t - 1] == open_id and d.mask[t]:
                depth, inside, hits, loss = depth + 1, True, [], 0.0
            if inside:
                hits.append(int(logp[t - 1].argmax()) == d.ids[t])
                loss -= float(logp[t - 1, d.ids[t]])
                if d.ids[t] == close_id:
                    inside = False
                    exact.setdefault(depth, []).append(all(hits))
                    nll.setdefault(depth, []).append(loss)
    return _summary(exact, nll)


def stop_probe(model: Any, demos: list[SFTExample]) -> dict[str, Any]:
    """Every action turn of the flawless demonstrations under teacher forcing, by kind: "stop h"
    (the final turn of an h-hop question) and "go k" (the k-th turn, a search): (turns written
    exactly, mean summed NLL of their tokens). A turn is a run of trained tokens."""
    exact: dict[str, list[bool]] = {}
    nll: dict[str, list[float]] = {}
    for d in demos:
        logp = _log_probs(model, d)  # (T-1, V)
        trained = [list(g) for m, g in groupby(range(1, len(d.ids)), d.mask.__getitem__) if m == 1]
        for k, run in enumerate(trained, 1):
            name = f"stop {len(trained) - 1}" if k == len(trained) else f"go {k}"
            target = torch.tensor(d.ids[run[0] : run[-1] + 1])  # (n,)
            turn = logp[run[0] - 1 : run[-1]]  # (n, V): the turn's predictions
            exact.setdefault(name, []).append(bool((turn.argmax(-1) == target).all()))
            nll.setdefault(name, []).append(-float(turn.gather(1, target[:, None]).sum()))
    return _summary(exact, nll)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warm-starts", nargs="+", default=["0:mkl", "0:onednn"])
    ap.add_argument("--demos", type=int, default=150, help="demonstrations probed")
    ap.add_argument("--stop-demos", type=int, default=600, help="demonstrations probed for stops")
    ap.add_argument("--out", type=Path, default=Path("bench/results/query_probe.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    every = demonstrations(WarmStartConfig(seed=PROBE_SEED), oracle=True)
    out: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    for spec in args.warm_starts:
        model_dir = warm_start(recipe(spec), progress=False)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        open_id, close_id = tokenizer.convert_tokens_to_ids(["<search>", "</search>"])
        deep = [d for d in every if d.ids.count(open_id) >= 3][: args.demos]
        model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        found: dict[Any, Any] = probe(model, deep, open_id, close_id)
        found["turns"] = stop_probe(model, every[: args.stop_demos])
        out[spec] = found
        depths = [(f"depth {k}", v) for k, v in found.items() if k != "turns"]
        cells = depths + list(found["turns"].items())
        row = ", ".join(f"{name}: {v['exact']:.3f} ({v['nll']:.3f})" for name, v in cells)
        print(f"{spec}: {row}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
