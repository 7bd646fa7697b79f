"""The verdict's plan: difficulty-budget runs, the quarter-budget chains, the validation world,
periodic evaluation, and reuse of runs made before a setting existed."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from treegrpo import cli
from treegrpo.jobs.budget import run as budget_bench
from treegrpo.jobs.budget.plan import (
    BENCH_OPTIM,
    BenchSettings,
    bench_settings,
    check_reusable,
    plan_runs,
    run_config,
    run_world,
    warm_start_choices,
    world_config,
)
from treegrpo.warmstart.tiny import WarmStartConfig, warm_start_dir


def test_plan_adds_difficulty_runs_and_quarter_chains() -> None:
    s = BenchSettings(budgets=(4, 8), seeds=(0, 1), ablation=False, expansions=("no-root",),
                      difficulty=("no-root",), quarter=True)  # fmt: skip
    specs = plan_runs(s)
    by = {s.name: s for s in specs}
    # per seed: 4 methods at 4 and 8, and 16 chains for the trees at ≈4 (≈32 has no rung)
    assert len(specs) == len(by) == 2 * (2 * 4 + 1)
    hard = by["tree-no-root+difficulty-b8-s1"]
    assert hard.algo.expansion == "no-root" and hard.algo.expansion_budget == "difficulty"
    assert (hard.algo.m, hard.algo.n, hard.algo.l) == (2, 6, 1)
    assert hard.identity()["expansion_budget"] == "difficulty"
    assert by["tree-no-root-b8-s1"].algo.expansion_budget == "per-tree"
    assert by["tree-b4-s0"].algo.expansion_budget == "per-tree"
    quarter = by["chain-b16-s0"]
    assert (quarter.algo.algo, quarter.algo.m) == ("chain", 16)
    # a rung already planned is not planned twice
    planned = BenchSettings(budgets=(4, 16), seeds=(0,), ablation=False, quarter=True)
    assert len(plan_runs(planned)) == 4


def test_settings_for_the_validation_world_and_periodic_evaluation() -> None:
    s = bench_settings(world_seed=1, budgets=(8,))
    assert s.out == Path("bench/results/budget-world1.json")
    assert s.runs_dir == Path("runs/bench-budget/full-world1")
    assert world_config(s).world_seed == 1 and s.eval_every == 5
    # the run's held-out evaluation follows the benchmark's
    (spec, *_) = plan_runs(BenchSettings(budgets=(8,), seeds=(0,), ablation=False))
    assert run_config(spec, s).eval_every == 5
    assert run_config(spec, bench_settings(quick=True)).eval_every == 2
    assert bench_settings(world_seed=1, out=Path("x.json")).out == Path("x.json")
    with pytest.raises(ValueError, match="difficulty takes uniform, no-root"):
        bench_settings(difficulty=("hard",))
    with pytest.raises(ValueError, match="must be >= 0"):
        bench_settings(eval_every=-1)


def test_cli_takes_the_verdicts_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[BenchSettings] = []

    def fake(s: BenchSettings, warm: Any = None, command: str | None = None) -> dict[str, Any]:
        seen.append(s)
        return {"failed": []}

    monkeypatch.setattr(budget_bench, "run_benchmark", fake)
    cli.main(["bench-budget", "--difficulty", "uniform", "no-root", "--quarter",
              "--world-seed", "2", "--eval-every", "4"])  # fmt: skip
    s = seen[0]
    assert s.difficulty == ("uniform", "no-root") and s.quarter
    assert s.world_seed == 2 and s.eval_every == 4
    cli.main(["bench-budget"])
    assert seen[1].difficulty == () and not seen[1].quarter and seen[1].world_seed == 0


def test_reuse_takes_a_setting_added_since_at_its_default(tmp_path: Any) -> None:
    s = bench_settings(difficulty=("uniform",), runs_dir=tmp_path)
    warm = WarmStartConfig()
    one = BenchSettings(budgets=(4,), seeds=(0,), ablation=False, difficulty=("uniform",))
    specs = {sp.method: sp for sp in plan_runs(one)}

    def summary(algo: Any, drop: str | None = None) -> dict[str, Any]:
        run = {"steps": s.steps, "prompts_per_step": s.prompts_per_step, "seed": 0}
        cfg = {"algo": asdict(algo), "optim": asdict(BENCH_OPTIM), "run": run}
        cfg["embedded"] = asdict(world_config(s))
        if drop:
            del cfg["algo"][drop]
        out: dict[str, Any] = json.loads(
            json.dumps({"config": cfg, "warm_start_dir": str(warm_start_dir(warm))})
        )
        return out

    tree = specs["tree"]
    check_reusable(tree, s, summary(tree.algo, drop="expansion_budget"))  # per-tree ran
    hard = specs["tree-uniform+difficulty"]
    check_reusable(hard, s, summary(hard.algo))
    with pytest.raises(SystemExit, match="other settings"):  # that old run was per-tree
        check_reusable(hard, s, summary(hard.algo, drop="expansion_budget"))


def test_warm_starts_are_paired_with_seeds_or_crossed() -> None:
    s = bench_settings(warm_starts=("0:mkl", "1:onednn", "2"), seeds=(5, 6, 7, 8), budgets=(8,))
    warms = warm_start_choices(s, WarmStartConfig())
    assert [t for t, _ in warms][:2] == ["w0-mkl", "w1-onednn"]
    assert warms[2][0] in ("w2-mkl", "w2-onednn")  # auto: this CPU's path
    assert [(w.seed, w.linear) for _, w in warms] == [(0, "mkl"), (1, "onednn"), (2, "auto")]
    paired = plan_runs(replace(s, ablation=False), warms=warms)
    chains = {sp.seed: sp for sp in paired if sp.method == "chain"}
    assert chains[5].warm_tag == "w0-mkl" and chains[8].warm_tag == "w0-mkl"  # cycling
    assert chains[6].name == "chain-b8-s6-w1-onednn" and chains[6].unit == "s6-w1-onednn"
    assert chains[6].warm is not None and chains[6].warm.seed == 1
    tree = next(sp for sp in paired if sp.method == "tree" and sp.seed == 6)
    assert tree.warm == chains[6].warm  # both methods of a seed start alike
    crossed = plan_runs(replace(s, seeds=(0, 1), ablation=False, warm_cross=True), warms=warms)
    assert len(crossed) == 2 * 3 * 2 and len({sp.name for sp in crossed}) == 12
    # the run's settings name its warm start, as `treegrpo train --world.*` would
    world = run_world(chains[6], s)
    assert (world.warm_start_seed, world.warm_start_linear) == (1, "onednn")
    # one warm start (the default): names as before
    one = plan_runs(BenchSettings(budgets=(8,), seeds=(0,), ablation=False))
    assert [sp.name for sp in one] == ["chain-b8-s0", "tree-b8-s0"]


@pytest.mark.parametrize(
    ("warm", "match"),
    [(("x",), "give SEED or SEED:PATH"), (("1:fast",), "among auto, mkl, onednn"),
     (("1:mkl", "1:mkl"), "named twice")],
)  # fmt: skip
def test_bad_warm_starts_are_refused(warm: tuple[str, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        bench_settings(warm_starts=warm)


def test_cli_takes_warm_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[BenchSettings] = []
    monkeypatch.setattr(
        budget_bench, "run_benchmark", lambda s, *a, **k: seen.append(s) or {"failed": []}
    )
    cli.main(["bench-budget", "--warm-starts", "0:mkl", "1:onednn", "--warm-cross"])
    assert seen[0].warm_starts == ("0:mkl", "1:onednn") and seen[0].warm_cross
    with pytest.raises(SystemExit, match="warm start '9:x'"):
        cli.main(["bench-budget", "--warm-starts", "9:x"])
