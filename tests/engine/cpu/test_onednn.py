"""Linear layers on oneDNN (``engine.cpu.onednn``, routed by ``engine.cpu.speedups``): same
numbers as ``F.linear``, packed weights in step with the live weights, plain layers again after
``detach``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from torch import nn

from treegrpo.agent.stops import StepStopper
from treegrpo.engine.cpu import onednn
from treegrpo.engine.cpu.speedups import CpuSpeedups
from treegrpo.engine.hf import HFEngine, StepRequest
from treegrpo.engine.sampling import SamplingParams
from treegrpo.models.tiny import tiny_qwen2

pytestmark = pytest.mark.skipif(
    not onednn.supported(nn.Linear(2, 2)), reason="oneDNN linear ops not in this torch build"
)


@pytest.fixture(autouse=True)
def _force_onednn(monkeypatch):  # type: ignore[no-untyped-def]
    """These tests check the oneDNN paths themselves, on any CPU vendor."""
    monkeypatch.setenv(onednn.ENV, "1")


@pytest.fixture
def model(split_tokenizer):  # type: ignore[no-untyped-def]
    return tiny_qwen2(len(split_tokenizer), hidden=64, layers=2, seed=3)


@contextmanager
def _counting(op: str = "_linear_pointwise") -> Iterator[list[int]]:
    """Counts calls of ``torch.ops.mkldnn.<op>`` within the block (in ``[0]``): by default
    oneDNN's linear kernel; ``_reorder_linear_weight`` counts weight packings."""
    calls = [0]
    real = getattr(torch.ops.mkldnn, op)

    def counting(*args):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return real(*args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.ops.mkldnn, op, counting)
        yield calls


def _logits(model, ids: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
    with torch.no_grad():
        out: torch.Tensor = model(ids).logits
    return out


def test_packed_forward_equals_plain_forward_and_is_undone(model) -> None:  # type: ignore[no-untyped-def]
    ids = torch.randint(0, model.config.vocab_size, (3, 17))
    plain = _logits(model, ids)
    cs = CpuSpeedups(model, packed=True, trainable=False, fold_lora=False)
    linears = [m for m in model.modules() if type(m) is nn.Linear]
    assert len(linears) == 2 * 7 + 1  # q k v o gate up down per layer, and the head
    with _counting() as calls:
        fast = _logits(model, ids)
    assert calls[0] == len(linears)  # every linear layer went through the packed path
    torch.testing.assert_close(fast, plain, rtol=1e-4, atol=1e-4)
    with _counting() as calls:  # a forward with autograd: plain F.linear (trainable off)
        model(ids).logits.sum().backward()
    assert calls[0] == 0 and all(m.weight.grad is not None for m in linears)
    cs.detach()  # the modules are plain again
    assert all("forward" not in m.__dict__ for m in linears)
    with _counting() as calls:
        _logits(model, ids)
    assert calls[0] == 0


def test_packed_keeps_one_pack_per_model(model) -> None:  # type: ignore[no-untyped-def]
    ids = torch.randint(0, model.config.vocab_size, (2, 9))
    plain = _logits(model, ids)
    with _counting("_reorder_linear_weight") as reorders:
        for _ in range(3):
            CpuSpeedups.attach(model, packed=True)  # once per model: the same routes
            with _counting() as calls:
                torch.testing.assert_close(_logits(model, ids), plain, rtol=1e-4, atol=1e-4)
            assert calls[0] == 2 * 7 + 1  # routed every time
    assert reorders[0] == 2 * 7 + 1  # but packed only the first time


def test_only_the_layers_called_are_packed(model) -> None:  # type: ignore[no-untyped-def]
    """Packing happens at a layer's first call: a block that runs one MLP packs its three."""
    mlp = model.model.layers[0].mlp
    x = torch.randn(2, model.config.hidden_size)
    with torch.no_grad():
        want = mlp(x)
        cs = CpuSpeedups(model, packed=True, trainable=False, fold_lora=False)
        with _counting("_reorder_linear_weight") as reorders:
            got = mlp(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert reorders[0] == 3 and len(cs._packs._packs) == 3


def test_repacks_after_an_in_place_update(model) -> None:  # type: ignore[no-untyped-def]
    ids = torch.randint(0, model.config.vocab_size, (2, 9))
    cs = CpuSpeedups(model, packed=True, trainable=False, fold_lora=False)
    before = _logits(model, ids)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model(ids).logits.pow(2).mean().backward()
    opt.step()  # in place, as every optimizer step
    after = _logits(model, ids)
    cs.detach()
    torch.testing.assert_close(after, _logits(model, ids), rtol=1e-4, atol=1e-4)
    assert not torch.allclose(after, before, atol=1e-3)


def test_engine_gives_the_same_greedy_steps_packed_or_not(model, split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    prompts = [split_tokenizer(t)["input_ids"] for t in ("capital of", "<think>I", "x y z")]
    greedy = SamplingParams(greedy=True, max_new_tokens=10)
    out = {}
    for flag in (False, True, "decode"):
        eng = HFEngine(model, split_tokenizer, StepStopper(split_tokenizer), packed_linear=flag)
        assert eng._cpu is not None and eng._cpu.packed == flag
        first = eng.step([StepRequest(eng.root(), p) for p in prompts], greedy)
        obs = split_tokenizer(" <information>o</information>")["input_ids"]
        second = eng.step([StepRequest(r.end, [r.tokens[-1], *obs]) for r in first], greedy)
        out[flag] = first + second
    for packed in (True, "decode"):
        for a, b in zip(out[False], out[packed], strict=True):
            assert a.tokens == b.tokens
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_decode_only_packing_leaves_prefill_on_plain_weights(model, split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    eng = HFEngine(model, split_tokenizer, StepStopper(split_tokenizer), packed_linear="decode")
    ids = split_tokenizer("capital of")["input_ids"]
    with _counting() as calls:
        eng.prefill([eng.root()], [ids])
        (one,) = eng.step([StepRequest(eng.root(), ids, max_new_tokens=1)], SamplingParams())
    assert len(one.tokens) == 1 and calls[0] == 0  # prefill only: plain weights
    with _counting() as calls:
        _logits(model, torch.tensor([ids]))
    assert calls[0] == 0  # so are the other gradient-free forwards (old log-probs)
    params = SamplingParams(greedy=True, max_new_tokens=6)
    with _counting() as calls:
        (r,) = eng.step([StepRequest(eng.root(), ids)], params)
    assert len(r.tokens) > 1 and calls[0] > 0  # decode steps ran on packed weights
    with _counting() as calls:
        _logits(model, torch.tensor([ids]))
    assert calls[0] == 0  # and plain again after them


def test_packing_is_refused_where_it_does_not_apply(model, split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    model = model.to(torch.bfloat16)
    assert not onednn.supported(model) and not onednn.preferred(model)
    eng = HFEngine(model, split_tokenizer)
    assert eng._cpu is not None and not eng._cpu.packed and not eng._cpu.trainable  # auto: off
    with pytest.raises(ValueError, match="need oneDNN and a CPU fp32 model"):
        HFEngine(model, split_tokenizer, packed_linear=True)


def _grads(model, ids: torch.Tensor) -> dict[str, torch.Tensor]:  # type: ignore[no-untyped-def]
    model.zero_grad(set_to_none=True)
    model(ids).logits.pow(2).mean().backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_trainable_linears_give_the_plain_gradients(model) -> None:  # type: ignore[no-untyped-def]
    ids = torch.randint(0, model.config.vocab_size, (3, 11))
    plain = _grads(model, ids)
    cs = CpuSpeedups(model, packed=False, trainable=True, fold_lora=False)
    with _counting() as calls:
        fast = _grads(model, ids)
    n_linears = sum(type(m) is nn.Linear for m in model.modules())
    assert calls[0] == 3 * n_linears  # forward, input gradient, weight gradient
    assert fast.keys() == plain.keys() and len(plain) == len(list(model.parameters()))
    for name in plain:
        torch.testing.assert_close(fast[name], plain[name], rtol=1e-3, atol=1e-5, msg=name)
    with _counting() as calls:  # without autograd: plain (packed off)
        _logits(model, ids)
    assert calls[0] == 0
    cs.detach()


def test_trainable_linears_skip_frozen_weights(model) -> None:  # type: ignore[no-untyped-def]
    for n, p in model.named_parameters():
        p.requires_grad_("mlp" not in n)  # the MLP's linear layers frozen
    ids = torch.randint(0, model.config.vocab_size, (2, 7))
    plain = _grads(model, ids)
    CpuSpeedups(model, packed=False, trainable=True, fold_lora=False)
    fast = _grads(model, ids)
    assert fast.keys() == plain.keys()
    assert not any("mlp" in n for n in fast)
    for name in plain:
        torch.testing.assert_close(fast[name], plain[name], rtol=1e-3, atol=1e-5, msg=name)


@pytest.mark.parametrize(
    ("env", "vendor", "hidden", "want"),
    [
        ("auto", "AuthenticAMD", 64, True),  # with AVX-512 (patched below)
        ("auto", "GenuineIntel", 64, False),  # narrow: MKL at decode too
        ("auto", "GenuineIntel", 512, "decode"),  # wide: packed at decode only
        ("1", "GenuineIntel", 64, True),
        ("0", "GenuineIntel", 512, False),
        ("0", "AuthenticAMD", 512, False),
    ],
)
def test_engine_mode_by_vendor_width_and_environment(
    monkeypatch, env, vendor, hidden, want
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(onednn.ENV, env)
    monkeypatch.setattr(onednn, "_cpu_vendor", lambda: vendor)
    monkeypatch.setattr(onednn, "_cpu_capability", lambda: "AVX512")
    model = tiny_qwen2(32, hidden=hidden, layers=1, heads=2, kv_heads=2)
    assert onednn.engine_mode(model) == want


@pytest.mark.parametrize(
    ("env", "vendor", "isa", "want"),
    [
        ("auto", "AuthenticAMD", "AVX512", True),  # MKL on AVX2, oneDNN on AVX-512: pays
        ("auto", "AuthenticAMD", "AVX2", False),  # both on AVX2: MKL is faster
        ("auto", "GenuineIntel", "AVX512", False),  # MKL on AVX-512: plain linear layers
        ("auto", "", "AVX2", True),
        ("1", "GenuineIntel", "AVX512", True),
        ("1", "AuthenticAMD", "AVX2", True),
        ("0", "AuthenticAMD", "AVX512", False),
    ],
)
def test_preferred_by_cpu_vendor_isa_and_environment(  # type: ignore[no-untyped-def]
    model, monkeypatch, env, vendor, isa, want
) -> None:
    monkeypatch.setenv(onednn.ENV, env)
    monkeypatch.setattr(onednn, "_cpu_vendor", lambda: vendor)
    monkeypatch.setattr(onednn, "_cpu_capability", lambda: isa)
    assert onednn.preferred(model) == want
    ids = torch.randint(0, model.config.vocab_size, (2, 5))
    CpuSpeedups.attach(model)  # the defaults follow: narrow, so engine_mode == preferred
    with _counting() as calls:
        _grads(model, ids)
    assert (calls[0] > 0) == want
    with _counting() as calls:
        _logits(model, ids)
    assert (calls[0] > 0) == want


def test_cpu_vendor_and_capability_are_read() -> None:
    assert isinstance(onednn._cpu_vendor(), str)
    isa = onednn._cpu_capability()
    assert isinstance(isa, str) and isa  # e.g. "AVX2", "AVX512", "DEFAULT"
