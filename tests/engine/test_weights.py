"""``engine.base.state_dict_of``: what an engine that holds its own copy of the weights (vLLM)
is given; a LoRA model gives its merged weights, as peft's ``merge_and_unload`` would."""

from __future__ import annotations

import copy

import pytest
import torch
from peft import LoraConfig, get_peft_model

from treegrpo.engine.base import state_dict_of
from treegrpo.models.tiny import tiny_qwen2
from treegrpo.train.config import ModelConfig
from treegrpo.train.policy import prepare_policy


def _lora_model():  # type: ignore[no-untyped-def]
    policy = prepare_policy(tiny_qwen2(50, hidden=32, layers=2, seed=0), ModelConfig(lora_rank=4))
    with torch.no_grad():
        gen = torch.Generator().manual_seed(0)
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
    return policy


def test_a_lora_model_gives_merged_weights_under_the_base_names() -> None:
    policy = _lora_model()
    merged = state_dict_of(policy)
    want = copy.deepcopy(policy).merge_and_unload().state_dict()
    assert merged.keys() == want.keys()
    for key, value in want.items():
        torch.testing.assert_close(merged[key], value, msg=key)
    assert state_dict_of(policy.get_base_model()).keys() == want.keys()  # the model inside too
    q = "model.layers.0.self_attn.q_proj.weight"
    base = policy.get_base_model().model.layers[0].self_attn.q_proj.base_layer.weight
    assert not torch.allclose(merged[q], base)  # the delta is in
    with policy.disable_adapter():  # adapters off: the base weights
        torch.testing.assert_close(state_dict_of(policy)[q], base)


def test_a_plain_model_and_a_state_dict_pass_through() -> None:
    model = tiny_qwen2(50, hidden=32, layers=1, seed=0)
    got = state_dict_of(model)
    assert got.keys() == model.state_dict().keys()
    assert all(not t.requires_grad for t in got.values())
    assert state_dict_of({"w": torch.ones(2, requires_grad=True)})["w"].requires_grad is False


def test_lora_on_other_layers_is_refused() -> None:
    lora = LoraConfig(r=4, target_modules=["embed_tokens", "q_proj"], task_type="CAUSAL_LM")
    policy = get_peft_model(tiny_qwen2(50, hidden=32, layers=1, seed=0), lora)
    with pytest.raises(ValueError, match=r"embed_tokens\.lora_embedding_A.*only LoRA on linear"):
        state_dict_of(policy)
