"""The hand-built copying circuits work before any training: a fresh model with them repeats a
random token sequence it has never seen, a plain fresh model does not; the name-start head looks
at the latest name start; wrong shapes are refused with a clear message."""

from __future__ import annotations

import pytest
import torch

from treegrpo.embedded.induction import induction_init
from treegrpo.models.tiny import tiny_qwen2

V = 400


def _model(induction: bool, name_starts: list[int] | None = None) -> torch.nn.Module:
    model = tiny_qwen2(V, hidden=128, layers=2, heads=2, kv_heads=2, head_dim=64, rope_theta=1e6)
    if induction:
        induction_init(model, name_starts=name_starts or [])
    return model


def _repeat_accuracy(model: torch.nn.Module) -> float:
    """Greedy next-token accuracy on the second copy of random 60-token sequences (its first
    token excepted: nothing predicts it)."""
    gen = torch.Generator().manual_seed(0)
    seq = torch.randint(2, V, (8, 60), generator=gen)
    ids = torch.cat([seq, seq], dim=1)  # (8, 120)
    with torch.no_grad():
        pred = model(input_ids=ids).logits.argmax(-1)  # (8, 120)
    return float((pred[:, 60:-1] == ids[:, 61:]).float().mean())


def test_a_fresh_model_with_the_circuit_copies_and_a_plain_one_does_not() -> None:
    assert _repeat_accuracy(_model(True)) > 0.8
    assert _repeat_accuracy(_model(False)) < 0.05


def test_name_start_head_attends_to_the_latest_name_start() -> None:
    starts = [300, 301, 302]
    model = _model(True, starts)
    model.config._attn_implementation = "eager"  # attention weights are returned
    ids = [5, 6, 300, 7, 8, 9, 301, 10, 11, 302, 12, 13, 14, 15, 16, 17]
    for end in range(4, len(ids) + 1):
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids[:end]]), output_attentions=True)
        head = out.attentions[1][0, 1, -1]  # layer 1, head 1, last position: (T,)
        latest = max(i for i in range(end) if ids[i] in starts)
        assert int(head.argmax()) == latest and float(head[latest]) > 0.5, end


def test_refuses_models_it_cannot_wire() -> None:
    with pytest.raises(ValueError, match="head_dim == hidden / 2"):
        induction_init(tiny_qwen2(V, hidden=64, layers=2, heads=4, kv_heads=2))
