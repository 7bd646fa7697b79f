"""One RL step on the tiny trained agent: every parameter moves, zero advantage moves nothing."""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch

from agent_fixtures import FACTS, PEOPLE, WordTool, trained_agent
from treegrpo.agent.stops import StepStopper
from treegrpo.engine.cpu import onednn
from treegrpo.engine.cpu.speedups import CpuSpeedups
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.rollout.source import LocalRollout
from treegrpo.train import batch as batch_module
from treegrpo.train import step as step_module
from treegrpo.train.config import AlgorithmConfig, ModelConfig, OptimConfig
from treegrpo.train.policy import prepare_policy
from treegrpo.train.sft import SFTExample, weighted_nll
from treegrpo.train.step import (
    Batch,
    Learning,
    Rollouts,
    StepSettings,
    depth_shares,
    rl_step,
)

LIMITS = AgentLimits(max_turns=2, topk=3, max_context=1024)
SAMPLING = SamplingParams(max_new_tokens=40)


def _rl_step(policy, ref, opt, eng, agent, batch, algo, optim):  # type: ignore[no-untyped-def]
    """``rl_step`` on the tool-free toy setup of ``_setup``, seed 0."""
    rollouts = Rollouts(LocalRollout(eng, agent.protocol, WordTool()), agent.protocol, SAMPLING,
                        LIMITS)  # fmt: skip
    return rl_step(Learning(policy, ref, opt), rollouts, batch, StepSettings(algo, optim), seed=0)


def _setup(lr: float, weight_decay: float = 0.0, cpu_speedups: bool | None = None):  # type: ignore[no-untyped-def]
    agent = trained_agent()
    policy = copy.deepcopy(agent.model)
    ref = copy.deepcopy(agent.model)
    opt = torch.optim.AdamW(policy.parameters(), lr=lr, weight_decay=weight_decay)
    eng = HFEngine(policy, agent.tokenizer, StepStopper(agent.tokenizer), cpu_speedups=cpu_speedups)
    people = PEOPLE[:4]
    batch = Batch(
        [agent.prompt(p) for p in people],
        [[FACTS[p]] for p in people],
        [f"toy-{p}" for p in people],
    )
    return agent, policy, ref, opt, eng, batch


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["tree", "chain"])
def test_one_step_changes_every_parameter(algo: str) -> None:
    agent, policy, ref, opt, eng, batch = _setup(lr=1e-2)
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    cfg = AlgorithmConfig(algo=algo, m=2 if algo == "tree" else 4)  # type: ignore[arg-type]
    metrics = _rl_step(
        policy,
        ref,
        opt,
        eng,
        agent,
        batch,
        cfg,
        OptimConfig(lr=1e-2, mini_batch_prompts=2, micro_batch_tokens=1500),
    )
    assert metrics["train/updates"] == 2 and metrics["train/skipped_updates"] == 0
    assert metrics["agent/leaves"] == (4 * 2 * 3 if algo == "tree" else 4 * 4)
    assert 0.0 <= metrics["reward/em"] <= 1.0 and metrics["adv/abs_mean"] > 0
    assert 0.0 <= metrics["adv/uniform_prompts"] < 1.0  # some prompt had a reward spread
    unchanged = [n for n, p in policy.named_parameters() if torch.equal(p, before[n])]
    assert unchanged == []


@pytest.mark.slow
def test_zero_advantage_without_kl_or_entropy_does_not_move_the_policy(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    agent, policy, ref, opt, eng, batch = _setup(lr=1e-2)
    monkeypatch.setattr(
        step_module, "tree_advantage", lambda rewards, *a, **k: np.zeros(len(rewards))
    )
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    cfg = AlgorithmConfig(kl_coef=0.0, entropy_coef=0.0)
    metrics = _rl_step(policy, ref, opt, eng, agent, batch, cfg, OptimConfig(lr=1e-2))
    assert metrics["train/grad_norm"] == 0.0
    for n, p in policy.named_parameters():
        assert torch.equal(p, before[n]), n


@pytest.mark.slow
def test_non_finite_gradient_skips_the_update(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    agent, policy, ref, opt, eng, batch = _setup(lr=1e-2)
    monkeypatch.setattr(
        step_module, "tree_advantage", lambda rewards, *a, **k: np.full(len(rewards), np.inf)
    )
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    metrics = _rl_step(policy, ref, opt, eng, agent, batch, AlgorithmConfig(), OptimConfig(lr=1e-2))
    assert metrics["train/skipped_updates"] == metrics["train/updates"] == 1
    for n, p in policy.named_parameters():
        assert torch.equal(p, before[n]), n


@pytest.mark.slow
def test_old_logprobs_are_the_policy_before_any_update(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The first update reuses its own forward as the old log-probs and the later mini-batches
    (and epochs) use log-probs computed before any update: all equal the starting policy's."""
    agent, policy, _, opt, eng, batch = _setup(lr=1e-2)
    start = copy.deepcopy(policy)
    seen: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (ids, keep, logp_old)
    inputs: list[tuple[torch.Tensor, torch.Tensor]] = []
    real_logprobs, real_loss = batch_module.token_logprobs, batch_module.ppo_clip_loss

    def logprobs(model, input_ids, attention_mask, *a, **k):  # type: ignore[no-untyped-def]
        if torch.is_grad_enabled():  # an update's forward (old log-probs run under no_grad)
            inputs.append((input_ids, k["keep"]))  # the action tokens, the only ones read
        return real_logprobs(model, input_ids, attention_mask, *a, **k)

    def loss(logp, logp_old, *a, **k):  # type: ignore[no-untyped-def]
        seen.append((*inputs[-1], logp_old.detach().clone()))
        return real_loss(logp, logp_old, *a, **k)

    monkeypatch.setattr(batch_module, "token_logprobs", logprobs)
    monkeypatch.setattr(batch_module, "ppo_clip_loss", loss)
    metrics = _rl_step(
        policy,
        None,
        opt,
        eng,
        agent,
        batch,
        AlgorithmConfig(kl_coef=0.0, shared_prefix=False),  # each path whole, spied on here
        OptimConfig(lr=1e-2, mini_batch_prompts=2, ppo_epochs=2),
    )
    assert metrics["train/updates"] == 4 and len(seen) >= 4
    with torch.no_grad():
        for ids, keep, logp_old in seen:
            expect = real_logprobs(start, ids, None)[0]  # every position, right-padded rows
            mask = keep.bool()
            assert mask.any() and not mask.all()
            assert torch.allclose(logp_old[mask], expect[mask], atol=1e-5)
            assert not logp_old[~mask].any()  # the rest is not computed
    assert any(
        not torch.equal(p, q) for p, q in zip(policy.parameters(), start.parameters(), strict=True)
    )


def _step_with_advantages(monkeypatch, adv_of_group, skip: bool, shared: bool = True):  # type: ignore[no-untyped-def]
    """One tree step whose advantages are ``adv_of_group(groups)``; returns the metrics, the
    advantages each mini-batch was built from (packed or each path whole), and whether any
    parameter moved."""
    agent, policy, ref, opt, eng, batch = _setup(lr=1e-2)
    monkeypatch.setattr(
        step_module, "tree_advantage", lambda rewards, groups, *a, **k: adv_of_group(groups)
    )
    seen: list[list[float]] = []
    real_whole, real_packed = step_module.make_micro_batches, step_module.pack_batches

    def whole(seqs, advantages, *args):  # type: ignore[no-untyped-def]
        seen.append(list(advantages))
        return real_whole(seqs, advantages, *args)

    def packed(rollout, leaves, advantages, *args):  # type: ignore[no-untyped-def]
        seen.append(list(advantages))
        return real_packed(rollout, leaves, advantages, *args)

    monkeypatch.setattr(step_module, "make_micro_batches", whole)
    monkeypatch.setattr(step_module, "pack_batches", packed)
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    algo = AlgorithmConfig(skip_uniform_prompts=skip, shared_prefix=shared)  # KL, entropy on
    optim = OptimConfig(lr=1e-2, mini_batch_prompts=2)
    metrics = _rl_step(policy, ref, opt, eng, agent, batch, algo, optim)
    moved = any(not torch.equal(p, before[n]) for n, p in policy.named_parameters())
    return metrics, seen, moved


@pytest.mark.slow
@pytest.mark.parametrize("skip", [False, True])
@pytest.mark.parametrize("shared", [True, False])
def test_skip_uniform_prompts_trains_only_prompts_with_an_advantage(
    monkeypatch, skip, shared
) -> None:  # type: ignore[no-untyped-def]
    # one prompt (group 2) has advantages, the other three are all zero
    metrics, seen, moved = _step_with_advantages(
        monkeypatch, lambda g: np.where(g == 2, np.linspace(-1, 1, len(g)), 0.0), skip, shared
    )
    flat = [a for mini in seen for a in mini]
    assert moved
    if skip:
        assert metrics["train/prompts_updated"] == 1 and metrics["train/updates"] == 1
        assert len(flat) == 2 * 3 and all(a != 0 for a in flat)  # that prompt's six leaves
    else:
        assert metrics["train/prompts_updated"] == 4 and metrics["train/updates"] == 2
        assert len(flat) == 4 * 2 * 3


@pytest.mark.slow
@pytest.mark.parametrize("skip", [False, True])
def test_all_zero_advantages_move_the_policy_only_through_kl_and_entropy(monkeypatch, skip) -> None:  # type: ignore[no-untyped-def]
    metrics, _, moved = _step_with_advantages(monkeypatch, lambda g: np.zeros(len(g)), skip)
    assert moved == (not skip)  # the entropy bonus moves it unless every prompt is skipped
    assert metrics["train/updates"] == (0 if skip else 2)


@pytest.mark.slow
def test_tree_diagnostics_are_logged_and_consistent() -> None:
    agent, policy, ref, opt, eng, batch = _setup(lr=1e-3)
    metrics = _rl_step(
        policy, ref, opt, eng, agent, batch, AlgorithmConfig(m=2, n=2, l=1), OptimConfig()
    )
    assert 0.0 <= metrics["tree/mixed_reward_share"] <= 1.0
    assert 1.0 <= metrics["tree/distinct_leaves"] <= 3.0  # 1 + n·l leaves per tree
    assert 0.0 <= metrics["tree/root_expansions"] <= 1.0
    assert 0.0 <= metrics["tree/expansion_depth"] <= LIMITS.max_turns
    chain = _rl_step(
        policy, ref, opt, eng, agent, batch, AlgorithmConfig("chain", m=4), OptimConfig()
    )
    assert chain["tree/distinct_leaves"] == 1.0  # a chain is a tree of one leaf
    assert chain["tree/mixed_reward_share"] == 0.0
    # the step's time split by phase adds up to the whole; the engine computed at least every
    # generated token
    phases = ("rollout", "update", "weight_push", "other")
    assert all(metrics[f"time/{p}_s"] >= 0 for p in phases)
    total = sum(metrics[f"time/{p}_s"] for p in phases)
    assert total == pytest.approx(metrics["time/step_s"], abs=1e-6)
    assert 0.0 < metrics["time/expansion_choice_s"] < metrics["time/rollout_s"]
    assert metrics["spend/processed_per_prompt"] >= metrics["spend/generated_per_prompt"] > 0
    # the update's parts: the old and reference log-prob passes and the policy's, within it
    parts = [metrics[f"time/update/{p}_s"] for p in ("old_logprobs", "ref_logprobs", "policy")]
    assert all(x > 0 for x in parts) and sum(parts) <= metrics["time/update_s"]


@pytest.mark.slow
def test_a_step_with_a_difficulty_budget_keeps_the_rungs_leaves() -> None:
    """4 prompts × 2 trees × (1 + 2·1) leaves, however the round shares its expansions."""
    agent, policy, ref, opt, eng, batch = _setup(lr=1e-3)
    algo = AlgorithmConfig(m=2, n=2, l=1, expansion_budget="difficulty")
    metrics = _rl_step(policy, ref, opt, eng, agent, batch, algo, OptimConfig())
    assert metrics["agent/leaves"] == 4 * 2 * 3
    assert metrics["time/expansion_choice_s"] > 0  # the leaves were scored and allocated


@pytest.mark.parametrize("shape", [{"l": 0}, {"n": 0}, {"k": 1}])
def test_a_tree_of_one_leaf_is_refused_with_a_pointer_to_chain(shape: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="use algo: chain"):
        AlgorithmConfig(algo="tree", **shape)  # type: ignore[arg-type]
    # inter-only credit on one-leaf trees is chain GRPO, so it stays allowed
    assert AlgorithmConfig(algo="tree", advantage_mode="inter", **shape).mode() == "inter"  # type: ignore[arg-type]


@pytest.mark.slow
def test_cpu_speedups_compute_the_same_step(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """One step with the CPU speed-ups (engine.cpu.speedups, oneDNN forced on so they run on any
    CPU) and one without: the same forest and rewards, the same update (SGD: the gradient
    itself) up to fp32 rounding, and without them not one oneDNN product."""
    if not onednn.supported(torch.nn.Linear(2, 2)):
        pytest.skip("no oneDNN linear ops in this torch build")
    monkeypatch.setenv(onednn.ENV, "1")
    real = torch.ops.mkldnn._linear_pointwise
    results = {}
    for on in (False, True):
        agent, policy, ref, _, eng, batch = _setup(lr=1e-2, cpu_speedups=on)
        opt = torch.optim.SGD(policy.parameters(), lr=1.0)  # weights move by the gradient
        if on:  # as the trainer does
            for m in (policy, ref):
                CpuSpeedups.attach(m)
        calls = [0]

        def counting(*args, calls=calls):  # type: ignore[no-untyped-def]
            calls[0] += 1
            return real(*args)

        monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", counting)
        cfg = AlgorithmConfig(kl_coef=0.01)  # with a reference model
        metrics = _rl_step(policy, ref, opt, eng, agent, batch, cfg, OptimConfig(lr=1e-2))
        monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", real)
        results[on] = (metrics, dict(policy.named_parameters()), calls[0])
    (plain, plain_w, plain_calls), (fast, fast_w, fast_calls) = results[False], results[True]
    assert plain_calls == 0 and fast_calls > 0
    for key in ("agent/leaves", "reward/em", "spend/generated_per_prompt"):
        assert fast[key] == plain[key], key
    for key in ("loss/pg_loss", "loss/kl", "train/grad_norm"):
        assert fast[key] == pytest.approx(plain[key], rel=1e-3, abs=1e-6), key
    for name, p in plain_w.items():
        torch.testing.assert_close(fast_w[name], p, rtol=1e-3, atol=1e-5, msg=name)


def test_depth_shares_count_expansions_per_depth_with_deeper_ones_in_the_last() -> None:
    got = depth_shares(np.array([0, 1, 1, 2, 3, 5, 0, 1]))
    assert got == {
        "tree/expansions_at_depth/0": 0.25,
        "tree/expansions_at_depth/1": 0.375,
        "tree/expansions_at_depth/2": 0.125,
        "tree/expansions_at_depth/3+": 0.25,
    }
    assert depth_shares(None) == {} and depth_shares(np.zeros(0, np.int64)) == {}


@pytest.mark.slow
@pytest.mark.parametrize("shape", [{"m": 2, "n": 2, "l": 1}, {"algo": "chain", "m": 4}])
def test_a_shared_prefix_step_equals_the_duplicated_step(shape: dict[str, Any]) -> None:
    """Same rollout, same loss: after an SGD step (the change is the gradient) the weights agree
    within 2e-4 of the whole change (fp32 sums in another order; AVX2: 6e-5) and 1e-4 of each
    tensor's, and the logged loss terms (means over the mini-batch) agree. (AdamW's first step
    divides each gradient entry by its own size, so fp32 noise in near-zero entries shows up
    at a few 1e-5 of an embedding's change: the gradients are what is compared.)"""
    _compare_shared_step(shape, None)


@pytest.mark.slow
@pytest.mark.parametrize("lora_rank", [4, 0])
def test_a_shared_prefix_step_equals_the_duplicated_step_with_lora_and_checkpointing(
    lora_rank: int,
) -> None:
    """As above with activation checkpointing, for LoRA adapters (the reference is the policy
    with its adapters off) and for full fine-tuning."""
    model = ModelConfig(lora_rank=lora_rank, lora_alpha=8, grad_checkpointing=True)
    _compare_shared_step({"m": 2, "n": 2, "l": 1}, model)


def _compare_shared_step(shape: dict[str, Any], model: ModelConfig | None) -> None:
    runs = []
    for shared in (False, True):
        agent, policy, ref, _, eng, batch = _setup(lr=1e-3)
        if model is not None:
            policy = prepare_policy(policy, model, seed=3)
            if model.lora_rank:
                ref = None
                with torch.no_grad():  # B starts at 0: move it, so A has a gradient too
                    for name, p in policy.named_parameters():
                        if "lora_B" in name:
                            p.normal_(0.0, 0.05, generator=torch.Generator().manual_seed(4))
        opt = torch.optim.SGD([p for p in policy.parameters() if p.requires_grad], lr=1.0)
        start = {k: v.clone() for k, v in policy.state_dict().items()}
        algo = AlgorithmConfig(**shape, shared_prefix=shared)
        optim = OptimConfig(mini_batch_prompts=4, micro_batch_tokens=600)  # one step, micro-batched
        metrics = _rl_step(policy, ref, opt, eng, agent, batch, algo, optim)
        runs.append((metrics, start, policy.state_dict()))
    (m_dup, start, dup), (m_pk, _, pk) = runs
    assert m_dup["agent/leaves"] == m_pk["agent/leaves"] and m_dup["reward/em"] == m_pk["reward/em"]
    # the same path tokens trained; computed once per shared token only when packed (a chain
    # shares its prompt with the other chains of its prompt)
    assert m_pk["tokens/update/policy"] == m_dup["tokens/update/policy"]
    assert m_dup["tokens/update/computed"] == m_dup["tokens/update/policy"]
    assert m_pk["tokens/update/computed"] < m_pk["tokens/update/policy"]
    changes = {k: float((dup[k] - start[k]).norm()) for k in dup}
    diffs = {k: float((pk[k] - dup[k]).norm()) for k in dup}
    whole = sum(c * c for c in changes.values()) ** 0.5
    assert whole > 0 and sum(d * d for d in diffs.values()) ** 0.5 <= 2e-4 * whole
    if model is not None and model.lora_rank:  # only the adapters moved, A and B both
        moved = [k for k, c in changes.items() if c > 0]
        assert moved and all("lora_" in k for k in moved)
        assert any("lora_A" in k for k in moved) and any("lora_B" in k for k in moved)
    # tensor by tensor within 1e-4 (fp32 sums in another order: up to ~3e-5 on the norms'
    # weights here), but the key biases: their gradient is 0 in exact arithmetic (a bias on
    # every key shifts a row's attention logits alike, which softmax ignores), so both runs
    # hold rounding noise there
    for k, change in changes.items():
        if change > 0 and not k.endswith("k_proj.bias"):
            assert diffs[k] <= 1e-4 * change, k
    for key in ("loss/pg_loss", "loss/kl", "loss/entropy"):
        assert m_pk[key] == pytest.approx(m_dup[key], rel=1e-4, abs=1e-7), key
    assert m_pk["train/pad_fraction"] < m_dup["train/pad_fraction"] or shape.get("algo")


class _ShiftedSampler(LocalRollout):
    """The engine's rollout with its recorded log-probs shifted by ``shift`` per token: a
    sampler whose numerics differ from the trainer's by ρ = exp(−shift) on every token."""

    shift = 0.0

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        ro = super().sample(*args, **kwargs)
        for s in ro.steps:
            s.action_logprobs = [lp + self.shift for lp in s.action_logprobs]
        return ro


def _corrected_step(
    algo: AlgorithmConfig, shift: float
) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    agent, policy, ref, opt, eng, batch = _setup(lr=1e-2)
    rollouts = _ShiftedSampler(eng, agent.protocol, WordTool())
    rollouts.shift = shift
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    side = Rollouts(rollouts, agent.protocol, SAMPLING, LIMITS)
    settings = StepSettings(algo, OptimConfig(lr=1e-2))
    m = rl_step(Learning(policy, ref, opt), side, batch, settings, seed=0)
    return m, {n: p.detach() - before[n] for n, p in policy.named_parameters()}


@pytest.mark.slow
@pytest.mark.parametrize("shared", [True, False])
def test_the_sampler_gap_is_measured_and_corrected(shared: bool) -> None:
    """The HF engine's log-probs are the trainer's (gap at fp32 rounding), so a correction
    changes nothing; a sampler off by one nat per token shows in the gap metrics, and the
    masked correction with cap 2 then drops every token's policy-gradient term (ρ = e > 2)."""
    base = AlgorithmConfig(m=2, n=2, l=1, kl_coef=0.0, entropy_coef=0.0, shared_prefix=shared)
    plain, moved = _corrected_step(base, 0.0)
    assert plain["offpolicy/abs_logp_gap"] < 1e-5 and plain["offpolicy/over_cap"] == 0.0
    _, moved_tis = _corrected_step(replace(base, sampler_correction="tis"), 0.0)
    # ρ = 1 up to rounding: the same update (AdamW's first step divides each entry by its own
    # size, so fp32 noise in near-zero entries shows: the whole change is compared; that noise
    # depends on the thread count, 0.2% of the change on one thread, 0.1% on two)
    diff = sum(float((moved_tis[n] - moved[n]).norm() ** 2) for n in moved) ** 0.5
    assert diff < 1e-2 * sum(float(d.norm() ** 2) for d in moved.values()) ** 0.5
    off, _ = _corrected_step(base, -1.0)  # the sampler gave every token e⁻¹ of its probability
    assert off["offpolicy/abs_logp_gap"] == pytest.approx(1.0, abs=1e-4)
    assert off["offpolicy/max_logp_gap"] == pytest.approx(1.0, abs=1e-4)
    assert off["offpolicy/over_cap"] == 1.0 and off["offpolicy/k3"] == pytest.approx(
        math.e - 2, abs=1e-3
    )
    masked = replace(base, sampler_correction="mis", sampler_correction_cap=2.0)
    for level in ("token", "sequence"):
        m, delta = _corrected_step(replace(masked, sampler_correction_level=level), -1.0)
        assert m["train/grad_norm"] == 0.0 and all(not d.any() for d in delta.values())


def _demos(agent: Any) -> list[SFTExample]:
    """Demonstrations for the demonstration term: each prompt, its last five tokens trained."""
    return [
        SFTExample(ids, [0] * (len(ids) - 5) + [1] * 5)
        for ids in (agent.prompt(p) for p in PEOPLE[:6])
    ]


@pytest.mark.slow
def test_the_demonstration_term_adds_gamma_times_the_demonstrations_nll_gradient(
    monkeypatch,
) -> None:  # type: ignore[no-untyped-def]
    # zero advantages and no KL or entropy: the step's only gradient is γ · ∇ NLL(demos)
    agent, policy, _, _, eng, batch = _setup(lr=1.0)
    monkeypatch.setattr(
        step_module, "tree_advantage", lambda rewards, *a, **k: np.zeros(len(rewards))
    )
    demos, gamma = _demos(agent), 0.5
    algo = AlgorithmConfig(kl_coef=0.0, entropy_coef=0.0, demo_coef=gamma, demo_batch=4)
    optim = OptimConfig(lr=1.0, mini_batch_prompts=4, grad_clip=1e9)  # one optimizer step
    start = copy.deepcopy(policy)
    expected = copy.deepcopy(policy)
    (drawn,) = step_module._demo_batches(demos, 1, algo, eng.pad_id, seed=0)
    nll = weighted_nll(expected, *drawn, 0.0)
    (gamma * nll).backward()
    sgd = torch.optim.SGD(policy.parameters(), lr=1e-2)
    rollouts = Rollouts(LocalRollout(eng, agent.protocol, WordTool()), agent.protocol, SAMPLING,
                        LIMITS)  # fmt: skip
    learning = Learning(policy, None, sgd, demos=demos)
    metrics = rl_step(learning, rollouts, batch, StepSettings(algo, optim), seed=0)
    assert metrics["train/updates"] == 1
    assert metrics["loss/demo_nll"] == pytest.approx(nll.item(), rel=1e-5)
    moved = 0
    for (n, p), p0, q in zip(
        policy.named_parameters(), start.parameters(), expected.parameters(), strict=True
    ):
        step = p0.detach() - 1e-2 * (q.grad if q.grad is not None else torch.zeros_like(p0))
        assert torch.allclose(p.detach(), step, atol=1e-6), n
        moved += not torch.equal(p, p0)
    assert moved > 0


def test_the_demonstration_term_without_demonstrations_is_refused() -> None:
    algo = AlgorithmConfig(demo_coef=0.1)
    with pytest.raises(ValueError, match="demo_coef > 0 needs demonstrations"):
        step_module._demo_batches([], 2, algo, pad_id=0, seed=0)
    assert step_module._demo_batches([], 2, AlgorithmConfig(), pad_id=0, seed=0) == []
