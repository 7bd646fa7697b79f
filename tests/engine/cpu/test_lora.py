"""Folded LoRA weights (engine.cpu.lora) against peft's own forward, and in the engine."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from treegrpo.engine.cpu.speedups import CpuSpeedups
from treegrpo.engine.hf import HFEngine, StepRequest
from treegrpo.engine.sampling import SamplingParams
from treegrpo.models.tiny import tiny_qwen2

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _lora_model(vocab: int = 97) -> Any:
    """A tiny Qwen2 with LoRA on every projection, B moved off zero so the adapters matter."""
    from peft import LoraConfig, get_peft_model

    peft = get_peft_model(
        tiny_qwen2(vocab, hidden=64, layers=2, seed=1),
        LoraConfig(r=2, lora_alpha=6, target_modules=TARGETS),
    )
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.2)
    return peft.eval()


def _logits(model: Any, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out: torch.Tensor = model(input_ids=ids).logits
    return out


def test_folded_forward_equals_peft_and_follows_the_adapters() -> None:
    peft = _lora_model()
    ids = torch.randint(0, 97, (3, 11), generator=torch.Generator().manual_seed(0))
    want = _logits(peft, ids)
    cs = CpuSpeedups(peft.get_base_model(), packed=False, trainable=False, fold_lora=True)
    folded = cs.lora
    assert folded is not None and len(folded.layers) == 2 * len(TARGETS)
    got = _logits(peft, ids)
    assert len(folded._weights) == len(folded.layers)  # every layer ran on its folded weight
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    with torch.no_grad():  # an optimizer step moves A and B in place
        for name, p in peft.named_parameters():
            if "lora_" in name:
                p.add_(0.1 * torch.randn_like(p))
    got_after = _logits(peft, ids)
    with peft.disable_adapter():  # the reference log-probs' base model, still routed
        base = _logits(peft, ids)
    cs.detach()
    want_after = _logits(peft, ids)
    assert not torch.allclose(want_after, want, atol=1e-3)
    torch.testing.assert_close(got_after, want_after, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(base, want_after, atol=1e-3)
    with peft.disable_adapter():
        torch.testing.assert_close(base, _logits(peft, ids), rtol=1e-5, atol=1e-5)


def test_with_autograd_on_the_adapters_still_get_gradients() -> None:
    peft = _lora_model()
    ids = torch.randint(0, 97, (2, 7), generator=torch.Generator().manual_seed(1))
    CpuSpeedups(peft.get_base_model(), packed=False, trainable=False, fold_lora=True)
    peft(input_ids=ids).logits.sum().backward()
    grads = [p.grad for n, p in peft.named_parameters() if "lora_A" in n]
    assert grads and all(g is not None and g.abs().sum() > 0 for g in grads)


def test_engine_with_and_without_folding_gives_the_same_steps() -> None:
    """Greedy steps and their log-probs, folded (prefill and decode) or peft's modules
    throughout (fold off, model forward at decode), and the log-probs against peft's
    forward of the whole sequence."""

    class Tok:
        pad_token_id = 0
        eos_token_id = None

    peft = _lora_model()
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(1, 97, (n,), generator=g).tolist() for n in (9, 14, 14, 30)]
    greedy = SamplingParams(greedy=True, max_new_tokens=6)
    runs = []
    for fold in (True, False):
        eng = HFEngine(peft, Tok(), eos_ids=[], fold_lora=fold, lean_decode=fold)
        assert eng._cpu is not None
        lora = eng._cpu.lora
        assert (lora is not None) is fold
        runs.append(eng.step([StepRequest(eng.root(), p) for p in prompts], greedy))
        if lora is not None:  # prefill really ran on folded weights
            assert len(lora._weights) == len(lora.layers)
    for a, b, p in zip(*runs, prompts, strict=True):
        assert a.tokens == b.tokens
        torch.testing.assert_close(a.logprobs, b.logprobs, rtol=1e-5, atol=1e-5)
        logp = torch.log_softmax(_logits(peft, torch.tensor([p + a.tokens]))[0], -1)
        want = [logp[len(p) + j - 1, t].item() for j, t in enumerate(a.tokens)]
        torch.testing.assert_close(a.logprobs, want, rtol=1e-4, atol=1e-4)


def test_folded_weights_packed_for_onednn_give_the_same_logits() -> None:
    """Where the engine packs its linear layers everywhere (AMD CPUs with AVX-512), the folded
    weights are packed too."""
    from treegrpo.engine.cpu import onednn

    peft = _lora_model()
    if not onednn.supported(peft):
        pytest.skip("no oneDNN linear ops in this torch build")
    ids = torch.randint(0, 97, (2, 9), generator=torch.Generator().manual_seed(3))
    want = _logits(peft, ids)
    folded = CpuSpeedups(peft.get_base_model(), packed=True, trainable=False, fold_lora=True).lora
    assert folded is not None
    got = _logits(peft, ids)
    assert len(folded._weights) == len(folded.layers)
    assert all(w.packed for w in folded._weights.values())
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
