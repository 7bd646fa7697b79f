"""The prefix-shared update equals the duplicated one: loss and every gradient, on forests of the
tiny agent, for each aggregation; and a wrong mask or weight changes the result."""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import pytest
import torch

from agent_fixtures import PEOPLE, Agent, WordTool, trained_agent
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.records import Rollout
from treegrpo.rollout.sampler import AgentLimits, sample_forest
from treegrpo.train.batch import make_micro_batches
from treegrpo.train.logprobs import token_logprobs
from treegrpo.train.losses import aggregate, entropy_from_logits, kl_penalty, ppo_clip_loss
from treegrpo.train.shared import (
    PackedBatch,
    leaf_weights,
    pack_batches,
    row_span,
    supports_packing,
)
from treegrpo.train.update import weighted

SAMPLING = SamplingParams(max_new_tokens=40)
LIMITS = AgentLimits(max_turns=2, topk=3, max_context=1024)


@pytest.fixture(scope="module")
def setup() -> tuple[Agent, Rollout, list[int], np.ndarray]:
    agent = trained_agent()
    engine = HFEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer))
    prompts = [agent.prompt(p) for p in PEOPLE[:3]]
    ro = sample_forest(engine, agent.protocol, WordTool(), prompts, TreeShape(2, 3, 1), SAMPLING,
                       LIMITS, seed=5)  # fmt: skip
    leaves = ro.kept.tolist()
    adv = np.random.default_rng(0).normal(size=len(leaves))  # both signs, no zeros
    return agent, ro, leaves, adv


def _perturbed(agent: Agent) -> torch.nn.Module:
    """The policy moved away from the one that sampled, so ratios differ from 1 and clip."""
    model = copy.deepcopy(agent.model).float()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    return model


def _duplicated(model, ro, leaves, adv, aggregation: str, ref) -> torch.Tensor:  # type: ignore[no-untyped-def]
    seqs = [ro.leaf_sequence(v) for v in leaves]
    parts = weighted(make_micro_batches(seqs, list(adv), 300), aggregation)
    total = torch.zeros(())
    for part in parts:
        d = part.batch
        logp, _ = token_logprobs(model, d.input_ids, d.attention_mask)
        pg, _ = ppo_clip_loss(logp, d.sampled_logprobs, d.advantages, d.action_mask,
                              aggregation=aggregation)  # fmt: skip
        ref_lp, _ = token_logprobs(ref, d.input_ids, d.attention_mask)
        kl = aggregate(kl_penalty(logp, ref_lp.detach()), d.action_mask, aggregation)
        logits = model(input_ids=d.input_ids).logits[:, :-1]
        ent = aggregate(entropy_from_logits(logits), d.action_mask, aggregation)
        total = total + part.weight * (pg + 0.1 * kl - 0.01 * ent)
    return total


def _packed(model, ro, leaves, adv, aggregation: str, ref, edit=None, span=None) -> torch.Tensor:  # type: ignore[no-untyped-def]
    total = torch.zeros(())
    batches = pack_batches(ro, leaves, list(adv), aggregation, 300, span)
    assert len(batches) > 1  # micro-batching by tokens is exercised
    for b in batches:
        if edit is not None:
            b = edit(b)
        logp, ent = b.logprobs(model, with_entropy=True)
        pg, _ = b.policy_loss(logp, b.sampled_logprobs)
        ref_lp, _ = b.logprobs(ref)
        kl = (b.weight * kl_penalty(logp, ref_lp.detach())).sum()
        assert ent is not None
        total = total + pg + 0.1 * kl - 0.01 * (b.weight * ent).sum()
    return total


def _grads(model: torch.nn.Module, loss_fn: Callable[[], torch.Tensor]) -> tuple[float, dict]:
    model.zero_grad(set_to_none=True)
    loss = loss_fn()
    loss.backward()
    return float(loss.detach()), {
        n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None
    }


@pytest.mark.slow
@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"])
def test_packed_loss_and_gradients_equal_the_duplicated(setup, aggregation: str) -> None:  # type: ignore[no-untyped-def]
    agent, ro, leaves, adv = setup
    model, ref = _perturbed(agent), copy.deepcopy(agent.model).float()
    assert supports_packing(model) is None
    dup, g_dup = _grads(model, lambda: _duplicated(model, ro, leaves, adv, aggregation, ref))
    pk, g_pk = _grads(model, lambda: _packed(model, ro, leaves, adv, aggregation, ref))
    assert pk == pytest.approx(dup, rel=1e-5)
    assert g_dup.keys() == g_pk.keys()
    # within 5e-5 of each gradient's norm: fp32 sums in another order (AVX2 kernels reach 1.1e-5
    # on a bias); a wrong share of a shared prefix would be off by a whole leaf's gradient
    for name in g_dup:
        err = float((g_pk[name] - g_dup[name]).norm() / g_dup[name].norm().clamp(min=1e-30))
        assert err <= 5e-5, (name, err)
    # each shared token is computed once: fewer positions than the paths hold
    packed = sum(
        int(b.input_ids.numel()) for b in pack_batches(ro, leaves, list(adv), aggregation, 300)
    )
    assert packed < sum(len(ro.leaf_sequence(v).ids) for v in leaves)


@pytest.mark.slow
@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-mean"])
def test_rows_cut_within_a_prompt_still_equal_the_duplicated(setup, aggregation: str) -> None:  # type: ignore[no-untyped-def]
    agent, ro, leaves, adv = setup
    span = 40  # narrow: most prompts' paths are cut into several rows
    batches = pack_batches(ro, leaves, list(adv), aggregation, 300, span)
    n_rows = sum(int(b.input_ids.shape[0]) for b in batches)
    assert len(PEOPLE[:3]) < n_rows < len(leaves)  # some rows hold several leaves, not all
    model, ref = _perturbed(agent), copy.deepcopy(agent.model).float()
    dup, g_dup = _grads(model, lambda: _duplicated(model, ro, leaves, adv, aggregation, ref))
    pk, g_pk = _grads(model, lambda: _packed(model, ro, leaves, adv, aggregation, ref, span=span))
    assert pk == pytest.approx(dup, rel=1e-5)
    for name in g_dup:
        err = float((g_pk[name] - g_dup[name]).norm() / g_dup[name].norm().clamp(min=1e-30))
        assert err <= 5e-5, (name, err)  # as above


def test_rows_follow_the_cost_of_attention(setup) -> None:  # type: ignore[no-untyped-def]
    """Every leaf in exactly one row; a wide span keeps a
    prompt in one row, a narrow one cuts it, and the model's span follows its shape."""
    _, ro, leaves, adv = setup

    def rows(span: int | None) -> list[PackedBatch]:
        return pack_batches(ro, leaves, list(adv), "token-mean", 10**9, span)

    for span in (None, 10**9, 40, 1):
        held = sorted(i for b in rows(span) for i in b.index)
        assert held == list(range(len(leaves)))  # each leaf in one row

    def count(span: int | None) -> tuple[int, int]:  # rows, packed tokens
        batches = rows(span)
        return sum(int(b.input_ids.shape[0]) for b in batches), sum(
            b.n_real_tokens for b in batches
        )

    assert count(None)[0] == count(10**9)[0] == 3  # a row per prompt
    assert count(40)[0] > 3 and count(40)[1] > count(None)[1]  # cut, repeating shared tokens

    class Config:
        hidden_size, intermediate_size = 128, 512

    assert row_span(Config()) == 1024


@pytest.mark.slow
def test_a_sibling_in_view_or_a_lost_weight_changes_the_result(setup) -> None:  # type: ignore[no-untyped-def]
    agent, ro, leaves, adv = setup
    model, ref = _perturbed(agent), copy.deepcopy(agent.model).float()
    base = float(_packed(model, ro, leaves, adv, "token-mean", ref).detach())

    def leak(b: PackedBatch) -> PackedBatch:  # a token may see its siblings' earlier tokens
        b.ancestors = torch.ones_like(b.ancestors)
        return b

    def unweighted(b: PackedBatch) -> PackedBatch:  # a shared token counted once, not per leaf
        b.adv_pos, b.adv_neg = b.adv_pos / b.target_weight, b.adv_neg / b.target_weight
        return b

    assert float(
        _packed(model, ro, leaves, adv, "token-mean", ref, leak).detach()
    ) != pytest.approx(base)
    assert float(
        _packed(model, ro, leaves, adv, "token-mean", ref, unweighted).detach()
    ) != pytest.approx(base)


def test_leaf_weights_per_aggregation() -> None:
    w, share = leaf_weights([2, 3, 5], "token-mean")
    assert w.tolist() == [0.1] * 3 and share.tolist() == pytest.approx([0.2, 0.3, 0.5])
    w, share = leaf_weights([2, 0, 5], "seq-mean-token-mean")
    assert w.tolist() == pytest.approx([1 / 6, 0.0, 1 / 15]) and share.tolist() == [1 / 3] * 3
    w, _ = leaf_weights([2, 3], "seq-mean-token-sum")
    assert w.tolist() == [0.5, 0.5]
    with pytest.raises(ValueError, match="unknown aggregation"):
        leaf_weights([1], "sum")
