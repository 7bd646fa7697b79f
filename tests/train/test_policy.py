"""Gradient checkpointing changes memory, not gradients; on the CPU precision settings are
no-ops; frozen parameters stay out of training."""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch

from treegrpo.models.load import resolve_device
from treegrpo.models.tiny import tiny_qwen2
from treegrpo.train.config import ModelConfig
from treegrpo.train.logprobs import token_logprobs
from treegrpo.train.policy import prepare_policy
from treegrpo.train.precision import autocast, autocast_dtype


def _grads(model: torch.nn.Module, ids: torch.Tensor) -> tuple[float, dict[str, torch.Tensor]]:
    model.train()
    logp, ent = token_logprobs(model, ids, torch.ones_like(ids), with_entropy=True)
    assert ent is not None
    loss = -(logp.mean() + 0.01 * ent.mean())
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return loss.item(), grads


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_grad_checkpointing_gives_the_same_gradients(lora_rank: int) -> None:
    base = tiny_qwen2(300, hidden=32, layers=2, seed=0)
    ids = torch.randint(0, 300, (3, 24), generator=torch.Generator().manual_seed(0))
    plain = prepare_policy(copy.deepcopy(base), ModelConfig(lora_rank=lora_rank))
    ckpt = prepare_policy(
        copy.deepcopy(base), ModelConfig(lora_rank=lora_rank, grad_checkpointing=True)
    )
    if lora_rank:  # B starts at zero: give it values so A gets a gradient as well
        for model in (plain, ckpt):
            with torch.random.fork_rng(), torch.no_grad():
                torch.manual_seed(1)
                for name, p in model.named_parameters():
                    if "lora_B" in name:
                        p.normal_(0, 0.1)
    assert any(getattr(m, "gradient_checkpointing", False) for m in ckpt.modules())
    loss_a, grads_a = _grads(plain, ids)
    loss_b, grads_b = _grads(ckpt, ids)
    trainable = {n for n, p in plain.named_parameters() if p.requires_grad}
    assert grads_a.keys() == grads_b.keys() == trainable
    assert loss_a == pytest.approx(loss_b, rel=1e-6)
    for name in grads_a:
        assert grads_a[name].abs().sum() > 0, name
        assert torch.allclose(grads_a[name], grads_b[name], rtol=1e-4, atol=1e-7), name


def test_cpu_runs_float32_whatever_the_dtype() -> None:
    cpu = resolve_device("cpu")
    assert resolve_device("auto").type in ("cpu", "cuda")
    for name in ("auto", "float32", "bfloat16", "float16"):
        assert autocast_dtype(name, cpu) is torch.float32
    assert isinstance(autocast(cpu, torch.bfloat16), contextlib.nullcontext)
    model = tiny_qwen2(300, hidden=32, layers=1, seed=0)
    ids = torch.randint(0, 300, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        plain = token_logprobs(model, ids, torch.ones_like(ids))[0]
        asked = token_logprobs(model, ids, torch.ones_like(ids), autocast_dtype=torch.bfloat16)[0]
    assert asked.dtype is torch.float32 and torch.equal(plain, asked)


def test_model_config_validates() -> None:
    with pytest.raises(ValueError, match="lora_rank"):
        ModelConfig(lora_rank=-1)
    with pytest.raises(ValueError, match="lora_targets"):
        ModelConfig(lora_rank=8, lora_targets=())


def test_frozen_prefixes_stay_fixed_and_an_unknown_one_is_an_error() -> None:
    model = tiny_qwen2(300, hidden=32, layers=2, seed=0)
    frozen = ("model.embed_tokens", "model.layers.0.self_attn")
    policy = prepare_policy(model, ModelConfig(frozen=frozen))
    fixed = {n for n, p in policy.named_parameters() if not p.requires_grad}
    assert fixed and all(n.startswith(frozen) for n in fixed)
    assert {n for n in fixed if "self_attn" in n} == {
        n for n, _ in model.named_parameters() if n.startswith("model.layers.0.self_attn")
    }
    with pytest.raises(ValueError, match="no parameter name starts with 'mlp'"):
        prepare_policy(tiny_qwen2(300, hidden=32, layers=1), ModelConfig(frozen=("mlp",)))
