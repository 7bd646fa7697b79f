"""Tier 1: the budget benchmark's pure parts: what a run record says, the aggregation over seeds,
the table, the plan of runs and the settings (hand-computed expectations)."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, replace
from typing import Any

import pytest

from treegrpo import cli
from treegrpo.core.budget import TREE_LADDER
from treegrpo.jobs.budget import run as budget_bench
from treegrpo.jobs.budget.plan import (
    BENCH_ALGO,
    BENCH_OPTIM,
    BenchSettings,
    bench_settings,
    check_reusable,
    plan_runs,
    world_config,
)
from treegrpo.jobs.budget.records import (
    EXPANSION_METHODS,
    NUMERIC,
    TREE_DIAGNOSTICS,
    aggregate,
    paired_differences,
    per_1k_tokens,
    run_record,
)
from treegrpo.jobs.budget.report import markdown_table
from treegrpo.jobs.budget.stats import mean_std
from treegrpo.viz.budget import STYLE, moving_average
from treegrpo.warmstart.tiny import WarmStartConfig, warm_start_dir


def test_trajectories_per_1k_tokens() -> None:
    assert per_1k_tokens(6, 1500) == pytest.approx(4.0)
    assert per_1k_tokens(3, 750) == pytest.approx(4.0)
    assert math.isnan(per_1k_tokens(3, 0))


def test_mean_std_is_the_sample_std() -> None:
    mean, std = mean_std([0.1, 0.2, 0.6])
    assert mean == pytest.approx(0.3)
    assert std == pytest.approx(math.sqrt(((0.2**2) + (0.1**2) + (0.3**2)) / 2))
    assert mean_std([0.4]) == (0.4, None)  # one seed: no spread to report
    with pytest.raises(ValueError):
        mean_std([])


def test_moving_average_is_trailing() -> None:
    assert moving_average([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]
    assert moving_average([1.0, 3.0], 5) == [1.0, 2.0]
    with pytest.raises(ValueError):
        moving_average([1.0], 0)


def _summary(em: float, hops: dict[str, float], prompts: int = 4) -> dict[str, Any]:
    overall = {"em": em, "f1": em + 0.1, "valid_format": 0.9, "tool_calls": 1.5, "n": 6}
    return {
        "after": {"overall": overall, "by_hops": {h: {"em": v, "n": 2} for h, v in hops.items()}},
        "before": {"overall": {"em": 0.25}},
        "config": {"run": {"prompts_per_step": prompts}},
        "seconds": {"total": 12.0},
    }


def _step(
    leaves: float, generated: float, tools: float, em: float, tree: float | None = None
) -> dict[str, float]:
    """One metrics.jsonl line; ``tree``: also the trainer's tree diagnostics, all set to it."""
    diagnostics = {f"tree/{k}": tree for k in TREE_DIAGNOSTICS} if tree is not None else {}
    return {
        **diagnostics,
        "agent/leaves": leaves,
        "spend/generated_per_prompt": generated,
        "spend/tool_calls_per_prompt": tools,
        "spend/token_efficiency": 1.02,
        "spend/processed_per_prompt": 2 * generated,
        "adv/uniform_prompts": em / 2,
        "time/expansion_choice_s": 0.03,
        "time/step_s": 3.0,
        "reward/em": em,
    }


def _identity(method: str, budget: int, seed: int) -> dict[str, Any]:
    return {
        "name": f"{method}-b{budget}-s{seed}",
        "method": method,
        "budget": budget,
        "seed": seed,
        "shape": {"m": 2, "n": 2, "l": 1},
        "advantage_mode": "intra+inter",
    }


def test_run_record_counts_spend_per_prompt() -> None:
    steps = [_step(24, 100, 2, 0.0), _step(24, 300, 4, 0.5)]  # 4 prompts x 6 leaves
    r = run_record(_identity("tree", 4, 0), _summary(0.3, {"1": 0.5, "2": 0.1}), steps)
    assert r["name"] == "tree-b4-s0" and r["em"] == 0.3 and r["tool_calls"] == 1.5
    assert r["em_by_hops"] == {"1": 0.5, "2": 0.1}
    assert r["leaves_per_prompt"] == 6
    assert r["generated_per_prompt"] == 200 and r["generated_total_per_prompt"] == 400
    assert r["tool_calls_per_prompt"] == 3 and r["tool_calls_total_per_prompt"] == 6
    assert r["trajectories_per_1k_tokens"] == pytest.approx(30.0)  # 6 leaves per 200 tokens
    assert r["curve"] == {"generated_per_prompt": [100, 400], "reward_em": [0.0, 0.5]}
    # held-out: the starting model at 0, then "after" at the run's end (no periodic evaluation)
    assert r["held_out_curve"] == {
        "step": [0, 2],
        "tokens": [0.0, 400.0],
        "seconds": [0.0, 6.0],
        "em": [0.25, 0.3],
    }
    assert r["train_s"] == 6.0
    assert r["no_signal"] == 0.125 and r["selector_share"] == pytest.approx(0.01)
    assert r["expansion_depths"] == {}
    assert set(NUMERIC) <= set(r)
    with pytest.raises(ValueError, match="no RL step"):
        run_record(_identity("tree", 4, 0), _summary(0.3, {}), [])


def test_aggregate_is_mean_and_sample_std_over_seeds() -> None:
    ems = [0.1, 0.2, 0.6]
    records = [
        run_record(
            _identity("chain", 2, seed),
            _summary(em, {"1": em, "3": 2 * em}),
            [_step(8, 100 + seed, 1, em, tree=seed), _step(8, 200, 1, 0.0, tree=1.0)],
        )
        for seed, em in enumerate(ems)
    ]
    records.append(
        run_record(_identity("tree", 2, 0), _summary(0.4, {"1": 0.4}), [_step(12, 90, 1, 0)])
    )
    aggs = {(a["method"], a["budget"]): a for a in aggregate(records)}
    chain = aggs[("chain", 2)]
    assert chain["seeds"] == [0, 1, 2]
    assert chain["em"]["mean"] == pytest.approx(statistics.mean(ems))
    assert chain["em"]["std"] == pytest.approx(statistics.stdev(ems))
    assert chain["em_by_hops"]["3"]["mean"] == pytest.approx(2 * statistics.mean(ems))
    for key in NUMERIC:  # every number is the mean of the per-run values
        assert chain[key]["mean"] == pytest.approx(statistics.mean(r[key] for r in records[:3]))
    assert chain["curve"]["generated_per_prompt"] == pytest.approx([101, 301])
    assert chain["curve"]["reward_em"] == pytest.approx([statistics.mean(ems), 0.0])
    assert aggs[("tree", 2)]["em"] == {"mean": 0.4, "std": None}


def _result(records: list[dict[str, Any]], budgets: list[int]) -> dict[str, Any]:
    return {
        "command": "treegrpo bench-budget --quick",
        "machine": {"platform": "Linux", "cpus": 2, "torch_threads": 1},
        "settings": {
            "mode": "quick",
            "budgets": budgets,
            "seeds": [0],
            "steps": 2,
            "prompts_per_step": 4,
            "eval_questions": 6,
            "workers": 1,
        },
        "warm_start": {"overall": {"em": 0.17}, "by_hops": {"1": {"em": 0.3}, "2": {"em": 0.1}}},
        "wall_s": 75.0,
        "counts": {"runs": len(records), "ran": len(records), "reused": 0},
        "aggregates": aggregate(records),
    }


def test_table_has_a_row_per_budget_and_the_ablation() -> None:
    def rec(method: str, budget: int, em: float) -> dict[str, Any]:
        return run_record(
            _identity(method, budget, 0), _summary(em, {"1": em}), [_step(8, 100, 1, 0)]
        )

    records = [rec(m, b, 0.1 * b) for b in (2, 4) for m in ("chain", "tree")]
    result = _result(records, [2, 4])
    result["runs"] = [{"wall_s": 50.0}, {"wall_s": 70.0}]  # reused runs keep their own times
    table = markdown_table(result)
    assert "| ≈2 |" in table and "| ≈4 |" in table
    assert "treegrpo bench-budget --quick" in table and "1m15s" in table
    assert "the runs' own wall times add up to 2m00s" in table
    assert "ablation" not in table  # no ablation runs: no ablation table
    records += [rec("tree-intra", 4, 0.05), rec("tree-inter", 4, 0.3)]
    table = markdown_table(_result(records, [2, 4]))
    for row in ("| intra+inter (Tree-GRPO) | 40.0 |", "| intra | 5.0 |", "| inter | 30.0 |"):
        assert row in table


def test_paired_differences_pair_by_seed_with_a_t_interval() -> None:
    def rec(method: str, budget: int, seed: int, em: float) -> dict[str, Any]:
        return run_record(
            _identity(method, budget, seed), _summary(em, {}), [_step(8, 100, 1, 0, tree=0.5)]
        )

    chain = [0.2, 0.4, 0.3]
    tree = [0.3, 0.45, 0.5]
    records = [rec("chain", 4, s, e) for s, e in enumerate(chain)]
    records += [rec("tree", 4, s, e) for s, e in enumerate(tree)]
    records.append(rec("tree", 8, 0, 0.9))  # no chain run to pair with
    (p,) = paired_differences(records)
    diffs = [t - c for t, c in zip(tree, chain, strict=True)]
    assert p["budget"] == 4 and p["seeds"] == ["s0", "s1", "s2"]
    assert p["diffs"] == pytest.approx(diffs)
    half = 4.302652729911275 * statistics.stdev(diffs) / math.sqrt(3)  # t(0.975, df 2)
    assert p["ci95"] == pytest.approx(
        (statistics.mean(diffs) - half, statistics.mean(diffs) + half)
    )
    table = markdown_table({**_result(records, [4]), "paired": [p]})
    assert "| ≈4 | +11.7 |" in table and "+10.0, +5.0, +20.0" in table
    assert "What the trees held" in table and "| ≈4 | (2,2,1) | 50% | 0.50 |" in table
    (single,) = paired_differences(records[:1] + records[3:4])
    assert single["ci95"] is None


def test_table_without_hops_shows_sources_or_no_breakdown() -> None:
    """Real question files have no hop counts: EM by source when there are several sources,
    no breakdown columns for one (it would repeat the EM column)."""
    summary = _summary(0.5, {})
    by_source = {"nq": {"em": 0.25, "n": 2}, "hotpotqa": {"em": 0.75, "n": 2}}
    summary["after"]["by_source"] = by_source
    records = [
        run_record(_identity(m, 2, 0), summary, [_step(8, 100, 1, 0)]) for m in ("chain", "tree")
    ]
    assert records[0]["em_by_hops"] == {} and records[0]["em_by_source"] == {
        "nq": 0.25,
        "hotpotqa": 0.75,
    }
    assert list(aggregate(records)[0]["em_by_source"]) == ["nq", "hotpotqa"]
    result = _result(records, [2])
    result["warm_start"] = {"overall": {"em": 0.1, "n": 4}, "by_hops": {}, "by_source": by_source}
    table = markdown_table(result)
    assert "chain EM by source nq/hotpotqa" in table and "| 25/75 | 25/75 |" in table
    assert "4 held-out questions" in table and "by hop" not in table
    result["warm_start"]["by_source"] = {"wiki": {"em": 0.1, "n": 4}}
    table = markdown_table(result)
    assert "EM by" not in table
    assert "| ≈2 | (2,2,1) | 50.0 | 50.0 | 0/1 / 0/1 | 1.50 / 1.50 |" in table
    header, align = table.splitlines()[-3:-1]
    assert header.count("|") == align.count("|")


def test_plan_matches_the_ladder_and_counts_30_runs() -> None:
    specs = plan_runs(BenchSettings(budgets=(2, 4, 8, 16), seeds=(0, 1, 2), ablation=True))
    assert len(specs) == 30 and len({s.name for s in specs}) == 30
    for s in specs:
        shape = s.algo.shape()
        if s.method == "chain":
            assert shape.is_chain and shape.m == s.budget and s.algo.mode() == "inter"
        else:
            assert shape == TREE_LADDER[s.budget]
    modes = {s.method: s.algo.mode() for s in specs if s.budget == 4}
    assert modes == {
        "chain": "inter",
        "tree": "intra+inter",
        "tree-intra": "intra",
        "tree-inter": "inter",
    }


def test_settings_quick_and_validation() -> None:
    quick = bench_settings(quick=True)
    assert (quick.budgets, quick.seeds, quick.ablation) == ((2, 4), (0,), False)
    assert quick.out.name == "budget-quick.json" and bench_settings().out.name == "budget.json"
    assert bench_settings(True, steps=None, seeds=(5,)).seeds == (5,)  # None: keep the default
    with pytest.raises(ValueError, match="budgets"):
        bench_settings(budgets=(3,))
    with pytest.raises(ValueError, match="workers"):
        bench_settings(workers=0)


def test_cli_bench_budget_parses_into_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[BenchSettings] = []

    def fake(s: BenchSettings, warm: Any = None, command: str | None = None) -> dict[str, Any]:
        seen.append(s)
        return {"failed": []}

    monkeypatch.setattr(budget_bench, "run_benchmark", fake)
    cli.main(["bench", "budget", "--quick", "--seeds", "3", "4", "--workers", "1", "--steps", "2"])
    cli.main(["bench-budget", "--no-ablation", "--budgets", "8"])
    assert seen[0].mode == "quick" and seen[0].seeds == (3, 4) and seen[0].steps == 2
    assert seen[0].workers == 1 and seen[0].budgets == (2, 4)
    assert seen[1].mode == "full" and seen[1].budgets == (8,) and not seen[1].ablation


@pytest.mark.slow
def test_workers_end_with_a_killed_benchmark(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    if not sys.platform.startswith("linux"):
        pytest.skip("parent-death signal is Linux only")
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            """
            import multiprocessing as mp, os, sys, time
            from concurrent.futures import ProcessPoolExecutor
            from treegrpo.jobs.budget.run import _init_worker

            if __name__ == "__main__":
                ctx = mp.get_context("spawn")
                cores = ctx.Queue()
                cores.put(None)
                pool = ProcessPoolExecutor(1, mp_context=ctx, initializer=_init_worker,
                                           initargs=(cores,))
                print(pool.submit(os.getpid).result(), flush=True)
                pool.submit(time.sleep, 120)
                time.sleep(120)
            """
        )
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)  # no clean-up code runs in the parent
    parent.wait()
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return  # the worker is gone
        time.sleep(0.2)
    os.kill(worker, signal.SIGKILL)
    pytest.fail("the worker outlived its killed parent")


def test_plan_adds_one_tree_run_per_expansion_rule() -> None:
    s = BenchSettings(budgets=(4, 8), seeds=(0, 1), expansions=("entropy", "no-root"))
    specs = plan_runs(s)
    by = {s.name: s for s in specs}
    assert len(specs) == len(by) == 2 * (2 * 4 + 2)  # seeds x (budgets x 4 methods + ablation)
    for b in (4, 8):
        uniform = by[f"tree-b{b}-s1"].algo
        assert uniform.expansion == "uniform"
        for rule in ("entropy", "no-root"):
            spec = by[f"tree-{rule}-b{b}-s1"]
            assert spec.method == f"tree-{rule}" and spec.seed == 1 and spec.budget == b
            assert spec.algo.expansion == rule and spec.algo.shape().leaves_per_prompt > 0
            assert (spec.algo.m, spec.algo.n, spec.algo.l) == (uniform.m, uniform.n, uniform.l)
            assert spec.algo.mode() == "intra+inter"
            assert spec.identity()["expansion"] == rule
    assert by["chain-b4-s0"].identity()["expansion"] is None
    assert by["tree-intra-b4-s0"].algo.expansion == "uniform"
    assert "tree-entropy-b2-s0" not in by
    assert len(plan_runs(BenchSettings(budgets=(4,), seeds=(0,), ablation=False))) == 2


def test_the_main_tree_run_expands_uniformly_whatever_the_base() -> None:
    base = replace(BENCH_ALGO, expansion="entropy")
    one = BenchSettings(budgets=(4,), seeds=(0,), ablation=False, expansions=("informed",))
    specs = {s.method: s for s in plan_runs(one, base)}
    assert specs["tree"].algo.expansion == "uniform"
    assert specs["tree-informed"].algo.expansion == "informed"


def test_settings_refuse_an_unknown_expansion_rule() -> None:
    s = bench_settings(expansions=("entropy", "informed", "entropy"))
    assert s.expansions == ("entropy", "informed")  # once each, in order
    assert BenchSettings().expansions == ()
    for bad in ("entropic", "uniform"):
        with pytest.raises(ValueError, match=f"{bad}.*--expansions takes no-root, entropy"):
            bench_settings(expansions=("no-root", bad))


def test_reuse_refuses_a_run_with_another_expansion_rule(tmp_path: Any) -> None:
    s = bench_settings(expansions=("entropy",), runs_dir=tmp_path)
    warm = WarmStartConfig()
    (spec,) = [
        sp
        for sp in plan_runs(replace(s, budgets=(4,), seeds=(0,), ablation=False))
        if sp.method == "tree-entropy"
    ]

    def summary(algo: Any) -> dict[str, Any]:
        run = {"steps": s.steps, "prompts_per_step": s.prompts_per_step, "seed": 0}
        cfg = {"algo": asdict(algo), "optim": asdict(BENCH_OPTIM), "run": run}
        cfg["embedded"] = asdict(world_config(s))
        out: dict[str, Any] = json.loads(
            json.dumps({"config": cfg, "warm_start_dir": str(warm_start_dir(warm))})
        )
        return out

    check_reusable(spec, s, summary(spec.algo))  # the same settings: reused
    for rule in ("uniform", "informed"):
        with pytest.raises(SystemExit, match=f"expansion rule {rule}, not entropy"):
            check_reusable(spec, s, summary(replace(spec.algo, expansion=rule)))
    old = summary(spec.algo)
    del old["config"]["algo"]["expansion"]  # a run from before the rules: uniform
    with pytest.raises(SystemExit, match="expansion rule uniform, not entropy"):
        check_reusable(spec, s, old)


def test_expansion_rules_are_paired_with_the_tree_and_the_chain_and_tabled() -> None:
    def rec(method: str, seed: int, em: float) -> dict[str, Any]:
        step = _step(8, 100, 1, 0, tree=0.5)
        identity = _identity(method, 8, seed) | {"expansion": "uniform"}
        if method.startswith("tree-"):
            identity["expansion"] = method.removeprefix("tree-")
            step |= {
                "tree/mixed_reward_share": 0.6,
                "tree/root_expansions": 0.1,
                "tree/expansion_depth": 0.8,
                "spend/generated_per_prompt": 150,
            }
        return run_record(identity, _summary(em, {}), [step])

    ems = {
        "chain": [0.2, 0.4, 0.3],
        "tree": [0.3, 0.45, 0.5],
        "tree-entropy": [0.4, 0.5, 0.45],
        "tree-no-root": [0.35],  # one seed: no interval
    }
    records = [rec(m, s, em) for m, xs in ems.items() for s, em in enumerate(xs)]
    aggs = {(a["method"], a["budget"]): a for a in aggregate(records)}
    entropy = aggs[("tree-entropy", 8)]
    assert entropy["expansion"] == "entropy" and entropy["seeds"] == [0, 1, 2]
    assert entropy["em"]["mean"] == pytest.approx(0.45)
    assert entropy["root_expansions"] == {"mean": pytest.approx(0.1), "std": 0.0}

    paired = paired_differences(records)
    got = {(p["method"], p["against"]): p for p in paired}
    assert list(got) == [
        ("tree", "chain"),
        ("tree-no-root", "tree"),
        ("tree-no-root", "chain"),
        ("tree-entropy", "tree"),
        ("tree-entropy", "chain"),
    ]
    assert got[("tree-entropy", "tree")]["diffs"] == pytest.approx([0.1, 0.05, -0.05])
    vs_chain = got[("tree-entropy", "chain")]
    assert vs_chain["diffs"] == pytest.approx([0.2, 0.1, 0.15])
    half = 4.302652729911275 * 0.05 / math.sqrt(3)  # t(0.975, df 2) x std / sqrt(n)
    assert vs_chain["ci95"] == pytest.approx((0.15 - half, 0.15 + half))
    assert got[("tree-no-root", "tree")]["ci95"] is None

    table = markdown_table({**_result(records, [8]), "paired": paired})
    tree_vs_chain = table.split("Tree − chain held-out EM")[1].split("\n\n")[1]
    assert tree_vs_chain.count("| ≈8 |") == 1  # the rules have their own table
    assert "Expansion rules at ≈8, tree (2,2,1)" in table
    assert "| uniform (Tree-GRPO) | 41.7 ± 10.4 | 50% | 50% | 0.50 | 100 |" in table
    assert "| entropy | 45.0 ± 5.0 | 60% | 10% | 0.80 | 150 |" in table
    assert "| no-root | 35.0 | 60% | 10% | 0.80 | 150 |" in table
    assert "| ≈8 | entropy | +3.3 | [-15.6, +22.3] | +15.0 | [+2.6, +27.4] | 3 |" in table
    assert "| ≈8 | no-root | +5.0 | — | +15.0 | — | 1 |" in table
    for part in table.split("\n\n"):  # every row of every table has the header's columns
        rows = [x for x in part.splitlines() if x.startswith("|")]
        assert all(x.count("|") == rows[0].count("|") for x in rows)


def test_no_expansion_rules_no_expansion_tables() -> None:
    records = [
        run_record(_identity(m, 4, 0), _summary(0.3, {}), [_step(8, 100, 1, 0, tree=0.5)])
        for m in ("chain", "tree")
    ]
    paired = paired_differences(records)
    assert [(p["method"], p["against"]) for p in paired] == [("tree", "chain")]
    table = markdown_table({**_result(records, [4]), "paired": paired})
    assert "Expansion rules" not in table


def test_cli_bench_budget_takes_expansion_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[BenchSettings] = []

    def fake(s: BenchSettings, warm: Any = None, command: str | None = None) -> dict[str, Any]:
        seen.append(s)
        return {"failed": []}

    monkeypatch.setattr(budget_bench, "run_benchmark", fake)
    cli.main(["bench-budget", "--budgets", "8", "--expansions", "entropy", "no-root"])
    assert seen[0].expansions == ("entropy", "no-root") and seen[0].budgets == (8,)
    cli.main(["bench-budget", "--budgets", "8"])
    assert seen[1].expansions == ()
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench-budget", "--expansions", "entropic"])
    message = str(exc.value)
    assert message.startswith("treegrpo bench-budget: unknown expansion rule 'entropic'")
    assert "--expansions takes no-root, entropy, informed" in message and "\n" not in message
    assert len(seen) == 2


def test_outputs_with_expansion_rules_are_written(tmp_path: Any) -> None:
    """The plots draw chain, tree and the ablation; a rule's runs are in the JSON and table."""
    records = [
        run_record(_identity(m, 4, s), _summary(0.1 * s, {"1": 0.1}), [_step(8, 100, 1, 0)])
        for m in ("chain", "tree", "tree-entropy")
        for s in (0, 1)
    ]
    result = {**_result(records, [4]), "runs": records, "paired": paired_differences(records)}
    out = tmp_path / "budget.json"
    written = budget_bench.write_outputs(result, out)
    assert len(written) == 7 and all(p.stat().st_size > 0 for p in written)
    assert "Expansion rules at ≈4" in out.with_suffix(".md").read_text()
    assert {r["method"] for r in json.loads(out.read_text())["runs"]} >= {"tree-entropy"}


def test_every_expansion_rule_has_a_plot_style() -> None:
    assert set(EXPANSION_METHODS) <= set(STYLE)


def test_a_collapse_is_format_below_80_or_em_below_the_start_and_counted() -> None:
    steps = [_step(24, 100, 2, 0.0)]
    fine = run_record(_identity("chain", 8, 0), _summary(0.9, {}), steps)
    assert fine["collapsed"] == 0.0 and fine["before_em"] == 0.25
    low = _summary(0.2, {})  # EM below the warm start's 0.25
    broken = _summary(0.9, {})
    broken["after"]["overall"]["valid_format"] = 0.79
    records = [
        fine,
        run_record(_identity("chain", 8, 1), low, steps),
        run_record(_identity("chain", 8, 2), broken, steps),
    ]
    assert [r["collapsed"] for r in records] == [0.0, 1.0, 1.0]
    (agg,) = aggregate(records)
    assert agg["collapses"] == 2 and agg["collapsed"]["mean"] == pytest.approx(2 / 3)


def test_runs_pair_by_seed_and_warm_start() -> None:
    """Two warm starts with the same run seed are two units, never one pair."""
    steps = [_step(24, 100, 2, 0.0)]
    records = []
    for warm, (chain, tree) in {"w0-mkl": (0.5, 0.7), "w1-onednn": (0.4, 0.4)}.items():
        for method, em in (("chain", chain), ("tree", tree)):
            ident = _identity(method, 8, 3) | {"unit": f"s3-{warm}", "warm_start": warm}
            records.append(run_record(ident, _summary(em, {}), steps))
    (p,) = paired_differences(records)
    assert p["seeds"] == ["s3-w0-mkl", "s3-w1-onednn"]
    assert p["diffs"] == pytest.approx([0.2, 0.0])
    assert {a["method"]: a["units"] for a in aggregate(records)}["tree"] == p["seeds"]
