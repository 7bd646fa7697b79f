"""Supervised fine-tuning (the warm start's SFT): batching, the loss, and why no mask is needed."""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace

import pytest
import torch

from treegrpo.models.tiny import tiny_qwen2
from treegrpo.train.sft import (
    IGNORE,
    SFTExample,
    collate,
    length_batches,
    lr_at,
    train_sft,
    weighted_nll,
)


def _nll_per_position(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Reference: next-token NLL of every position from a plain LM head's logits. (B, T-1)"""
    pred = logits[:, :-1].reshape(-1, logits.shape[-1])
    return torch.nn.functional.cross_entropy(pred, ids[:, 1:].reshape(-1), reduction="none").view(
        ids.shape[0], -1
    )


def _reference(model, ids, action, labels, context):  # type: ignore[no-untyped-def]
    """mean NLL over action targets + context × mean NLL over the other real targets"""
    nll = _nll_per_position(model(input_ids=ids).logits, ids)
    real = labels[:, 1:] != IGNORE
    act = action[:, 1:].bool() & real
    loss = nll[act].mean()
    if context:
        loss = loss + context * nll[real & ~act].mean()
    return loss


def _examples() -> list[SFTExample]:
    return [
        SFTExample([5, 6, 7, 8, 9], [0, 0, 1, 1, 1]),
        SFTExample([5, 6, 3], [0, 1, 1]),
        SFTExample([4, 4, 4, 4, 2, 2, 2], [0, 0, 0, 1, 1, 0, 1]),
    ]


def test_collate_pads_on_the_right_and_marks_action_tokens() -> None:
    ids, action, labels = collate(_examples(), pad_id=0)
    assert ids.shape == action.shape == labels.shape == (3, 7)
    assert ids[1].tolist() == [5, 6, 3, 0, 0, 0, 0]
    assert action[1].tolist() == [0, 1, 1, 0, 0, 0, 0]
    assert labels[1].tolist() == [5, 6, 3, IGNORE, IGNORE, IGNORE, IGNORE]
    assert action[2].tolist() == [0, 0, 0, 1, 1, 0, 1]


def test_right_padded_rows_need_no_attention_mask() -> None:
    """What ``train_sft`` relies on: with right padding the causal kernel alone gives the
    masked loss and gradients (a real token never attends to the padding after it)."""
    model = tiny_qwen2(16, hidden=32, layers=2, heads=2, kv_heads=2, seed=0)
    ids, action, _ = collate(_examples(), pad_id=0)
    attn = (torch.arange(7)[None] < torch.tensor([[5], [3], [7]])).long()
    act = action[:, 1:].bool()

    def loss_and_grads(mask: torch.Tensor | None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        loss = _nll_per_position(model(input_ids=ids, attention_mask=mask).logits, ids)[act].mean()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    masked, g_masked = loss_and_grads(attn)
    plain, g_plain = loss_and_grads(None)
    torch.testing.assert_close(plain, masked, rtol=1e-5, atol=1e-5)
    for a, b in zip(g_plain, g_masked, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    # and the mask does matter for left padding, so this is not a vacuous comparison
    left = torch.stack([torch.roll(r, int((a == 0).sum())) for r, a in zip(ids, attn, strict=True)])
    left_mask = torch.stack([torch.roll(a, int((a == 0).sum())) for a in attn])
    with torch.no_grad():
        with_mask = model(input_ids=left, attention_mask=left_mask).logits[1, -1]
        without = model(input_ids=left).logits[1, -1]
    assert not torch.allclose(with_mask, without, atol=1e-4)


@pytest.mark.parametrize("context", [0.0, 0.5])
def test_weighted_nll_equals_the_full_head_loss_and_gradients(context: float) -> None:
    """The head runs on the positions that count only; the loss and every gradient are those
    of the logits of every position: the action mean plus ``context`` × the context mean."""
    model = tiny_qwen2(16, hidden=32, layers=2, heads=2, kv_heads=2, seed=0)
    ids, action, labels = collate(_examples(), pad_id=0)

    def loss_and_grads(fn: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        loss = fn()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    full, g_full = loss_and_grads(lambda: _reference(model, ids, action, labels, context))
    part, g_part = loss_and_grads(lambda: weighted_nll(model, ids, action, labels, context))
    torch.testing.assert_close(part, full, rtol=1e-5, atol=1e-5)
    for a, b in zip(g_part, g_full, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    if context:  # the context term really counts
        alone = weighted_nll(model, ids, action, labels, 0.0)
        assert not torch.allclose(alone, part)


def test_weighted_nll_of_uniform_logits_is_log_vocab() -> None:
    model = tiny_qwen2(16, hidden=32, layers=2, heads=2, kv_heads=2, seed=0)
    torch.nn.init.zeros_(model.get_output_embeddings().weight)  # tied: all logits 0
    ids = torch.tensor([[3, 4, 5]])
    action = torch.tensor([[0, 1, 0]])
    log_v = torch.log(torch.tensor(16.0)).item()
    assert weighted_nll(model, ids, action, ids, 0.0).item() == pytest.approx(log_v)
    assert weighted_nll(model, ids, action, ids, 0.5).item() == pytest.approx(1.5 * log_v)


def test_length_batches_cover_every_example_once_within_the_token_budget() -> None:
    lengths = [3, 9, 4, 12, 5, 5, 1, 8]
    batches = length_batches(lengths, max_batch_tokens=16, rng=random.Random(0))
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) == 1 or max(lengths[i] for i in b) * len(b) <= 16


def test_lr_warms_up_then_decays_to_the_floor() -> None:
    assert lr_at(0, 100, 10) == pytest.approx(0.1)
    assert lr_at(9, 100, 10) == pytest.approx(1.0)
    assert lr_at(10, 100, 10) == pytest.approx(1.0)
    assert lr_at(100, 100, 10) == pytest.approx(0.1)
    assert 0.1 < lr_at(55, 100, 10) < 1.0


@pytest.mark.slow
def test_train_sft_lowers_the_loss() -> None:
    model = tiny_qwen2(16, hidden=32, layers=2, heads=2, kv_heads=2, seed=0)
    cfg = SimpleNamespace(steps=40, lr=1e-2, max_batch_tokens=64, seed=0, warmup=20)
    losses = train_sft(model, _examples(), cfg, pad_id=0, progress=False)
    assert len(losses) == 40
    assert sum(losses[-5:]) / 5 < 0.5 * losses[0]


def test_collate_gives_no_loss_tokens_no_label() -> None:
    _, action, labels = collate([SFTExample([5, 6, 7, 8], [-1, 0, 1, -1])], pad_id=0)
    assert action.tolist() == [[0, 0, 1, 0]]
    assert labels.tolist() == [[IGNORE, 6, 7, IGNORE]]
