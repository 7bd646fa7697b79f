"""The trainable policy: full fine-tuning or LoRA adapters (peft), and gradient checkpointing.

With LoRA the policy is a peft model around the loaded transformers model: the adapters train,
the base weights stay frozen, and the same model with its adapters disabled is the KL reference,
so no second copy is loaded. Checkpoints stay plain transformers models: they hold a merged copy
(W + α/r · B·A), and the adapter weights beside it: merged weights could not resume exactly
(merging rounds; a merged matrix cannot be split back)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, get_peft_model
from peft.utils import load_peft_weights, set_peft_model_state_dict

from treegrpo.engine.base import unwrap_peft
from treegrpo.train.config import ModelConfig


def is_lora(model: Any) -> bool:
    """Whether ``model`` is a peft model (``engine.base.unwrap_peft``)."""
    return unwrap_peft(model) is not model


def prepare_policy(model: Any, cfg: ModelConfig, seed: int = 0) -> Any:
    """Turn on gradient checkpointing, freeze ``cfg.frozen`` and wrap ``model`` with LoRA as ``cfg``
    asks; returns the model to train. LoRA's A matrices are drawn from ``seed`` without touching the
    global RNG, so a run starts from the same adapters every time."""
    if cfg.grad_checkpointing:
        # non-reentrant: the reentrant kind drops gradients of inputs that do not require grad,
        # and warns with frozen bases (transformers ≥ 5 renamed the method)
        kwargs = {"use_reentrant": False}
        enable = getattr(model, "activation_checkpointing_enable", None)
        if enable is not None:
            enable(kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if cfg.lora_rank == 0:
        names = [n for n, _ in model.named_parameters()]
        for prefix in cfg.frozen:
            if not any(n.startswith(prefix) for n in names):
                raise ValueError(f"model.frozen: no parameter name starts with {prefix!r}")
        for name, p in model.named_parameters():
            if name.startswith(tuple(cfg.frozen)):
                p.requires_grad_(False)
        return model
    lora = LoraConfig(
        r=cfg.lora_rank,
        lora_alpha=cfg.lora_alpha,  # type: ignore[arg-type]  # peft annotates int, uses α / r
        lora_dropout=cfg.lora_dropout,
        target_modules=list(cfg.lora_targets),
        task_type="CAUSAL_LM",
    )
    with torch.random.fork_rng(devices=[]):  # peft draws A with the CPU generator
        torch.manual_seed(seed)
        policy = get_peft_model(model, lora)  # freezes every base parameter
    if cfg.grad_checkpointing:
        # Frozen embeddings give block inputs without grad; reentrant checkpointing (which some
        # models' code forces) then gives the adapters no gradient. The hook marks them.
        policy.enable_input_require_grads()
    return policy


def load_adapter(policy: Any, directory: Path) -> None:
    """Load saved adapter weights into ``policy``, whose adapters must have the same shape."""
    saved = json.loads((directory / "adapter_config.json").read_text())
    current = policy.peft_config["default"]
    for key in ("r", "lora_alpha"):
        if saved.get(key) != getattr(current, key):
            raise ValueError(
                f"{directory}: adapter has {key}={saved.get(key)}, the run asks for "
                f"{getattr(current, key)}; resume with the model settings it was trained with"
            )
    result: Any = set_peft_model_state_dict(policy, load_peft_weights(str(directory)))
    missing = [k for k in result.missing_keys if "lora_" in k]
    if missing or result.unexpected_keys:
        raise ValueError(
            f"{directory}: adapter does not match the policy (missing {missing[:3]}, "
            f"unexpected {list(result.unexpected_keys)[:3]})"
        )
