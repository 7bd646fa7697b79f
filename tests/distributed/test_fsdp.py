"""The update on two FSDP2 ranks over gloo (``distributed.fsdp``): one RL step moves the
parameters and the AdamW state as one process does, within fp32 rounding."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import agent_fixtures
from agent_fixtures import FACTS, PEOPLE, WordTool, trained_agent
from treegrpo.agent.stops import StepStopper
from treegrpo.distributed.cluster import ClusterTooSmall, init_ray
from treegrpo.distributed.fsdp import FSDPLearner, RankSpec, deal
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.records import LeafSequence
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.rollout.source import LocalRollout
from treegrpo.train.batch import make_micro_batches
from treegrpo.train.config import AlgorithmConfig, ModelConfig, OptimConfig
from treegrpo.train.policy import prepare_policy
from treegrpo.train.sft import SFTExample
from treegrpo.train.step import Batch, Learning, Rollouts, StepSettings, rl_step
from treegrpo.train.task import TrainSettings
from treegrpo.train.trainer import make_optimizer
from treegrpo.train.update import weighted

LIMITS = AgentLimits(max_turns=2, topk=3, max_context=1024)
SAMPLING = SamplingParams(max_new_tokens=40)


def test_deal_gives_every_rank_as_many_micro_batches_and_keeps_the_weights() -> None:
    seqs = [[1] * n for n in (5, 9, 3, 12, 7)]
    leaves = [LeafSequence(s, [0] + [1] * (len(s) - 1), [0.0] * len(s), 1) for s in seqs]
    mbs = make_micro_batches(leaves, [1.0] * 5, max_tokens=12)
    parts = weighted(mbs, "token-mean")
    assert len(parts) >= 3
    shares = deal([parts, parts[:1]], ranks=2)
    for mini in range(2):
        counts = [len(shares[r][mini]) for r in range(2)]
        assert counts[0] == counts[1]
        dealt = [p for r in range(2) for p in shares[r][mini] if p.counted]
        assert sorted(id(p) for p in dealt) == sorted(id(p) for p in [parts, parts[:1]][mini])
        stand_ins = [p for r in range(2) for p in shares[r][mini] if not p.counted]
        assert all(p.weight == 0.0 for p in stand_ins)
    assert len([p for r in range(2) for p in shares[r][1] if not p.counted]) == 1
    assert sum(p.weight for r in range(2) for p in shares[r][0]) == pytest.approx(1.0)


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray = pytest.importorskip("ray")
    init_ray(num_cpus=2, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(agent_fixtures)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.shutdown()


def _batch(agent):  # type: ignore[no-untyped-def]
    people = PEOPLE[:4]
    return Batch(
        [agent.prompt(p) for p in people],
        [[FACTS[p]] for p in people],
        [f"toy-{p}" for p in people],
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("lora", "shared", "demo"),
    [(0, False, 0.0), (4, False, 0.0), (0, True, 0.0), (4, True, 0.0), (0, True, 0.5)],
)
def test_two_ranks_update_as_one_process(  # type: ignore[no-untyped-def]
    cluster, tmp_path: Path, lora: int, shared: bool, demo: float
) -> None:
    """Full fine-tuning with a KL term (the reference sharded too) and an entropy bonus, or
    LoRA (its base is the reference); two mini-batches of several micro-batches each; two
    steps, the second on new ranks given the first's gathered weights and AdamW state. With
    ``shared``, each prompt's paths packed (``train.shared``) on both sides; with ``demo``, the
    demonstration term (``algo.demo_coef``) counted once, not once per rank."""
    agent = trained_agent()
    agent.model.save_pretrained(tmp_path)
    cfg = ModelConfig(lora_rank=lora, cpu_speedups=False)
    optim = OptimConfig(lr=1e-3, mini_batch_prompts=2, micro_batch_tokens=600, warmup_steps=3)
    algo = AlgorithmConfig(m=2, kl_coef=0.05, entropy_coef=0.01, shared_prefix=shared,
                           demo_coef=demo, demo_batch=3)  # fmt: skip
    demos = [SFTExample(ids, [0] * (len(ids) - 4) + [1] * 4)
             for ids in (agent.prompt(p) for p in PEOPLE[4:8])]  # fmt: skip
    runs = {}
    for where in ("here", "ranks"):
        policy = prepare_policy(copy.deepcopy(agent.model), cfg, seed=0)
        reference = copy.deepcopy(agent.model).requires_grad_(False) if not lora else None
        opt, sched = make_optimizer(policy, optim)
        engine = HFEngine(policy, agent.tokenizer, StepStopper(agent.tokenizer), cpu_speedups=False)
        rollouts = LocalRollout(engine, agent.protocol, WordTool())
        metrics = []
        for step in range(2):
            learner = None
            if where == "ranks":  # new ranks every step: they start from the driver's state
                spec = RankSpec(str(tmp_path), cfg, optim, reference=not lora, seed=0)
                learner = FSDPLearner(spec, 2, policy, opt, sched)
            learning = Learning(policy, reference, opt, sched, learner=learner, demos=demos)
            side = Rollouts(rollouts, agent.protocol, SAMPLING, LIMITS)
            settings = StepSettings(algo, optim)
            metrics.append(rl_step(learning, side, _batch(agent), settings, seed=step))
            if learner is not None:
                learner.load_optimizer_into(opt)  # as before a checkpoint
                learner.close()
        runs[where] = (policy, opt, sched, metrics)
    (p1, o1, s1, steps1), (p2, o2, s2, steps2) = runs["here"], runs["ranks"]
    for m1, m2 in zip(steps1, steps2, strict=True):
        assert m1["train/updates"] == m2["train/updates"] == 2
        # the ranks went through every path token, computing each shared one once when packed
        assert m2["tokens/update/policy"] == m1["tokens/update/policy"] > 0
        assert (m2["tokens/update/computed"] < m2["tokens/update/policy"]) == shared
        assert m1["reward/mean"] == m2["reward/mean"]
        assert ("loss/demo_nll" in m1) == ("loss/demo_nll" in m2) == (demo > 0)
        for key in ("loss/pg_loss", "loss/kl", "loss/entropy", "train/grad_norm", "loss/demo_nll"):
            if key not in m1:
                continue
            assert m2[key] == pytest.approx(m1[key], rel=1e-4, abs=1e-7), key
    moved = 0
    start = dict(prepare_policy(copy.deepcopy(agent.model), cfg, seed=0).named_parameters())
    for (name, a), (_, b) in zip(p1.named_parameters(), p2.named_parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6, msg=name)
        moved += int(not torch.equal(a, start[name]))
    assert moved == sum(p.requires_grad for p in p1.parameters())  # every trained one moved
    s1_state, s2_state = o1.state_dict(), o2.state_dict()
    assert s1_state["state"].keys() == s2_state["state"].keys()
    for i, st in s1_state["state"].items():
        for k in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(s2_state["state"][i][k], st[k], rtol=1e-3, atol=1e-7)
    assert s1.state_dict()["last_epoch"] == s2.state_dict()["last_epoch"] == 4


@pytest.mark.slow
def test_the_embedded_job_on_two_ranks_checkpoints_for_transformers_and_resumes_in_one_process(  # type: ignore[no-untyped-def]
    cluster, tmp_path, monkeypatch
) -> None:
    """`treegrpo train --cluster.train-ranks 2` for two steps, then `--run.resume` in one
    process for a third: the same rewards per step and the same final weights (fp32 rounding)
    as three steps in one process; the sharded run's checkpoint loads in plain transformers."""
    from transformers import AutoModelForCausalLM

    from agent_fixtures import TINY_WARM
    from treegrpo.jobs.embedded import run_embedded
    from treegrpo.jobs.presets import DEFAULT_ALGO, DEFAULT_EMBEDDED, DEFAULT_OPTIM, DEFAULT_RUN
    from treegrpo.train.checkpoint import latest_checkpoint
    from treegrpo.train.config import ClusterConfig

    monkeypatch.setenv("TREEGRPO_CACHE_DIR", str(tmp_path / "cache"))
    world = replace(DEFAULT_EMBEDDED, eval_questions=4, max_new_tokens=16)
    algo = replace(DEFAULT_ALGO, skip_uniform_prompts=False)
    base = replace(DEFAULT_RUN, steps=3, prompts_per_step=4, save_every=1)

    def job(name: str, steps: int, cluster_cfg: ClusterConfig, resume: bool = False) -> None:
        run = replace(base, out_dir=str(tmp_path / name), steps=steps, resume=resume)
        settings = TrainSettings(algo, DEFAULT_OPTIM, run)
        run_embedded(settings, world, warm=TINY_WARM, progress=False, cluster=cluster_cfg)

    job("local", 3, ClusterConfig())
    job("ranks", 2, ClusterConfig(train_ranks=2))
    sharded = latest_checkpoint(tmp_path / "ranks")
    assert sharded is not None and sharded.name == "step-000002"
    plain = AutoModelForCausalLM.from_pretrained(sharded / "model")  # no treegrpo needed
    local2 = AutoModelForCausalLM.from_pretrained(tmp_path / "local/checkpoints/step-000002/model")
    for (name, a), (_, b) in zip(local2.named_parameters(), plain.named_parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)
    job("ranks", 3, ClusterConfig(), resume=True)  # the third step in one process

    def steps(name: str) -> list[dict[str, float]]:
        lines = (tmp_path / name / "metrics.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    local, resumed = steps("local"), steps("ranks")
    assert [m["step"] for m in resumed] == [1, 2, 3]
    for a, b in zip(local, resumed, strict=True):
        assert b["reward/mean"] == a["reward/mean"] and b["agent/leaves"] == a["agent/leaves"]
        assert b["loss/pg_loss"] == pytest.approx(a["loss/pg_loss"], rel=1e-3, abs=1e-6)
    final_local = AutoModelForCausalLM.from_pretrained(
        tmp_path / "local/checkpoints/step-000003/model"
    )
    final = AutoModelForCausalLM.from_pretrained(tmp_path / "ranks/checkpoints/step-000003/model")
    for (name, a), (_, b) in zip(
        final_local.named_parameters(), final.named_parameters(), strict=True
    ):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("ranks", "cpus", "gpus", "message"),
    [
        (4, 1.0, 0.0, r"^4 training ranks x 1 CPU ask Ray for 4 CPUs but the cluster has 2: "),
        (2, 0.5, 1.0, r"^2 training ranks x 1 GPU ask Ray for 2 GPUs but the cluster has 0: "),
    ],
)
def test_ranks_the_cluster_cannot_hold_are_refused_before_any_starts(  # type: ignore[no-untyped-def]
    cluster, tmp_path: Path, monkeypatch, ranks: int, cpus: float, gpus: float, message: str
) -> None:
    import ray

    agent = trained_agent()
    spec = RankSpec(str(tmp_path), ModelConfig(), OptimConfig())
    opt, sched = make_optimizer(agent.model, OptimConfig())

    def no_actor(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("an actor was started")

    monkeypatch.setattr(ray, "remote", no_actor)
    with pytest.raises(ClusterTooSmall, match=message):
        FSDPLearner(spec, ranks, agent.model, opt, sched, cpus_per_rank=cpus, gpus_per_rank=gpus)


@pytest.mark.slow
def test_ranks_waiting_for_cpus_other_actors_hold_fail_with_what_ray_has(  # type: ignore[no-untyped-def]
    cluster, tmp_path: Path
) -> None:
    import ray

    @ray.remote(num_cpus=2)
    class Holder:  # another job's actor, on all of the cluster's CPUs
        def ready(self) -> bool:
            return True

    holder = Holder.remote()  # type: ignore[attr-defined]
    ray.get(holder.ready.remote())
    agent = trained_agent()
    spec = RankSpec(str(tmp_path), ModelConfig(), OptimConfig())
    opt, sched = make_optimizer(agent.model, OptimConfig())
    try:
        with pytest.raises(
            RuntimeError, match=r"2 training ranks .*1\.0 CPUs.* did not start .*free"
        ):
            FSDPLearner(spec, 2, agent.model, opt, sched, start_timeout=2)
    finally:
        ray.kill(holder)
