"""Tier 3: the budget-matched benchmark end to end on a tiny setting (a tiny warm start, two
seeds, budgets 2 and 4, one RL step, a few held-out questions, in-process): every run is in the
JSON with its numbers, the aggregates are the mean and std of those numbers, the table and the
plots are written, and running it again reuses every finished run."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from treegrpo.eval.budget_bench import bench_settings, plan_runs, run_benchmark, run_config
from treegrpo.eval.budget_report import NUMERIC
from treegrpo.models.warmstart import WarmStartConfig
from treegrpo.train.embedded import run_embedded
from treegrpo.train.presets import DEFAULT_EMBEDDED, DEFAULT_OPTIM

TINY_WARM = WarmStartConfig(
    demo_worlds=1, vocab_size=600, hidden=32, layers=2, n_demos=40, steps=3, warmup=1
)


def test_budget_benchmark_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TREEGRPO_CACHE_DIR", str(tmp_path / "cache"))
    s = bench_settings(
        quick=True,
        seeds=(0, 1),
        steps=1,
        prompts_per_step=2,
        eval_questions=4,
        workers=1,
        out=tmp_path / "results" / "budget-tiny.json",
        runs_dir=tmp_path / "runs",
    )
    result = run_benchmark(s, warm=TINY_WARM, command="tiny")
    names = {sp.name for sp in plan_runs(s.budgets, s.seeds, s.ablation)}
    assert len(names) == 8 and not result["failed"]

    saved = json.loads(s.out.read_text())
    runs = {r["name"]: r for r in saved["runs"]}
    assert set(runs) == names
    for r in runs.values():
        assert set(NUMERIC) <= set(r) and r["em_by_hops"] and len(r["curve"]["reward_em"]) == 1
        assert r["leaves_per_prompt"] > 0 and r["generated_per_prompt"] > 0
    for agg in saved["aggregates"]:
        mine = [
            r for r in runs.values() if (r["method"], r["budget"]) == (agg["method"], agg["budget"])
        ]
        assert len(mine) == 2
        for key in ("em", "generated_per_prompt", "trajectories_per_1k_tokens"):
            xs = [r[key] for r in mine]
            assert agg[key]["mean"] == pytest.approx(statistics.mean(xs))
            assert agg[key]["std"] == pytest.approx(statistics.stdev(xs))

    table = s.out.with_suffix(".md").read_text()
    assert "| ≈2 |" in table and "| ≈4 |" in table and "Command: `tiny`" in table
    pngs = sorted(s.out.parent.glob("budget-tiny_*.png"))
    assert len(pngs) == 3
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000

    # Re-running the same command reuses every finished run: nothing is trained again.
    stamps = {n: (s.runs_dir / n / "summary.json").stat().st_mtime_ns for n in names}
    again = run_benchmark(s, warm=TINY_WARM, command="tiny")
    assert again["counts"] == {"runs": 8, "ran": 0, "reused": 8}
    assert stamps == {n: (s.runs_dir / n / "summary.json").stat().st_mtime_ns for n in names}
    assert again["aggregates"] == saved["aggregates"]

    # A finished run made with other settings is never mixed in.
    with pytest.raises(SystemExit, match="other settings"):
        run_benchmark(replace(s, steps=2), warm=TINY_WARM)

    # The shared warm-start report equals what run_embedded evaluates by itself.
    spec = plan_runs((2,), (0,), False)[0]
    run = replace(run_config(spec, s), out_dir=str(tmp_path / "own-eval"))
    world = replace(DEFAULT_EMBEDDED, eval_questions=s.eval_questions)
    own = run_embedded(spec.algo, DEFAULT_OPTIM, run, world, warm=TINY_WARM, progress=False)
    assert own["before"] == saved["warm_start"]
