"""The LM head on chosen positions: the same logits as the full forward, for plain heads,
LoRA-wrapped models, and (through the full forward) models that transform their logits."""

from __future__ import annotations

import torch

from treegrpo.models.tiny import tiny_qwen2
from treegrpo.train.head import head_matches_forward, logits_at, plain_head


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, 50, (3, 9), generator=g)  # (B, T)
    keep = torch.rand(3, 9, generator=g) < 0.4  # (B, T)
    keep[0, 0] = True
    return ids, keep


def test_logits_at_equals_the_full_forward_at_the_kept_positions() -> None:
    model = tiny_qwen2(50, hidden=32, layers=2, seed=1)
    ids, keep = _inputs()
    with torch.no_grad():
        full = model(input_ids=ids).logits  # (B, T, V)
        got = logits_at(model, ids, None, keep)
    assert got.shape == (int(keep.sum()), 50)
    torch.testing.assert_close(got, full[keep], rtol=1e-5, atol=1e-5)


def test_lora_models_take_the_head_path_too() -> None:
    from peft import LoraConfig, get_peft_model

    model = tiny_qwen2(50, hidden=32, layers=2, seed=1)
    lora = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    for n, p in lora.named_parameters():
        if "lora_B" in n:
            torch.nn.init.normal_(p)  # adapters that change the output
    ids, keep = _inputs()
    with torch.no_grad():
        full = lora(input_ids=ids).logits
        got = logits_at(lora, ids, None, keep)
        with lora.disable_adapter():
            base = logits_at(lora, ids, None, keep)
    torch.testing.assert_close(got, full[keep], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, base, atol=1e-3)  # the adapters were active in the head path


def test_models_that_transform_their_logits_take_the_full_forward(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    model = tiny_qwen2(50, hidden=32, layers=2, seed=1)
    assert plain_head(model)
    model.config.final_logit_softcapping = 30.0  # as Gemma 2 declares it
    assert not plain_head(model)
    calls: list[int] = []
    real = model.forward

    def forward(*a, **k):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(model, "forward", forward)
    ids, keep = _inputs()
    with torch.no_grad():
        got = logits_at(model, ids, None, keep)
    assert calls == [1]
    assert got.shape == (int(keep.sum()), 50)


def test_a_model_that_scales_its_logits_unannounced_takes_the_full_forward() -> None:
    """No config field says so, but the logits are not the head of the last hidden state: the
    one-time probe finds it, warns, and the full forward's logits come back."""
    import pytest

    model = tiny_qwen2(50, hidden=32, layers=2, seed=1)
    real = model.forward

    def halved(*a, **k):  # type: ignore[no-untyped-def]
        out = real(*a, **k)
        out.logits = out.logits * 0.5
        return out

    model.forward = halved  # type: ignore[method-assign]
    assert plain_head(model)
    ids, keep = _inputs()
    with pytest.warns(UserWarning, match="full forward"):
        assert not head_matches_forward(model)
    with torch.no_grad():
        got = logits_at(model, ids, None, keep)
        full = model(input_ids=ids).logits[keep]
    torch.testing.assert_close(got, full)


def test_the_probe_runs_without_dropout_and_restores_every_module_mode() -> None:
    model = tiny_qwen2(50, hidden=32, layers=2, seed=1)
    model.config.attention_dropout = 0.5
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = 0.5  # active in train mode only
    model.train()
    model.model.layers[0].eval()  # a submodule in another mode than the root stays so
    assert head_matches_forward(model)  # with dropout on, the two passes would differ
    assert model.training and not model.model.layers[0].training
    assert model.model.layers[1].training
