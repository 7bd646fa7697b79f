"""The sampler–trainer gap and its importance weights (``train.offpolicy``), hand-computed."""

from __future__ import annotations

import math

import pytest
import torch

from treegrpo.train.losses import ppo_clip_loss
from treegrpo.train.offpolicy import gap_sums, is_weights


def test_gap_sums_weigh_targets_and_ignore_padding() -> None:
    old = torch.tensor([[0.0, -1.0, 5.0], [-2.0, 0.0, 0.0]])
    sampled = torch.tensor([[0.0, -1.5, -9.0], [-1.0, 0.0, 0.0]])
    weight = torch.tensor([[1.0, 1.0, 0.0], [2.0, 0.0, 0.0]])  # the 5 vs −9 is padding
    sums, top = gap_sums(old, sampled, weight, cap=2.0)
    # Δ = 0, 0.5, −1 (twice): |Δ| sums to 0 + 0.5 + 2, k3 = e^Δ − Δ − 1
    assert sums["tokens"] == 4.0
    assert sums["abs_sum"] == pytest.approx(2.5)
    k3 = (math.exp(0.5) - 1.5) + 2 * (math.exp(-1.0) + 1.0 - 1.0)
    assert sums["k3_sum"] == pytest.approx(k3)
    assert sums["over_cap"] == 2.0  # |Δ| = 1 > ln 2, counted twice; 0.5 < ln 2
    assert top == pytest.approx(1.0)


def test_no_gap_when_the_sampler_is_the_trainer() -> None:
    lp = torch.log(torch.rand(3, 5))
    sums, top = gap_sums(lp, lp, torch.ones(3, 5), cap=2.0)
    assert sums["abs_sum"] == sums["k3_sum"] == sums["over_cap"] == 0.0 and top == 0.0
    assert is_weights(lp, lp, torch.ones(3, 5), "none", "token", 2.0) is None
    assert torch.equal(is_weights(lp, lp, torch.ones(3, 5), "tis", "token", 2.0), torch.ones(3, 5))


def test_truncated_and_masked_token_weights() -> None:
    old = torch.log(torch.tensor([[0.5, 0.9, 0.1]]))
    sampled = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))  # ρ = 1, 3, 0.5
    mask = torch.ones(1, 3)
    tis = is_weights(old, sampled, mask, "tis", "token", 2.0)
    mis = is_weights(old, sampled, mask, "mis", "token", 2.0)
    assert tis is not None and mis is not None
    assert tis.tolist()[0] == pytest.approx([1.0, 2.0, 0.5])  # min(ρ, C)
    assert mis.tolist()[0] == pytest.approx([1.0, 0.0, 0.5])  # ρ·1[ρ ≤ C]


def test_sequence_weights_are_the_product_over_the_leafs_action_tokens() -> None:
    old = torch.log(torch.tensor([[0.9, 0.5, 0.5], [0.4, 0.4, 0.4]]))
    sampled = torch.log(torch.tensor([[0.6, 0.5, 0.9], [0.4, 0.8, 0.4]]))
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])  # row 0's last target: padding
    w = is_weights(old, sampled, mask, "tis", "sequence", 10.0)
    assert w is not None
    assert w[0].tolist() == pytest.approx([1.5] * 3)  # 0.9/0.6 · 0.5/0.5
    assert w[1].tolist() == pytest.approx([0.5] * 3)  # 0.4/0.8
    mis = is_weights(old, sampled, mask, "mis", "sequence", 1.2)
    assert mis is not None and mis[0].tolist() == [0.0] * 3  # 1.5 > C: the leaf drops out
    with pytest.raises(ValueError, match="sequence"):
        is_weights(old[0], sampled[0], mask[0], "tis", "sequence", 2.0)


def test_packed_counts_mark_targets_not_scale_them() -> None:
    """A packed target's count (leaves through it) says where the targets are, not a factor."""
    old, sampled = torch.log(torch.tensor([0.8, 0.2])), torch.log(torch.tensor([0.4, 0.2]))
    w = is_weights(old, sampled, torch.tensor([3.0, 1.0]), "tis", "token", 5.0)
    assert w is not None and w.tolist() == pytest.approx([2.0, 1.0])


def test_the_weight_scales_each_tokens_policy_gradient_term() -> None:
    logp = torch.zeros(1, 2, requires_grad=True)
    adv, mask = torch.tensor([[1.0, 1.0]]), torch.ones(1, 2)
    w = torch.tensor([[2.0, 0.0]])
    loss, _ = ppo_clip_loss(logp, logp.detach(), adv, mask, is_weight=w)
    loss.backward()
    assert logp.grad is not None
    assert logp.grad.tolist()[0] == pytest.approx([-1.0, 0.0])  # −A·w / 2 tokens
