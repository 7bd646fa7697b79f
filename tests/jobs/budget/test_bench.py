"""Tier 3: the budget-matched benchmark end to end on a tiny setting (a tiny warm start, two
seeds, budgets 2 and 4, one RL step, a few held-out questions, in-process): every run is in the
JSON with its numbers, the aggregates are the mean and std of those numbers, the table and the
plots are written, and running it again reuses every finished run. Tier 2: the same protocol in
data mode (a run config with the tiny agent, question files and a corpus): the config's sections
reach every run, the starting model is evaluated once, and finished runs are reused."""

from __future__ import annotations

import importlib
import json
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_fixtures import TINY_WARM
from treegrpo import cli
from treegrpo.jobs.budget.plan import BENCH_OPTIM, bench_settings, plan_runs, run_config
from treegrpo.jobs.budget.records import NUMERIC
from treegrpo.jobs.budget.run import run_benchmark
from treegrpo.jobs.embedded import run_embedded
from treegrpo.jobs.presets import DEFAULT_EMBEDDED
from treegrpo.train.task import TrainSettings


@pytest.mark.slow
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
    names = {sp.name for sp in plan_runs(s)}
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
    # one step: each run's held-out curve is the warm start at 0 and "after" at its spend
    for r in runs.values():
        curve = r["held_out_curve"]
        assert curve["step"] == [0, 1] and curve["em"] == [
            saved["warm_start"]["overall"]["em"],
            r["em"],
        ]
        assert curve["tokens"][1] == pytest.approx(r["generated_total_per_prompt"])
    assert "At equal spend" in table and "| ≈4 | tree | chain | equal generated tokens |" in table
    pngs = sorted(s.out.parent.glob("budget-tiny_*.png"))
    assert len(pngs) == 5  # with EM against tokens and against time
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
    spec = plan_runs(replace(s, budgets=(2,), seeds=(0,)))[0]
    run = replace(run_config(spec, s), out_dir=str(tmp_path / "own-eval"))
    world = replace(DEFAULT_EMBEDDED, eval_questions=s.eval_questions)
    settings = TrainSettings(spec.algo, BENCH_OPTIM, run)
    own = run_embedded(settings, world, warm=TINY_WARM, progress=False)
    assert own["before"] == saved["warm_start"]


@pytest.mark.slow
def test_budget_benchmark_data_mode(
    model_dir: Path, files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "bench.yaml"
    sections = {
        "algo": {"algo": "tree", "m": 2, "n": 2, "l": 1, "k": 3, "kl_coef": 0.0},
        "optim": {"lr": 1.0e-4, "mini_batch_prompts": 2, "micro_batch_tokens": 2000},
        "run": {"out_dir": str(tmp_path / "unused"), "steps": 5, "prompts_per_step": 2},
        "model": {"device": "cpu"},
        "data": {
            "model": str(model_dir),
            "train_files": [str(files["train"])],
            "eval_files": [str(files["test"])],
            "eval_questions": 3,
            "corpus": str(files["corpus"]),
            "max_turns": 2,
            "max_new_tokens": 40,
            "max_obs_tokens": 120,
            "max_context": 1024,
        },
    }
    config.write_text(yaml.safe_dump(sections))
    out, runs_dir = tmp_path / "results" / "budget-data.json", tmp_path / "runs"
    evaluated: list[int] = []  # questions per call of the evaluation run_data uses
    module = importlib.import_module("treegrpo.jobs.runner")  # where run_data's evaluate is
    real = module.evaluate

    def counting(*args: Any, **kwargs: Any) -> dict[str, Any]:
        evaluated.append(len(args[3]))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "evaluate", counting)

    def bench(steps: int = 1) -> None:
        args = ["bench", "budget", "--quick", "--config", str(config), "--budgets", "2"]
        cli.main([*args, "--steps", str(steps), "--out", str(out), "--runs-dir", str(runs_dir)])

    bench()
    saved = json.loads(out.read_text())
    s = saved["settings"]
    assert (s["steps"], s["prompts_per_step"], s["eval_questions"]) == (1, 2, 3)  # flag, file
    assert s["workers"] == 1 and s["seeds"] == [0] and s["budgets"] == [2]
    assert s["job"]["data"]["train_files"] == [str(files["train"])]
    assert s["job"]["config"] == str(config) and saved["warm_starts"] == {}
    assert evaluated == [3, 3, 3]  # the starting model once, then each run after training

    start = saved["warm_start"]  # the starting model's report
    assert start["overall"]["n"] == 3 and start["by_hops"] == {}
    assert list(start["by_source"]) == ["nq", "hotpotqa"]
    runs = {r["name"]: r for r in saved["runs"]}
    assert set(runs) == {"chain-b2-s0", "tree-b2-s0"} and not saved["failed"]
    algos = {}
    for name, r in runs.items():
        assert r["em_by_hops"] == {} and list(r["em_by_source"]) == ["nq", "hotpotqa"]
        summary = json.loads((runs_dir / name / "summary.json").read_text())
        assert summary["before"] == start  # handed over, not evaluated again
        assert summary["model_dir"] == str(model_dir)
        cfg = summary["config"]
        assert {k: cfg["data"][k] for k in sections["data"]} == sections["data"]
        assert cfg["algo"]["kl_coef"] == 0.0 and cfg["optim"]["mini_batch_prompts"] == 2
        assert cfg["run"]["steps"] == 1 and cfg["run"]["out_dir"] == str(runs_dir / name)
        assert cfg["model"]["device"] == "cpu"
        algos[name] = cfg["algo"]
    assert (algos["chain-b2-s0"]["algo"], algos["chain-b2-s0"]["m"]) == ("chain", 2)
    tree = algos["tree-b2-s0"]
    assert (tree["algo"], tree["m"], tree["n"], tree["l"], tree["k"]) == ("tree", 1, 2, 1, None)

    table = out.with_suffix(".md").read_text()
    assert "data mode" in table and f"Data: config {config}" in table and "| ≈2 |" in table
    assert "EM by source nq/hotpotqa" in table and "by hop" not in table
    assert len(sorted(out.parent.glob("budget-data_*.png"))) == 5

    # Re-running the same command reuses both runs: nothing is evaluated or trained again.
    evaluated.clear()
    bench()
    again = json.loads(out.read_text())
    assert again["counts"] == {"runs": 2, "ran": 0, "reused": 2} and evaluated == []
    assert again["warm_start"] == start and again["aggregates"] == saved["aggregates"]
    with pytest.raises(SystemExit, match="other settings"):
        bench(steps=2)
