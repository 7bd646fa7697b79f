"""Supervised fine-tuning (the warm start's SFT): batching, the loss, and why no mask is needed."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
import torch

from treegrpo.models.sft import (
    IGNORE,
    SFTExample,
    action_nll,
    collate,
    length_batches,
    lr_at,
    train_sft,
)
from treegrpo.models.tiny import tiny_qwen2


def _full_nll(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Reference: the NLL from the logits of every position, as a plain LM head gives them."""
    pred, target = logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1)
    loss = torch.nn.functional.cross_entropy(pred, target, ignore_index=IGNORE, reduction="sum")
    return loss, int((target != IGNORE).sum())


def _examples() -> list[SFTExample]:
    return [
        SFTExample([5, 6, 7, 8, 9], [0, 0, 1, 1, 1]),
        SFTExample([5, 6, 3], [0, 1, 1]),
        SFTExample([4, 4, 4, 4, 2, 2, 2], [0, 0, 0, 1, 1, 0, 1]),
    ]


def test_collate_pads_on_the_right_and_labels_only_action_tokens() -> None:
    ids, attn, labels = collate(_examples(), pad_id=0)
    assert ids.shape == attn.shape == labels.shape == (3, 7)
    assert ids[1].tolist() == [5, 6, 3, 0, 0, 0, 0]
    assert attn[1].tolist() == [1, 1, 1, 0, 0, 0, 0]
    assert labels[1].tolist() == [IGNORE, 6, 3, IGNORE, IGNORE, IGNORE, IGNORE]
    assert labels[2].tolist() == [IGNORE, IGNORE, IGNORE, 4, 2, IGNORE, 2]


def test_right_padded_rows_need_no_attention_mask() -> None:
    """What ``train_sft`` relies on: with right padding the causal kernel alone gives the
    masked loss and gradients (a real token never attends to the padding after it)."""
    model = tiny_qwen2(16, hidden=32, layers=2, heads=2, kv_heads=2, seed=0)
    ids, attn, labels = collate(_examples(), pad_id=0)

    def loss_and_grads(mask: torch.Tensor | None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        total, count = _full_nll(model(input_ids=ids, attention_mask=mask).logits, labels)
        (total / count).backward()
        return total.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

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


def test_action_nll_equals_the_full_head_loss_and_gradients() -> None:
    """The head runs on labelled positions only; loss, count and every gradient are those of
    the logits of every position."""
    model = tiny_qwen2(16, hidden=32, layers=2, heads=2, kv_heads=2, seed=0)
    ids, _, labels = collate(_examples(), pad_id=0)

    def loss_and_grads(
        fn: Callable[[], tuple[torch.Tensor, int]],
    ) -> tuple[torch.Tensor, int, list[torch.Tensor]]:
        model.zero_grad()
        total, count = fn()
        (total / count).backward()
        return total.detach(), count, [p.grad.clone() for p in model.parameters()]

    full, n_full, g_full = loss_and_grads(lambda: _full_nll(model(input_ids=ids).logits, labels))
    part, n_part, g_part = loss_and_grads(lambda: action_nll(model, ids, labels))
    assert n_part == n_full == 8  # the labelled tokens after position 0: 3 + 2 + 3
    torch.testing.assert_close(part, full, rtol=1e-5, atol=1e-5)
    for a, b in zip(g_part, g_full, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_action_nll_of_uniform_logits_is_log_vocab_per_label() -> None:
    model = tiny_qwen2(16, hidden=32, layers=2, heads=2, kv_heads=2, seed=0)
    torch.nn.init.zeros_(model.get_output_embeddings().weight)  # tied: all logits 0
    ids = torch.tensor([[3, 4, 5]])
    labels = torch.tensor([[IGNORE, 4, IGNORE]])
    total, count = action_nll(model, ids, labels)
    assert count == 1
    assert total.item() == pytest.approx(torch.log(torch.tensor(16.0)).item())


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


def test_train_sft_lowers_the_loss() -> None:
    model = tiny_qwen2(16, hidden=32, layers=2, heads=2, kv_heads=2, seed=0)
    losses = train_sft(
        model, _examples(), steps=40, lr=1e-2, max_batch_tokens=64, pad_id=0, progress=False
    )
    assert len(losses) == 40
    assert sum(losses[-5:]) / 5 < 0.5 * losses[0]
