"""The one switch for the CPU speed-ups (``engine.cpu.speedups``): on where the model is on
CPU unless turned off, and off means the model's own forward and nothing else."""

from __future__ import annotations

import copy

import pytest
import torch

from treegrpo.agent.stops import StepStopper
from treegrpo.engine.cpu import speedups
from treegrpo.engine.cpu.speedups import CpuSpeedups
from treegrpo.engine.hf import HFEngine, StepRequest
from treegrpo.engine.sampling import SamplingParams
from treegrpo.models.tiny import tiny_qwen2


def test_the_switch_defaults_to_on_for_cpu_only() -> None:
    model = tiny_qwen2(32, hidden=16, layers=1, heads=2, kv_heads=2)
    assert speedups.enabled(model, None) is True
    assert speedups.enabled("cpu", None) is True
    assert speedups.enabled(torch.device("cuda"), None) is False  # no tensor needed
    assert speedups.enabled("cuda:1", None) is False
    assert speedups.enabled(model, False) is False
    assert speedups.enabled("cuda", True) is True


def test_engine_off_calls_the_model_as_it_is(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    model = tiny_qwen2(len(split_tokenizer), hidden=64, layers=2, seed=3)
    eng = HFEngine(model, split_tokenizer, StepStopper(split_tokenizer), cpu_speedups=False)
    assert eng._cpu is None and eng._lean is None and not eng._sdpa_bias
    assert CpuSpeedups.of(model) is None
    assert not any("forward" in m.__dict__ for m in model.modules())
    with pytest.raises(ValueError, match="need cpu_speedups on"):
        HFEngine(model, split_tokenizer, cpu_speedups=False, lean_decode=True)


def test_engine_on_and_off_give_the_same_steps(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    model = tiny_qwen2(len(split_tokenizer), hidden=64, layers=2, seed=3)
    prompts = [split_tokenizer(t)["input_ids"] for t in ("capital of", "<think>I", "x y z")]
    greedy = SamplingParams(greedy=True, max_new_tokens=10)
    out = []
    for on in (False, True):
        m = copy.deepcopy(model)
        eng = HFEngine(m, split_tokenizer, StepStopper(split_tokenizer), cpu_speedups=on)
        assert (CpuSpeedups.of(m) is not None) is on and (eng._lean is not None) is on
        first = eng.step([StepRequest(eng.root(), p) for p in prompts], greedy)
        obs = split_tokenizer(" <information>o</information>")["input_ids"]
        second = eng.step([StepRequest(r.end, [r.tokens[-1], *obs]) for r in first], greedy)
        out.append(first + second)
    for a, b in zip(*out, strict=True):
        assert a.tokens == b.tokens and a.finish == b.finish
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_attach_is_once_per_model_and_detach_restores(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    model = tiny_qwen2(len(split_tokenizer), hidden=64, layers=1, seed=3)
    first = CpuSpeedups.attach(model, packed=False, trainable=False)
    assert CpuSpeedups.attach(model) is first and CpuSpeedups.of(model) is first
    assert CpuSpeedups.attach(model, packed="decode").packed == "decode"  # a setting changed
    first.detach()
    assert CpuSpeedups.of(model) is None
    assert not any("forward" in m.__dict__ for m in model.modules())
