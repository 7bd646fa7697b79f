"""The embedded default job: Tree-GRPO on the synthetic multi-hop world, on a CPU, in minutes.

    warm start (cached) → held-out eval → RL on the training world → held-out eval
    → before/after table, learning curve, report.md in the run directory

Training and evaluation questions come from different generated worlds (the same names, other
facts), so the agent cannot answer from memory: it has to search. Everything here is real: the
BM25 retriever over each world's corpus, the transformers model, the engine, the trainer.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from treegrpo.data.synthetic import World, train_eval_worlds
from treegrpo.engine.sampling import SamplingParams
from treegrpo.eval.evaluate import EvalItem, evaluate, write_report
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.tools.bm25 import BM25Retriever
from treegrpo.train.config import AlgorithmConfig, ModelConfig, OptimConfig, RunConfig
from treegrpo.train.presets import EmbeddedConfig
from treegrpo.train.trainer import TrainItem, refuse_previous_run, train

log = logging.getLogger(__name__)


def load_model(path: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path)
    return model, AutoTokenizer.from_pretrained(path)


def held_out_items(world: Any, n: int) -> list[EvalItem]:
    """``n`` questions of ``world`` (a ``data.synthetic.World``) evenly spaced over its list,
    which is ordered by hop count, so every hop count keeps its share."""
    pick = np.linspace(0, len(world.questions) - 1, n).round().astype(int)
    return [
        EvalItem(q.question, list(q.golds), q.source, q.hops)
        for q in (world.questions[i] for i in sorted(set(pick.tolist())))
    ]


def held_out_evaluator(
    cfg: EmbeddedConfig, eval_world: World
) -> Callable[[Any, Any], dict[str, Any]]:
    """evaluate(model, tokenizer) → the greedy report on ``cfg.eval_questions`` questions of
    ``eval_world``, searched with BM25 over its own corpus, with the job's agent limits: what
    the job reports before and after RL."""
    tool = BM25Retriever(eval_world.passages)
    held_out = held_out_items(eval_world, cfg.eval_questions)
    limits = AgentLimits(cfg.max_turns, cfg.topk, cfg.max_context)

    def run(model: Any, tokenizer: Any) -> dict[str, Any]:
        return evaluate(
            model, tokenizer, tool, held_out, limits, cfg.max_new_tokens, cfg.max_obs_tokens
        )

    return run


def rl_and_eval_worlds(cfg: EmbeddedConfig) -> tuple[World, World]:
    """The world RL trains on and the held-out world: the same name pool, other facts."""
    return train_eval_worlds(cfg.world_seed, n_people=cfg.people, n_questions=cfg.questions)


def run_embedded(
    algo: AlgorithmConfig,
    optim: OptimConfig,
    run: RunConfig,
    cfg: EmbeddedConfig,
    warm: Any | None = None,
    progress: bool = True,
    model_cfg: ModelConfig = ModelConfig(),
    before: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the default job; returns the summary also written to ``<run>/summary.json``.

    ``before``: the warm start's held-out report (``evaluate``'s output) to use instead of
    evaluating it again; runs that share the warm start and held-out questions can share it.
    """
    from treegrpo.models.warmstart import CIRCUIT_PARAMS, WarmStartConfig, warm_start

    t0 = time.perf_counter()
    out = Path(run.out_dir)
    refuse_previous_run(out, run.resume, run.overwrite)  # before anything is written there
    out.mkdir(parents=True, exist_ok=True)
    warm = warm or WarmStartConfig()
    model_dir = warm_start(warm, progress=progress)
    if warm.induction and model_cfg.lora_rank == 0:
        # RL keeps the hand-built copying circuits fixed too (see warmstart.CIRCUIT_PARAMS).
        model_cfg = replace(model_cfg, frozen=tuple(sorted({*model_cfg.frozen, *CIRCUIT_PARAMS})))
    t_warm = time.perf_counter() - t0
    train_world, eval_world = rl_and_eval_worlds(cfg)
    train_tool = BM25Retriever(train_world.passages)
    items = [TrainItem(q.question, tuple(q.golds), q.uid) for q in train_world.questions]
    limits = AgentLimits(cfg.max_turns, cfg.topk, cfg.max_context)
    sampling = SamplingParams(temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens)
    held_out_eval = held_out_evaluator(cfg, eval_world)

    if before is None:
        log.info("evaluating the warm start on %d held-out questions", cfg.eval_questions)
        model, tokenizer = load_model(model_dir)
        before = held_out_eval(model, tokenizer)
        del model
    write_report(before, out, "eval-before")
    log.info("held-out EM before RL: %.3f; RL: %d steps", before["overall"]["em"], run.steps)

    bar = _Progress(run.steps) if progress else None

    def periodic(model: Any, tokenizer: Any, step: int) -> dict[str, float]:
        report = held_out_eval(model, tokenizer)
        return {"eval/em": report["overall"]["em"], "eval/f1": report["overall"]["f1"]}

    t1 = time.perf_counter()
    train(
        model_dir,
        load_model,
        train_tool,
        items,
        algo,
        optim,
        sampling,
        limits,
        run,
        cfg.max_obs_tokens,
        evaluate=periodic,
        on_step=bar.update if bar else None,
        model_cfg=model_cfg,
    )
    if bar:
        bar.close()
    t_train = time.perf_counter() - t1

    from treegrpo.train.checkpoint import latest_checkpoint
    from treegrpo.viz.curves import plot_learning_curve

    final = latest_checkpoint(out)
    assert final is not None
    model, tokenizer = load_model(final / "model")
    after = held_out_eval(model, tokenizer)
    write_report(after, out, "eval-after")
    log.info("held-out EM after RL: %.3f", after["overall"]["em"])
    curve = plot_learning_curve(out)
    summary: dict[str, Any] = {
        "warm_start_dir": str(model_dir),
        "before": {k: v for k, v in before.items() if k != "rows"},
        "after": {k: v for k, v in after.items() if k != "rows"},
        "seconds": {"warm_start": t_warm, "train": t_train, "total": time.perf_counter() - t0},
        "config": {
            "algo": asdict(algo),
            "optim": asdict(optim),
            "run": asdict(run),
            "embedded": asdict(cfg),
            "model": asdict(model_cfg),
        },
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    report = [
        f"# {out.name}",
        "",
        before_after_table(before, after),
        "",
        f"![learning curve]({curve.name})",
        "",
        f"Wall time: {summary['seconds']['total']:.0f} s "
        f"(warm start {t_warm:.0f} s, RL {t_train:.0f} s).",
    ]
    (out / "report.md").write_text("\n".join(report) + "\n")
    return summary


def before_after_table(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Held-out EM by hop count and overall, before and after RL (markdown)."""
    lines = [
        "| held-out group | n | EM before | EM after | tool calls before | after |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    groups = [(f"{k}-hop", k) for k in before["by_hops"]] + [("overall", None)]
    for name, key in groups:
        b = before["overall"] if key is None else before["by_hops"][key]
        a = after["overall"] if key is None else after["by_hops"][key]
        lines.append(
            f"| {name} | {b['n']} | {100 * b['em']:.1f} | {100 * a['em']:.1f} | "
            f"{b['tool_calls']:.2f} | {a['tool_calls']:.2f} |"
        )
    return "\n".join(lines)


class _Progress:
    """A rich progress bar with the live reward, EM and generation speed."""

    def __init__(self, total: int) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        self._p = Progress(
            TextColumn("RL"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TextColumn("{task.fields[info]}"),
            TimeRemainingColumn(),
        )
        self._task = self._p.add_task("rl", total=total, info="")
        self._p.start()

    def update(self, step: int, m: dict[str, float]) -> None:
        info = (
            f"reward {m['reward/mean']:.3f}  EM {m['reward/em']:.3f}  "
            f"{m['time/gen_tokens_per_s']:.0f} tok/s"
        )
        if "eval/em" in m:
            info += f"  held-out EM {m['eval/em']:.3f}"
        self._p.update(self._task, completed=step, info=info)

    def close(self) -> None:
        self._p.stop()
