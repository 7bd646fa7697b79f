"""Linear layers on CPU: torch's default fp32 path (MKL sgemm) vs oneDNN with packed weights.

Side by side in one run, median of --repeats timings each:
  1. one model's linear layers applied in a row, as a decode step (rows = batch) or a prefill
     (rows = batch × tokens) does, for the bench model of bench/rollout.py (Qwen2, hidden 512,
     8 layers) and SmolLM2-135M's shapes (hidden 576, 30 layers; random weights);
  2. whole forward passes of the bench model (decode: 16 rows × 1 token with a 512-token
     cache; prefill: 8 × 256 tokens), plain vs on packed weights (``CpuSpeedups``, packed
     everywhere).

    .venv/bin/python bench/linear.py --threads 2   # writes bench/results/linear.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from treegrpo.engine.cpu.speedups import CpuSpeedups
from treegrpo.models.tiny import tiny_qwen2

ROOT = Path(__file__).resolve().parents[1]


def median_ms(fn: Callable[[], Any], repeats: int, inner: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t) / inner * 1e3)
    return statistics.median(times)


def layer_shapes(hidden: int, inter: int, q: int, kv: int, layers: int) -> list[tuple[int, int]]:
    per = [(q, hidden), (kv, hidden), (kv, hidden), (hidden, q)]
    per += [(inter, hidden), (inter, hidden), (hidden, inter)]
    return per * layers  # (out, in) of each linear layer


def stack_timing(shapes: list[tuple[int, int]], rows: int, repeats: int) -> dict[str, float]:
    weights = [torch.randn(o, i) * 0.02 for o, i in shapes]
    packs = [torch.ops.mkldnn._reorder_linear_weight(w, rows) for w in weights]
    xs = {i: torch.randn(rows, i) for _, i in shapes}
    inner = max(1, 256 // rows)
    mkl = median_ms(lambda: [F.linear(xs[w.shape[1]], w) for w in weights], repeats, inner)
    onednn = median_ms(
        lambda: [
            torch.ops.mkldnn._linear_pointwise(xs[w.shape[1]], p, None, "none", [], "")
            for w, p in zip(weights, packs, strict=True)
        ],
        repeats,
        inner,
    )
    return {"mkl_ms": mkl, "packed_ms": onednn, "speedup": mkl / onednn}


def forward_timing(repeats: int) -> dict[str, dict[str, float]]:
    model = tiny_qwen2(1024, hidden=512, layers=8, heads=8, kv_heads=4, seed=0).eval()
    out: dict[str, dict[str, float]] = {}
    with torch.no_grad():
        ctx = model(torch.randint(0, 1024, (16, 512)), use_cache=True).past_key_values
        step = torch.randint(0, 1024, (16, 1))
        pos = torch.full((16, 1), 512)

        def decode() -> None:
            model(step, past_key_values=ctx, position_ids=pos, use_cache=True)
            ctx.crop(-1)  # drop the column just written: every call sees 512 cached tokens

        prefill_ids = torch.randint(0, 1024, (8, 256))

        def prefill() -> None:
            model(prefill_ids)

        for name, fn, inner in (("decode_16x1_ctx512", decode, 10), ("prefill_8x256", prefill, 1)):
            plain = median_ms(fn, repeats, inner)
            routes = CpuSpeedups(model, packed=True, trainable=False, fold_lora=False)
            fast = median_ms(fn, repeats, inner)
            routes.detach()
            out[name] = {"mkl_ms": plain, "packed_ms": fast, "speedup": plain / fast}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "linear.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    res: dict[str, Any] = {
        "machine": f"{platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}"
    }
    models = {
        "bench_qwen2_512x8": layer_shapes(512, 2048, 512, 256, 8),
        "smollm2_135m": layer_shapes(576, 1536, 576, 192, 30),
    }
    for name, shapes in models.items():
        for rows in (1, 16, 64, 2048):
            res[f"stack_{name}_rows{rows}"] = stack_timing(shapes, rows, args.repeats)
    res.update({f"forward_{k}": v for k, v in forward_timing(args.repeats).items()})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2))
    print(res["machine"])
    print(
        "\n| linear layers | rows | MKL ms | packed oneDNN ms | speed-up |\n|---|---|---|---|---|"
    )
    for key, r in res.items():
        if key == "machine":
            continue
        label, _, rows = key.rpartition("_rows")
        if not label:
            label, rows = key, "-"
        print(
            f"| {label} | {rows} | {r['mkl_ms']:.2f} | {r['packed_ms']:.2f} | {r['speedup']:.2f}× |"
        )


if __name__ == "__main__":
    main()
