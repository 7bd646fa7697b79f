"""LoRA through peft: only adapters train, the base is the KL reference, checkpoints load with
plain transformers, and a LoRA run resumes exactly."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from agent_fixtures import FACTS, PEOPLE, WordTool, trained_agent
from treegrpo.agent.stops import StepStopper
from treegrpo.engine.hf import HFEngine, StepRequest
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.rollout.source import LocalRollout
from treegrpo.train.checkpoint import latest_checkpoint, save_checkpoint
from treegrpo.train.config import AlgorithmConfig, ModelConfig, OptimConfig, RunConfig
from treegrpo.train.logprobs import as_reference, token_logprobs
from treegrpo.train.policy import is_lora, load_adapter, prepare_policy
from treegrpo.train.step import Batch, Learning, Rollouts, StepSettings, rl_step
from treegrpo.train.task import TrainItem, TrainSettings, TrainTask
from treegrpo.train.trainer import train

LORA = ModelConfig(lora_rank=4, lora_alpha=8)
LIMITS = AgentLimits(max_turns=2, topk=3, max_context=1024)
SAMPLING = SamplingParams(max_new_tokens=40)


def _lora_policy(perturb: float = 0.0) -> Any:
    policy = prepare_policy(copy.deepcopy(trained_agent().model), LORA)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # B starts at zero; nudge it so the adapters change the outputs
        for name, p in policy.named_parameters():
            if "lora_B" in name and perturb:
                p.add_(perturb * torch.randn(p.shape, generator=gen))
    return policy.eval()


def _ids(n: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    agent = trained_agent()
    rows = [agent.prompt(p) for p in PEOPLE[:n]]
    width = min(len(r) for r in rows)
    ids = torch.tensor([r[:width] for r in rows])
    return ids, torch.ones_like(ids)


@pytest.mark.slow
def test_only_adapters_train_and_one_step_moves_every_adapter() -> None:
    agent = trained_agent()
    policy = _lora_policy()
    assert is_lora(policy)
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-2)
    engine = HFEngine(policy, agent.tokenizer, StepStopper(agent.tokenizer))
    people = PEOPLE[:4]
    batch = Batch(
        [agent.prompt(p) for p in people], [[FACTS[p]] for p in people], [f"t-{p}" for p in people]
    )
    optim = OptimConfig(lr=1e-2, weight_decay=0.0, mini_batch_prompts=2, micro_batch_tokens=1500)
    rollouts = Rollouts(LocalRollout(engine, agent.protocol, WordTool()), agent.protocol,
                        SAMPLING, LIMITS)  # fmt: skip
    learning = Learning(policy, None, opt)  # the reference is the base model: adapters disabled
    metrics = rl_step(
        learning, rollouts, batch, StepSettings(AlgorithmConfig(kl_coef=0.01), optim), seed=0
    )
    # two updates: B gets a gradient in the first, A (behind B = 0) in the second
    assert metrics["train/updates"] == 2 and metrics["train/skipped_updates"] == 0
    assert metrics["loss/kl"] >= 0.0
    for name, p in policy.named_parameters():
        moved = not torch.equal(p, before[name])
        assert moved == (name in trainable), name


def reference_logprobs(policy, reference, ids, mask):  # type: ignore[no-untyped-def]
    """Log-probs under the frozen reference, as the update computes them."""
    with as_reference(policy, reference) as model:
        return token_logprobs(model, ids, mask)[0]


def test_reference_is_the_base_model_with_adapters_disabled() -> None:
    policy = _lora_policy(perturb=0.5)
    base = trained_agent().model
    ids, mask = _ids()
    with torch.no_grad():
        ref = reference_logprobs(policy, None, ids, mask)
        expected = token_logprobs(base, ids, mask)[0]
        adapted = token_logprobs(policy, ids, mask)[0]
    assert torch.allclose(ref, expected, atol=1e-6)
    assert not torch.allclose(adapted, expected, atol=1e-3)  # the adapters do something
    with pytest.raises(ValueError, match="reference"):
        reference_logprobs(base, None, ids, mask)  # full fine-tuning needs a reference model


def test_engine_runs_the_adapted_policy() -> None:
    agent = trained_agent()
    policy = _lora_policy(perturb=0.5)
    merged = copy.deepcopy(policy).merge_and_unload().eval()
    greedy = SamplingParams(greedy=True, max_new_tokens=20)
    results = []
    for model in (policy, merged):
        engine = HFEngine(model, agent.tokenizer, StepStopper(agent.tokenizer))
        assert engine._keep_kw  # the wrapped model's signature, not peft's **kwargs
        reqs = [StepRequest(engine.root(), agent.prompt(p)) for p in PEOPLE[:3]]
        results.append(engine.step(reqs, greedy))
    for a, b in zip(*results, strict=True):
        assert a.tokens == b.tokens
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_lora_checkpoint_is_a_plain_merged_model(tmp_path: Path) -> None:
    agent = trained_agent()
    policy = _lora_policy(perturb=0.5)
    ids, mask = _ids()
    with torch.no_grad():
        before = policy(input_ids=ids, attention_mask=mask).logits
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad])
    ckpt = save_checkpoint(tmp_path, 1, policy, agent.tokenizer, opt, None, 0)
    plain = AutoModelForCausalLM.from_pretrained(ckpt / "model")  # no peft involved
    assert not any("lora" in k or "base_layer" in k for k in plain.state_dict())
    with torch.no_grad():
        after = policy(input_ids=ids, attention_mask=mask).logits
        logits = plain(input_ids=ids, attention_mask=mask).logits
    assert torch.equal(before, after)  # saving left the live policy unmerged and unchanged
    assert torch.allclose(logits, before, atol=1e-4)  # merging only rounds (logits are O(1))
    restored = _lora_policy()  # fresh adapters, then the saved ones
    load_adapter(restored, ckpt / "adapter")
    for (n, p), (_, q) in zip(restored.named_parameters(), policy.named_parameters(), strict=True):
        assert torch.equal(p, q), n


ITEMS = [TrainItem(f"Where was {p} born", (c,), f"toy-{p}") for p, c in FACTS.items()]


def _train(start: Path, out: Path, steps: int, resume: bool = False, cfg: ModelConfig = LORA):
    loads: list[Path] = []

    def load(path: Path) -> tuple[Any, Any]:
        loads.append(path)
        return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)

    run = RunConfig(
        out_dir=str(out), steps=steps, prompts_per_step=4, seed=3, save_every=1, resume=resume
    )
    optim = OptimConfig(lr=1e-2, mini_batch_prompts=2, micro_batch_tokens=2000)
    task = TrainTask(start, load, WordTool(), ITEMS, SAMPLING, LIMITS, max_obs_tokens=120)
    train(task, TrainSettings(AlgorithmConfig(kl_coef=0.01), optim, run, cfg))
    return loads


def _adapter(run_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    ckpt = latest_checkpoint(run_dir)
    assert ckpt is not None
    return load_file(ckpt / "adapter" / "adapter_model.safetensors")


@pytest.mark.slow
def test_lora_resume_equals_no_interruption(model_dir: Path, tmp_path: Path) -> None:
    loads = _train(model_dir, tmp_path / "straight", steps=2)
    assert loads == [model_dir]  # KL against the base: no second model is loaded
    _train(model_dir, tmp_path / "resumed", steps=1)
    _train(model_dir, tmp_path / "resumed", steps=2, resume=True)
    a, b = _adapter(tmp_path / "straight"), _adapter(tmp_path / "resumed")
    assert a.keys() == b.keys() and a
    for k in a:
        assert torch.equal(a[k], b[k]), k
    merged = [
        AutoModelForCausalLM.from_pretrained(
            tmp_path / run / "checkpoints" / "step-000002" / "model"
        )
        for run in ("straight", "resumed")
    ]
    for (k, x), y in zip(
        merged[0].state_dict().items(), merged[1].state_dict().values(), strict=True
    ):
        assert torch.equal(x, y), k
    lines = [
        json.loads(x) for x in (tmp_path / "straight" / "metrics.jsonl").read_text().splitlines()
    ]
    again = [
        json.loads(x) for x in (tmp_path / "resumed" / "metrics.jsonl").read_text().splitlines()
    ]
    assert lines[1]["loss/pg_loss"] == again[1]["loss/pg_loss"]
    config = json.loads((tmp_path / "straight" / "config.json").read_text())
    assert config["model"]["lora_rank"] == LORA.lora_rank
    with pytest.raises(ValueError, match="LoRA run"):  # a LoRA checkpoint is not a full one
        _train(model_dir, tmp_path / "resumed", steps=3, resume=True, cfg=ModelConfig())
