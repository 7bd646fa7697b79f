"""The budget benchmark's plan: its settings (``BenchSettings``; data mode's run config,
``DataJob``), the ladder's runs (``RunSpec``, ``plan_runs``), each run's settings, and the check
that a finished run may be reused (the same settings)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, cast, get_args

from treegrpo.core.advantage import Mode
from treegrpo.core.budget import CHAIN_LADDER, TREE_LADDER
from treegrpo.core.expansion import RULES, Rule
from treegrpo.engine.cpu.onednn import resolve_path
from treegrpo.engine.cpu.paths import LinearPath
from treegrpo.jobs.budget.records import (
    ABLATION_BUDGET,
    EXPANSION_RULES,
    difficulty_method,
    expansion_method,
)
from treegrpo.jobs.data import check_data, resolve_model
from treegrpo.jobs.presets import (
    DEFAULT_ALGO,
    DEFAULT_EMBEDDED,
    DEFAULT_OPTIM,
    DEFAULT_RUN,
    TRAIN_SECTIONS,
    DataConfig,
    EmbeddedConfig,
)
from treegrpo.train.config import AlgorithmConfig, ModelConfig, OptimConfig, RunConfig
from treegrpo.train.yaml_config import load_config
from treegrpo.warmstart.tiny import WarmStartConfig, warm_start_dir

FULL_STEPS = 20
"""RL steps per run in full mode (the module docstring has the sizing)."""
QUICK_STEPS = 3
"""RL steps per run in quick mode: checks that the pipeline runs, not the result."""
QUICK_EVAL_QUESTIONS = 30
"""Held-out questions in quick mode (data mode: at most this many of the config's)."""
QUICK_EVAL_EVERY = 2
"""Quick mode's periodic evaluation: once inside the 3 steps, so the curve's code runs."""
ABLATION_MODES: tuple[Mode, ...] = ("intra", "inter")
"""Advantage modes of the ablation runs ("intra+inter" is the main tree run)."""

# The embedded protocol: the default job's settings (runs differ in shape, mode, steps and seed)
BENCH_ALGO = DEFAULT_ALGO
BENCH_OPTIM = DEFAULT_OPTIM


@dataclass(frozen=True)
class RunSpec:
    """One run of the benchmark: a method at a budget with a seed."""

    method: str
    """"chain", "tree" (intra+inter, uniform expansion), "tree-intra" / "tree-inter" (the
    ablation) or "tree-<rule>" (another expansion rule, e.g. "tree-entropy")."""
    budget: int
    """Budget rung of the ladder (≈ trajectories per prompt)."""
    seed: int
    """RunConfig.seed: data order, sampling and expansion choice."""
    algo: AlgorithmConfig
    """The base algorithm settings with this run's shape, advantage mode and expansion rule."""
    warm: WarmStartConfig | None = None
    """Embedded mode: the warm start the run starts from (None: data mode's model)."""
    warm_tag: str = ""
    """Names the warm start when the benchmark samples several ("w1-onednn"; "": one)."""

    @property
    def name(self) -> str:
        return f"{self.method}-b{self.budget}-{self.unit}"

    @property
    def unit(self) -> str:
        """What pairs runs across methods: seed, and warm start if several ("s3-w1-onednn")."""
        return f"s{self.seed}" + (f"-{self.warm_tag}" * bool(self.warm_tag))

    def identity(self) -> dict[str, Any]:
        """What names the run in the benchmark's records."""
        a = self.algo
        tree = a.algo == "tree"
        return {
            "name": self.name,
            "method": self.method,
            "budget": self.budget,
            "seed": self.seed,
            "unit": self.unit,
            "warm_start": self.warm_tag or None,
            "shape": {"m": a.m, "n": a.n if tree else 0, "l": a.l if tree else 0},
            "advantage_mode": a.mode(),
            "expansion": a.expansion if tree else None,
            "expansion_budget": a.expansion_budget if tree else None,
        }

    @property
    def cost(self) -> float:
        """Relative cost for scheduling and the ETA: a step costs about one leaf's worth of
        fixed work plus one per leaf (trajectory) per prompt (measured, module docstring)."""
        return 1.0 + self.algo.shape().leaves_per_prompt


@dataclass(frozen=True)
class DataJob:
    """Data mode: the sections of a run config file (``treegrpo train --config``), as read. The
    benchmark applies its ladder, run settings and held-out count on top of them."""

    config: str
    """The YAML file they were read from."""
    algo: AlgorithmConfig
    """Every run's algorithm settings but the shape and the advantage mode (the ladder's)."""
    optim: OptimConfig
    """Every run's optimizer settings."""
    run: RunConfig
    """Every run's run settings but directory, seed, steps, prompts, checkpoints, eval_every."""
    model: ModelConfig
    """LoRA or full fine-tuning, device and precision of every run."""
    data: DataConfig
    """Starting model, questions, search tool and agent limits (eval_questions: the benchmark's)."""


@dataclass(frozen=True)
class BenchSettings:
    """What the benchmark runs and where it writes."""

    mode: str = "full"
    """"full" or "quick"."""
    budgets: tuple[int, ...] = (2, 4, 8, 16)
    """Budget rungs, each of 2, 4, 8, 16."""
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    """RunConfig.seed values; every method runs with each."""
    steps: int = FULL_STEPS
    """RL steps per run."""
    prompts_per_step: int = DEFAULT_RUN.prompts_per_step
    """Prompts per RL step (the same prompts for every method with the same seed)."""
    eval_questions: int | None = DEFAULT_EMBEDDED.eval_questions
    """Held-out questions (None, data mode only: every question of the eval files)."""
    ablation: bool = True
    """Also run the advantage ablation at budget ≈ 4 (intra only, inter only)."""
    world_seed: int = DEFAULT_EMBEDDED.world_seed
    """Embedded mode: the seed of the RL and held-out worlds (another: a validation world)."""
    eval_every: int = 5
    """Held-out evaluation every this many RL steps (0: only before and after)."""
    expansions: tuple[Rule, ...] = ()
    """Expansion rules besides uniform (``EXPANSION_RULES``): method "tree-<rule>"."""
    difficulty: tuple[Rule, ...] = ()
    """Expansion rules (uniform too) with difficulty budgets: method "tree-<rule>+difficulty"."""
    quarter: bool = False
    """Also chain GRPO at four times each budget with a rung there (quarter-budget comparison)."""
    workers: int = 2
    """Parallel runs, each in its own process pinned to one core (1: sequential, in-process)."""
    out: Path = Path("bench/results/budget.json")
    """The JSON result; the table (.md) and the plots (<stem>_*.png) go beside it."""
    runs_dir: Path = Path("runs/bench-budget/full")
    """Root of the run directories."""
    job: DataJob | None = None
    """Data mode: the run config every run starts from (None: the embedded world)."""
    warm_starts: tuple[str, ...] = ()
    """Embedded mode: the warm starts, each "SEED" or "SEED:PATH" (``WarmStartConfig.seed`` and
    ``.linear``); empty: the embedded job's one."""
    warm_cross: bool = False
    """Every warm start of ``warm_starts`` with every seed (else paired, seed i with the i-th)."""


def parse_warm_start(text: str) -> tuple[int, LinearPath]:
    """ "SEED" or "SEED:PATH" → (seed, linear path); raises ValueError naming the problem."""
    seed, _, path = text.partition(":")
    path = path or "auto"
    if not seed.isdigit() or path not in get_args(LinearPath):
        raise ValueError(
            f"warm start {text!r}: give SEED or SEED:PATH, a seed >= 0 and a path among "
            f"{', '.join(get_args(LinearPath))} (e.g. 1:onednn)"
        )
    return int(seed), cast(LinearPath, path)


def warm_start_choices(
    s: BenchSettings, base: WarmStartConfig
) -> list[tuple[str, WarmStartConfig]]:
    """(tag, config) of each warm start of ``s`` on top of ``base`` (one, untagged, without
    ``s.warm_starts``); the tag names the resolved path ("w1-mkl")."""
    if not s.warm_starts:
        return [("", base)]
    seeds_paths = map(parse_warm_start, s.warm_starts)
    return [(f"w{i}-{resolve_path(p)}", replace(base, seed=i, linear=p)) for i, p in seeds_paths]


def bench_settings(
    quick: bool = False, config: str | Path | None = None, **overrides: Any
) -> BenchSettings:
    """The full or quick defaults with the given fields replaced (None values ignored);
    ``config``: data mode with this run config, read as ``treegrpo train --config`` reads it, a
    world section refused (docs/evaluation.md, "The budget benchmark"). ValueError on bad settings,
    a config that does not fit, or a data section ``check_data`` rejects or without eval files."""
    base = BenchSettings()
    if config is not None:
        sections = load_config(config, TRAIN_SECTIONS)
        if sections["world"] != DEFAULT_EMBEDDED:
            raise ValueError(
                f"{config}: the world section configures the embedded job, which data mode does "
                "not run; drop it"
            )
        job = DataJob(
            str(config), **{k: sections[k] for k in ("algo", "optim", "run", "model", "data")}
        )
        base = replace(
            base,
            job=job,
            steps=job.run.steps,
            prompts_per_step=job.run.prompts_per_step,
            eval_questions=job.data.eval_questions,
            eval_every=job.run.eval_every,
            workers=1,
            out=Path("bench/results/budget-data.json"),
            runs_dir=Path("runs/bench-budget/data"),
        )
    if quick:
        n = base.eval_questions
        base = replace(
            base,
            mode="quick",
            budgets=(2, 4),
            seeds=(0,),
            steps=QUICK_STEPS,
            eval_questions=QUICK_EVAL_QUESTIONS if n is None else min(n, QUICK_EVAL_QUESTIONS),
            ablation=False,
            eval_every=QUICK_EVAL_EVERY,
            out=base.out.with_stem(f"{base.out.stem}-quick"),
            runs_dir=base.runs_dir.with_name("data-quick" if base.job else "quick"),
        )
    world = overrides.get("world_seed")
    if world is not None and world != DEFAULT_EMBEDDED.world_seed:  # a validation world
        base = replace(
            base,
            out=base.out.with_stem(f"{base.out.stem}-world{world}"),
            runs_dir=base.runs_dir.with_name(f"{base.runs_dir.name}-world{world}"),
        )
    return _checked(replace(base, **{k: v for k, v in overrides.items() if v is not None}))


def _checked(s: BenchSettings) -> BenchSettings:
    """``s`` with its expansion rules deduplicated, all settings checked (ValueError: the first)."""
    note = "; uniform is the main tree run"
    for name, known, why in (("expansions", EXPANSION_RULES, note), ("difficulty", RULES, "")):
        rules = getattr(s, name)
        if unknown := [r for r in rules if r not in known]:
            raise ValueError(
                f"unknown expansion rule {unknown[0]!r} (--{name} takes {', '.join(known)}{why})"
            )
        once: Any = tuple(dict.fromkeys(rules))  # in order, each once
        s = replace(s, **{name: once})
    bad = [b for b in s.budgets if b not in TREE_LADDER]
    if bad or not s.budgets:
        raise ValueError(f"budgets must be among {sorted(TREE_LADDER)}, got {list(s.budgets)}")
    if not s.seeds or s.steps < 1 or s.prompts_per_step < 1:
        raise ValueError("need at least one seed, step and prompt per step")
    n = s.eval_questions
    if (n is None and s.job is None) or (n is not None and n < 1):
        raise ValueError("need at least one held-out question")
    if s.workers < 1:
        raise ValueError(f"workers must be >= 1, got {s.workers}")
    if s.world_seed < 0 or s.eval_every < 0:
        raise ValueError("world_seed and eval_every must be >= 0")
    if s.job is not None and s.world_seed != DEFAULT_EMBEDDED.world_seed:
        raise ValueError("world_seed is the embedded world's; data mode has no world")
    if s.job is not None and s.warm_starts:
        raise ValueError("warm_starts are the embedded job's; data mode starts from its model")
    tags = [tag for tag, _ in warm_start_choices(s, WarmStartConfig())]  # checks each
    if len(set(tags)) < len(tags):
        raise ValueError(f"warm starts named twice: {', '.join(s.warm_starts)}")
    if s.job is not None:
        data = data_config(s)
        problems = check_data(data)
        if not data.eval_files:
            problems.append("data.eval_files: the benchmark compares held-out EM; give some")
        if problems:
            raise ValueError(f"{s.job.config}: " + "; ".join(problems))
    return s


def plan_runs(
    s: BenchSettings,
    base: AlgorithmConfig = BENCH_ALGO,
    warms: Sequence[tuple[str, WarmStartConfig | None]] = (("", WarmStartConfig()),),
) -> list[RunSpec]:
    """Chain and tree at each of ``s.budgets`` for each seed, a "tree-<rule>" run per rule of
    ``s.expansions``, a "tree-<rule>+difficulty" run per rule of ``s.difficulty``, the ablation's
    two modes at ≈ 4, and with ``s.quarter`` chains at 4× each budget the ladder has
    (docs/evaluation.md, "The budget benchmark"). ``base``: every run's algorithm settings; chain
    runs change only ``algo`` and ``m`` (as ``--algo.algo chain --algo.m B``), tree runs (M, N,
    L) from the ladder (k None) and the rule, each with its default advantage mode. ``warms``:
    (tag, warm start) pairs, seed i from the i-th (cycling; ``s.warm_cross``: each from each)."""
    runs: list[tuple[str, int, AlgorithmConfig]] = []
    for b in s.budgets:
        runs += [("chain", b, _chain_algo(b, base)), ("tree", b, _tree_algo(b, base))]
        runs += [(expansion_method(r), b, _tree_algo(b, base, r)) for r in s.expansions]
        runs += [(difficulty_method(r), b, _tree_algo(b, base, r, True)) for r in s.difficulty]
    if s.quarter:
        quarters = [4 * b for b in s.budgets if 4 * b in CHAIN_LADDER and 4 * b not in s.budgets]
        runs += [("chain", b, _chain_algo(b, base)) for b in quarters]
    if s.ablation:
        for mode in ABLATION_MODES:
            algo = replace(_tree_algo(ABLATION_BUDGET, base), advantage_mode=mode)
            runs.append((f"tree-{mode}", ABLATION_BUDGET, algo))
    units = (
        [(seed, w) for w in warms for seed in s.seeds]
        if s.warm_cross
        else [(seed, warms[i % len(warms)]) for i, seed in enumerate(s.seeds)]
    )
    return [RunSpec(m, b, seed, a, warm, tag) for seed, (tag, warm) in units for m, b, a in runs]


def _chain_algo(budget: int, base: AlgorithmConfig) -> AlgorithmConfig:
    return replace(base, algo="chain", m=CHAIN_LADDER[budget].m, advantage_mode=None)


def _tree_algo(
    budget: int, base: AlgorithmConfig, rule: Rule = "uniform", difficulty: bool = False
) -> AlgorithmConfig:
    shape = TREE_LADDER[budget]
    return replace(
        base,
        algo="tree",
        m=shape.m,
        n=shape.n,
        l=shape.l,
        k=None,
        advantage_mode=None,
        expansion=rule,
        expansion_budget="difficulty" if difficulty else "per-tree",
    )


def run_config(spec: RunSpec, s: BenchSettings) -> RunConfig:
    """The run's RunConfig (from the embedded preset's, or the data mode config's): its directory
    and seed, the benchmark's steps, prompts and periodic evaluation; one checkpoint at the end."""
    return replace(
        DEFAULT_RUN if s.job is None else s.job.run,
        out_dir=str(s.runs_dir / spec.name),
        seed=spec.seed,
        steps=s.steps,
        prompts_per_step=s.prompts_per_step,
        save_every=s.steps,
        keep_checkpoints=1,
        eval_every=s.eval_every,
        resume=False,
        overwrite=False,  # execute_run removes a killed run's directory itself
    )


def run_world(spec: RunSpec, s: BenchSettings) -> EmbeddedConfig:
    """The embedded settings of one run: the benchmark's world with the run's warm start
    named (its seed and linear path), as ``treegrpo train --world.*`` would give them."""
    assert spec.warm is not None
    return replace(
        world_config(s), warm_start_seed=spec.warm.seed, warm_start_linear=spec.warm.linear
    )


def world_config(s: BenchSettings) -> EmbeddedConfig:
    """Embedded mode: the preset's world with the benchmark's world seed and held-out questions."""
    assert s.eval_questions is not None  # None (all questions) is for data mode only
    return replace(DEFAULT_EMBEDDED, world_seed=s.world_seed, eval_questions=s.eval_questions)


def data_config(s: BenchSettings) -> DataConfig:
    """Data mode: the config's data section with the benchmark's held-out questions."""
    assert s.job is not None, "the benchmark is not in data mode (no config)"
    return replace(s.job.data, eval_questions=s.eval_questions)


def check_reusable(spec: RunSpec, s: BenchSettings, summary: dict[str, Any]) -> None:
    """Refuse to reuse a finished run made with other settings (the starting model, algorithm
    with its shape, advantage mode and expansion rule, optimizer, world or data and model
    sections, steps, prompts, seed): its numbers would silently mix into this one."""
    cfg = summary["config"]
    run = run_config(spec, s)
    want: dict[str, Any] = {"algo": asdict(spec.algo)}
    have: dict[str, Any] = {"algo": cfg["algo"]}
    if s.job is None:
        assert spec.warm is not None  # embedded runs start from a warm start
        want["warm start"] = warm_start_dir(spec.warm).name  # the key: every setting + format
        have["warm start"] = Path(summary["warm_start_dir"]).name
        # runs from before the warm start settings: the defaults, which is what they ran
        have_world = {**asdict(EmbeddedConfig()), **cfg["embedded"]}
        want |= {"optim": asdict(BENCH_OPTIM), "embedded": asdict(run_world(spec, s))}
        have |= {"optim": cfg["optim"], "embedded": have_world}
    else:
        data = data_config(s)
        assert data.model is not None  # bench_settings checked the data section
        want["model dir"] = str(resolve_model(data.model))  # built-in models: their cache entry
        have["model dir"] = summary["model_dir"]
        want |= {"optim": asdict(s.job.optim), "data": asdict(data), "model": asdict(s.job.model)}
        have |= {"optim": cfg["optim"], "data": cfg["data"], "model": cfg["model"]}
    for key in ("steps", "prompts_per_step", "seed"):
        want[key], have[key] = getattr(run, key), cfg["run"][key]
    want = json.loads(json.dumps(want))  # tuples → lists, as in summary.json
    # a setting added after the run was made is taken as its default, which is what ran
    defaults = json.loads(json.dumps(asdict(AlgorithmConfig())))
    have["algo"] = {
        **{k: v for k, v in want["algo"].items() if k not in have["algo"] and v == defaults[k]},
        **have["algo"],
    }
    diff = sorted(k for k in want if want[k] != have[k])
    rule = have["algo"].get("expansion", "uniform")  # summaries from before the rules: uniform
    if rule != spec.algo.expansion:
        diff[diff.index("algo")] = f"algo (expansion rule {rule}, not {spec.algo.expansion})"
    if diff:
        raise SystemExit(
            f"bench budget: {s.runs_dir / spec.name} was run with other settings "
            f"({', '.join(diff)}); use another --runs-dir or remove it"
        )


def summary_path(s: BenchSettings, spec: RunSpec) -> Path:
    """Where a finished run's summary is (the mark that it finished)."""
    return s.runs_dir / spec.name / "summary.json"
