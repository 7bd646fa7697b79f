"""Per-token log-probs of padded rows equal those of each row alone, and the right-padding
shortcut (no attention mask) only applies to right padding."""

from __future__ import annotations

import pytest
import torch

from treegrpo.models.tiny import tiny_qwen2
from treegrpo.train import logprobs as lp_module
from treegrpo.train.logprobs import token_logprobs


@pytest.mark.parametrize("side", ["right", "left"])
def test_padded_rows_equal_each_row_alone(side: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    model = tiny_qwen2(97, hidden=32, layers=2, seed=2).eval()
    rows = [torch.randint(2, 97, (n,)) for n in (9, 5, 7)]
    width = max(len(r) for r in rows)
    ids = torch.zeros(3, width, dtype=torch.long)
    mask = torch.zeros(3, width, dtype=torch.long)
    pos = torch.zeros(3, width, dtype=torch.long)
    for i, r in enumerate(rows):
        cols = slice(0, len(r)) if side == "right" else slice(width - len(r), width)
        ids[i, cols], mask[i, cols] = r, 1
        pos[i, cols] = torch.arange(len(r))
    seen: list[torch.Tensor | None] = []
    real_forward = model.forward

    def forward(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(kwargs.get("attention_mask"))
        if side == "left":  # left padding also needs positions that skip the pads
            kwargs["position_ids"] = pos
        return real_forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", forward)
    with torch.no_grad():
        got = token_logprobs(model, ids, mask)[0]  # (3, width - 1)
    assert (seen[0] is None) == (side == "right")  # the mask is dropped for right padding only
    monkeypatch.setattr(model, "forward", real_forward)
    for i, r in enumerate(rows):
        with torch.no_grad():
            alone = token_logprobs(model, r[None], torch.ones(1, len(r), dtype=torch.long))[0][0]
        start = 0 if side == "right" else width - len(r)
        torch.testing.assert_close(got[i, start : start + len(r) - 1], alone, rtol=1e-5, atol=1e-5)


def test_right_padded_detection() -> None:
    assert lp_module._right_padded(torch.tensor([[1, 1, 0], [1, 1, 1]]))
    assert not lp_module._right_padded(torch.tensor([[0, 1, 1], [1, 1, 1]]))
    assert not lp_module._right_padded(torch.tensor([[1, 0, 1]]))
    assert not lp_module._right_padded(None)


def test_keep_computes_the_kept_targets_only_with_the_same_values_and_gradients() -> None:
    model = tiny_qwen2(97, hidden=32, layers=2, seed=2)
    ids = torch.randint(2, 97, (2, 8), generator=torch.Generator().manual_seed(0))
    keep = torch.zeros(2, 7)
    keep[0, 3:6] = 1
    keep[1, 1] = keep[1, 6] = 1
    kept = keep.bool()

    def run(k: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        logp, ent = token_logprobs(model, ids, None, with_entropy=True, keep=k)
        assert ent is not None
        (logp[kept].sum() + 0.1 * ent[kept].sum()).backward()
        return logp.detach(), ent.detach(), [p.grad.clone() for p in model.parameters()]

    full_lp, full_ent, full_g = run(None)
    lp, ent, g = run(keep)
    torch.testing.assert_close(lp[kept], full_lp[kept], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ent[kept], full_ent[kept], rtol=1e-5, atol=1e-5)
    assert not lp[~kept].any() and not ent[~kept].any()
    assert full_lp[~kept].abs().min() > 0  # the full pass does fill them: not a vacuous zero
    for a, b in zip(g, full_g, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
