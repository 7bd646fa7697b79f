"""The lean decode step against the model's own forward (Qwen2 and Llama, grouped-query
attention, padded rows, rope scaling, biases), and in the engine."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from treegrpo.agent.stops import StepStopper
from treegrpo.engine.cache import assemble_cache
from treegrpo.engine.cpu.lean import (
    LeanDecoder,
    _attend,
    _attend_matmul,
    _attend_sdpa,
    attention_spans,
    lean_decoder,
)
from treegrpo.engine.hf import HFEngine, StepRequest
from treegrpo.engine.sampling import SamplingParams
from treegrpo.models.tiny import tiny_qwen2


def _tiny_llama(vocab: int) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        attention_bias=True,
        mlp_bias=True,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500_000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32,
        },
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    torch.manual_seed(3)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # random biases, not the zeros they start from
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return model


def _model_logits(
    model: Any, new: torch.Tensor, keep: torch.Tensor, pos: torch.Tensor, cache: DynamicCache
) -> torch.Tensor:
    """The model's own forward of one new token per row on ``cache``: (b, V) logits."""
    out = model(input_ids=new, attention_mask=keep.long(), position_ids=pos, past_key_values=cache)
    logits: torch.Tensor = out.logits[:, -1]
    return logits


pytestmark = pytest.mark.filterwarnings("ignore:`past_key_values` is deprecated:FutureWarning")

MODELS = {
    "qwen2": lambda: tiny_qwen2(300, hidden=64, layers=2, heads=4, kv_heads=2, seed=4).eval(),
    "llama": lambda: _tiny_llama(300),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_lean_logits_equal_the_model_forward_on_padded_rows(name: str) -> None:
    model = MODELS[name]()
    lean = lean_decoder(model)
    assert isinstance(lean, LeanDecoder)
    lengths = [11, 7, 3]  # longest first, as the engine orders them; right-aligned
    ids = [torch.randint(2, 300, (n,)) for n in lengths]
    with torch.no_grad():
        kvs = []
        for row in ids:
            out = model(row[None], use_cache=True)
            kvs.append(
                torch.stack(
                    [torch.stack([la.keys[0], la.values[0]]) for la in out.past_key_values.layers]
                )
            )
    new = torch.tensor([[5], [6], [7]])  # (b, 1): one new token per row
    pos = torch.tensor([[n] for n in lengths])
    got: dict[str, torch.Tensor] = {}
    for run in ("lean", "packed", "table", "unfused", "spans", "model"):
        cache, width = assemble_cache([[kv] for kv in kvs], 4, model.config, 2)
        pads = [width - n for n in lengths]
        keep = torch.ones(3, width + 1, dtype=torch.bool)
        for i, p in enumerate(pads):
            keep[i, :p] = False
        with torch.no_grad():
            bias = torch.zeros(3, 1, 1, width + 1).masked_fill(~keep[:, None, None], float("-inf"))
            if run in ("lean", "packed"):
                lean.prepare(packed=run == "packed")
                assert lean._rope is None  # cos and sin from the rotary module at each step
                got[run] = lean(new, bias, pos, cache)
            elif run == "table":  # cos and sin looked up in the table prepare builds
                lean.prepare(packed=False, positions=width + 4)
                assert lean._rope is not None and lean._rope[0].shape[0] >= width + 4
                got[run] = lean(new, bias, pos, cache)
            elif run == "unfused":  # each projection through its own module
                unfused = LeanDecoder(model)
                unfused.qkv = [None] * len(unfused.qkv)
                unfused.gate_up = [None] * len(unfused.gate_up)
                got[run] = unfused(new, bias, pos, cache)
            elif run == "spans":
                spans = attention_spans(pads, width + 1, overhead=1)
                assert len(spans) > 1  # the split path really runs
                lean.prepare(packed=False)
                got[run] = lean(new, bias, pos, cache, spans)
            else:
                want = _model_logits(model, new, keep, pos, cache)
    assert all(f is not None for f in lean.qkv + lean.gate_up)  # the fused path really runs
    for run, logits in got.items():
        torch.testing.assert_close(logits, want, rtol=1e-5, atol=1e-5, msg=run)
    # and each row equals that row computed alone, without any padding
    with torch.no_grad():
        for i, row in enumerate(ids):
            alone = model(torch.cat([row, new[i]])[None]).logits[0, -1]
            torch.testing.assert_close(got["lean"][i], alone, rtol=1e-4, atol=1e-4)


def test_no_rope_table_where_frequencies_follow_the_length() -> None:
    """A "dynamic" rope rescales its frequencies with the position reached, so a table built for
    the longest position would differ from a step's own: those models call the module."""
    config = MODELS["llama"]().config
    config.rope_parameters = {"rope_type": "dynamic", "rope_theta": 10_000.0, "factor": 2.0}
    lean = lean_decoder(LlamaForCausalLM(config).eval())
    assert lean is not None
    lean.prepare(packed=False, positions=64)
    assert lean._rope is None
    static = lean_decoder(MODELS["llama"]())  # llama3 scaling: fixed frequencies
    assert static is not None
    static.prepare(packed=False, positions=64)
    assert static._rope is not None


@pytest.mark.parametrize("packed", [False, True])
def test_fused_projections_follow_the_weights(packed: bool) -> None:
    """After an in-place update of one part (as an optimizer step does), ``refresh`` rebuilds
    the stacked weight: the fused product equals the separate layers again."""
    model = _tiny_llama(300)
    lean = lean_decoder(model)
    assert lean is not None
    att = model.model.layers[1].self_attn
    fused = lean.qkv[1]
    assert fused is not None
    x = torch.randn(3, 1, 64)
    with torch.no_grad():
        fused.refresh(packed)
        before = fused(x)[1]
        att.k_proj.weight.add_(0.5)
        att.v_proj.bias.mul_(-1.0)
        fused.refresh(packed)
        q, k, v = fused(x)
        assert not torch.allclose(k, before, atol=1e-3)  # the update reached the fused weight
        for got, m in ((q, att.q_proj), (k, att.k_proj), (v, att.v_proj)):
            torch.testing.assert_close(got, m(x), rtol=1e-5, atol=1e-5)


def _next_logits(model: Any, lean: LeanDecoder) -> tuple[torch.Tensor, torch.Tensor]:
    """One decode step after three cached rows of different lengths (right-aligned, padded):
    the lean decoder's logits and the model's own forward's."""
    lengths = [9, 5, 2]
    torch.manual_seed(0)
    kvs = []
    with torch.no_grad():
        for n in lengths:
            out = model(torch.randint(2, 300, (1, n)), use_cache=True)
            layers = out.past_key_values.layers
            kvs.append(torch.stack([torch.stack([la.keys[0], la.values[0]]) for la in layers]))
        new = torch.tensor([[5], [6], [7]])
        pos = torch.tensor([[n] for n in lengths])
        logits = []
        for run in ("lean", "model"):
            cache, width = assemble_cache([[kv] for kv in kvs], 4, model.config, 2)
            keep = torch.ones(3, width + 1, dtype=torch.bool)
            for i, n in enumerate(lengths):
                keep[i, : width - n] = False
            if run == "lean":
                bias = torch.zeros(3, 1, 1, width + 1).masked_fill(
                    ~keep[:, None, None], float("-inf")
                )
                lean.prepare(packed=False, positions=width + 4)
                logits.append(lean(new, bias, pos, cache))
            else:
                logits.append(_model_logits(model, new, keep, pos, cache))
    return logits[0], logits[1]


def test_lora_adapters_fold_into_the_fused_products() -> None:
    """Projections wrapped by peft's LoRA run as fused products with W₀ + s·B·A: the same
    logits as the wrapped model's forward, also after the adapters move."""
    from peft import LoraConfig, get_peft_model

    targets = ["q_proj", "v_proj", "o_proj", "up_proj", "down_proj"]
    peft = get_peft_model(MODELS["qwen2"](), LoraConfig(r=2, lora_alpha=6, target_modules=targets))
    with torch.no_grad():  # B starts at zero: make the adapters change the outputs
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.2)
    model = peft.base_model.model.eval()
    lean = lean_decoder(model)
    assert lean is not None
    fused = [*lean.qkv, *lean.o, *lean.gate_up, *lean.down]
    assert all(f is not None for f in fused)
    got, want = _next_logits(model, lean)
    assert all(f is not None and f.ready for f in fused)  # the folded path really ran
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    with torch.no_grad():  # an optimizer step moves A and B in place
        for name, p in peft.named_parameters():
            if "lora_" in name:
                p.add_(0.1 * torch.randn_like(p))
    got, want_after = _next_logits(model, lean)
    assert not torch.allclose(want_after, want, atol=1e-3)
    torch.testing.assert_close(got, want_after, rtol=1e-5, atol=1e-5)
    with peft.disable_adapter():  # the base model alone: the adapters mattered
        got, base = _next_logits(model, lean)
    assert not torch.allclose(base, want_after, atol=1e-3)
    torch.testing.assert_close(got, base, rtol=1e-5, atol=1e-5)


def test_adapters_that_do_not_fold_are_called_as_modules() -> None:
    """DoRA rescales W₀ + BA by a learned norm, which a folded W₀ + s·B·A would drop: those
    projections go through their modules, and the logits still equal the model's."""
    from peft import LoraConfig, get_peft_model

    peft = get_peft_model(
        MODELS["qwen2"](), LoraConfig(r=2, target_modules=["q_proj", "up_proj"], use_dora=True)
    )
    model = peft.base_model.model.eval()
    lean = lean_decoder(model)
    assert lean is not None
    assert lean.qkv == [None, None] and lean.gate_up == [None, None]
    got, want = _next_logits(model, lean)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    bare = lean_decoder(MODELS["qwen2"]())
    assert bare is not None and all(f is not None for f in bare.qkv + bare.gate_up)
    assert bare.o == [None, None] and bare.down == [None, None]  # plain: called as modules


def test_engine_uses_the_lean_step_and_gives_the_same_greedy_steps(
    split_tokenizer, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    model = tiny_qwen2(len(split_tokenizer), hidden=64, layers=2, seed=1)
    texts = ["capital of France", "<think>I should", "x", "Paris is the capital of France."]
    prompts = [split_tokenizer(t)["input_ids"] for t in texts]
    greedy = SamplingParams(greedy=True, max_new_tokens=12)
    calls = [0]
    real = LeanDecoder.__call__

    def counted(self, *args):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return real(self, *args)

    monkeypatch.setattr(LeanDecoder, "__call__", counted)
    outs = []
    for flag in (True, False):
        calls[0] = 0
        eng = HFEngine(model, split_tokenizer, StepStopper(split_tokenizer), lean_decode=flag)
        assert (eng._lean is not None) == flag
        first = eng.step([StepRequest(eng.root(), p) for p in prompts], greedy)
        again = eng.step([StepRequest(r.end, [r.tokens[-1], 5, 6]) for r in first], greedy)
        outs.append([(r.tokens, r.logprobs) for r in first + again])
        assert (calls[0] > 0) == flag
    for (tok_a, lp_a), (tok_b, lp_b) in zip(*outs, strict=True):
        assert tok_a == tok_b
        assert lp_a == pytest.approx(lp_b, abs=1e-5)


def test_other_architectures_fall_back_to_the_model(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=300, n_embd=32, n_layer=1, n_head=2)).eval()
    assert lean_decoder(gpt2) is None
    assert HFEngine(gpt2, split_tokenizer, reuse_cache=False)._lean is None
    with pytest.raises(ValueError, match="lean_decode supports model types"):
        HFEngine(gpt2, split_tokenizer, reuse_cache=False, lean_decode=True)


def test_without_padding_the_mask_is_none_and_the_cache_grows_by_a_column() -> None:
    model = MODELS["qwen2"]()
    lean = lean_decoder(model)
    assert lean is not None
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(torch.tensor([[3, 4, 5]]), past_key_values=cache, use_cache=True)
        cache2, width = assemble_cache(
            [[torch.stack([torch.stack([la.keys[0], la.values[0]]) for la in cache.layers])]],
            2,
            model.config,
            2,
        )
        lean.prepare(packed=False)
        got = lean(torch.tensor([[6]]), None, torch.tensor([[3]]), cache2)
        want = model(torch.tensor([[3, 4, 5, 6]])).logits[:, -1]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert width == 3 and cache2.get_seq_length() == 4


def test_attention_spans_by_hand() -> None:
    # two long rows, two short ones: one call reads 4 × 10 columns + 3, two calls 2 × 10 + 2 × 2
    # + 2 × 3
    assert attention_spans([0, 0, 8, 8], 10, overhead=3) == [(0, 2, 0), (2, 4, 8)]
    assert attention_spans([0, 0, 8, 8], 10, overhead=100) == [(0, 4, 0)]
    assert attention_spans([0, 3, 8, 8], 10, overhead=3) == [(0, 2, 0), (2, 4, 8)]
    assert attention_spans([], 10, overhead=1) == []
    with pytest.raises(ValueError, match="ascending"):
        attention_spans([3, 0], 10, overhead=1)


def test_cpu_attention_products_equal_sdpa() -> None:
    # grouped-query decode shape: 3 rows, 2 key/value heads of 3 query rows each, 9 columns,
    # row 1 with 4 padding columns and row 2 with 7
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 2, n, 16, generator=g) for n in (3, 9, 9))
    bias = torch.zeros(3, 1, 1, 9)
    bias[1, ..., :4] = bias[2, ..., :7] = float("-inf")
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.3)
    torch.testing.assert_close(_attend_matmul(q, k, v, bias, 0.3), want)
    torch.testing.assert_close(_attend_matmul(q, k, v, None, 0.3), _attend_sdpa(q, k, v, None, 0.3))
    # _attend takes the products on CPU fp32, whole or by spans (each span from its first column)
    torch.testing.assert_close(_attend(q, k, v, bias, 0.3, [(0, 1, 0), (1, 3, 4)]), want)
