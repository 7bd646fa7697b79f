"""The embedded default job: Tree-GRPO on the synthetic multi-hop world, on a CPU, in minutes:
the warm start (cached), then the job runner on the training world. Training and held-out
questions come from different worlds (the same names, other facts), so the agent has to search
(BM25 over each world's corpus). The world and the web variant: docs/embedded.md."""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from typing import Any

from treegrpo.embedded.synthetic import World, train_eval_worlds
from treegrpo.embedded.web import world_web
from treegrpo.engine.sampling import SamplingParams
from treegrpo.eval.evaluate import EvalItem, before_after_rows
from treegrpo.jobs.presets import EmbeddedConfig
from treegrpo.jobs.runner import (
    Evaluator,
    Job,
    Report,
    evenly_spaced,
    greedy_evaluator,
    run_job,
    start_run,
)
from treegrpo.retrieval.base import SearchTool
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.tools.registry import Toolbox
from treegrpo.train.config import ClusterConfig
from treegrpo.train.task import TrainItem, TrainSettings
from treegrpo.warmstart.tiny import CIRCUIT_PARAMS, WarmStartConfig, demonstrations, warm_start


def world_tools(cfg: EmbeddedConfig, world: World) -> SearchTool | Toolbox:
    """The agent's tools in ``world``: BM25 over its corpus, as a search (the default) or as the
    web variant's search and visit."""
    retriever = BM25Retriever(world.passages)
    return world_web(retriever, world.passages, cfg.topk) if cfg.web else retriever


def held_out_evaluator(cfg: EmbeddedConfig, eval_world: World) -> Evaluator:
    """The greedy report on ``cfg.eval_questions`` questions of ``eval_world`` (evenly spaced
    over its list, which is ordered by hop count, so every hop count keeps its share), searched
    over its own corpus: what the job reports before and after RL."""
    items = [EvalItem.of(q) for q in evenly_spaced(eval_world.questions, cfg.eval_questions)]
    return greedy_evaluator(world_tools(cfg, eval_world), items, cfg)


def rl_and_eval_worlds(cfg: EmbeddedConfig) -> tuple[World, World]:
    """The world RL trains on and the held-out world: the same name pool, other facts."""
    return train_eval_worlds(cfg.world_seed, n_people=cfg.people, n_questions=cfg.questions)


def run_embedded(
    settings: TrainSettings,
    cfg: EmbeddedConfig,
    warm: WarmStartConfig | None = None,
    progress: bool = True,
    before: Report | None = None,
    cluster: ClusterConfig = ClusterConfig(),
) -> dict[str, Any]:
    """``runner.run_job`` on ``cfg``'s world from the warm start ``warm`` (default: the
    recipe's with ``cfg``'s seed and linear path); ``before``: the warm start's held-out report,
    for runs that share the warm start and held-out questions."""
    t0 = time.perf_counter()
    start_run(settings.run)  # before the warm start: a refused run costs nothing
    model_cfg = settings.model
    warm = warm or WarmStartConfig(seed=cfg.warm_start_seed, linear=cfg.warm_start_linear)
    if cfg.web:  # the web variant's demonstrations take as many turns as its episodes
        warm = replace(warm, web=True, max_turns=cfg.max_turns)
    model_dir = warm_start(warm, progress=progress)
    if warm.induction and model_cfg.lora_rank == 0:
        # RL keeps the hand-built copying circuits fixed too (see warmstart.tiny.CIRCUIT_PARAMS).
        model_cfg = replace(model_cfg, frozen=tuple(sorted({*model_cfg.frozen, *CIRCUIT_PARAMS})))
    train_world, eval_world = rl_and_eval_worlds(cfg)
    oracle = cfg.demo_anchor == "oracle"
    job = Job(
        model_dir=model_dir,
        tool=world_tools(cfg, train_world),
        items=[TrainItem(q.question, tuple(q.golds), q.uid, q.hops) for q in train_world.questions],
        sampling=SamplingParams(temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens),
        limits=AgentLimits(cfg.max_turns, cfg.topk, cfg.max_context),
        max_obs_tokens=cfg.max_obs_tokens,
        held_out=held_out_evaluator(cfg, eval_world),
        eval_device="cpu",  # the tiny model: evaluated where it was built
        report=_report,
        summary={"warm_start_dir": str(model_dir)},
        config={"embedded": asdict(cfg)},
        seconds={"warm_start": time.perf_counter() - t0},
        # algo.demo_coef's term, if on: demonstrations made last, after the timed warm start
        demos=tuple(demonstrations(warm, oracle=oracle) if settings.algo.demo_coef else ()),
    )
    return run_job(job, replace(settings, model=model_cfg), cluster, before, progress)


def _report(before: Report | None, after: Report | None) -> list[str]:
    assert before is not None and after is not None  # the held-out world is never empty
    return [before_after_table(before, after), ""]


def before_after_table(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Held-out EM by hop count and overall before and after RL, with how the misses after ended."""
    groups = [(f"{k}-hop", k) for k in before["by_hops"]] + [("overall", None)]
    return before_after_rows(
        [
            (name, *(r["overall"] if key is None else r["by_hops"][key] for r in (before, after)))
            for name, key in groups
        ]
    )
