"""Atomic checkpoints: a Hugging Face model directory plus the trainer state for exact resume.

Layout of ``<run>/checkpoints/step-000010/``:

    model/              save_pretrained (safetensors) and the tokenizer: loadable by
                        transformers and vLLM without this package (a LoRA policy is saved
                        merged: base weights + α/r · B·A)
    adapter/            LoRA only: peft's adapter directory, for exact resume (and for peft)
    trainer_state.pt    optimizer, scheduler, step, data position, and the RNG states of
                        python, numpy and torch
    meta.json           step and what produced it; written last

A checkpoint is written into ``step-000010.tmp`` and renamed into place when complete, so a run
killed while saving leaves the previous checkpoint untouched and no half-written one that looks
complete. ``latest_checkpoint`` ignores ``.tmp`` directories.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from treegrpo.train.policy import is_lora, merged_copy, save_adapter

PREFIX = "step-"


@dataclass
class TrainerState:
    step: int  # RL steps completed
    data_position: int  # prompts consumed from the training order
    optimizer: dict[str, Any]
    scheduler: dict[str, Any] | None
    rng: dict[str, Any]
    extra: dict[str, Any]


def rng_state() -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),  # noqa: NPY002  (user code may use the global RNG)
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])  # noqa: NPY002
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    run_dir: Path,
    step: int,
    model: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any | None,
    data_position: int,
    extra: dict[str, Any] | None = None,
    keep: int = 2,
) -> Path:
    """Write checkpoint ``step`` atomically and keep only the newest ``keep`` of them."""
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{PREFIX}{step:06d}"
    tmp = root / f"{final.name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    if is_lora(model):
        merged_copy(model).save_pretrained(tmp / "model", safe_serialization=True)
        save_adapter(model, tmp / "adapter")
    else:
        model.save_pretrained(tmp / "model", safe_serialization=True)
    tokenizer.save_pretrained(tmp / "model")
    state = TrainerState(
        step=step,
        data_position=data_position,
        optimizer=optimizer.state_dict(),
        scheduler=scheduler.state_dict() if scheduler is not None else None,
        rng=rng_state(),
        extra=extra or {},
    )
    torch.save(state.__dict__, tmp / "trainer_state.pt")
    (tmp / "meta.json").write_text(json.dumps({"step": step, "data_position": data_position}))
    _fsync_tree(tmp)
    if final.exists():  # re-saving the same step (for example after a resume)
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in sorted(p for p in root.glob(f"{PREFIX}*") if _complete(p))[:-keep]:
        shutil.rmtree(old)
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint of ``run_dir``, or None."""
    root = Path(run_dir) / "checkpoints"
    done = sorted(p for p in root.glob(f"{PREFIX}*") if _complete(p)) if root.exists() else []
    return done[-1] if done else None


def load_trainer_state(checkpoint: Path) -> TrainerState:
    raw = torch.load(Path(checkpoint) / "trainer_state.pt", weights_only=False)
    return TrainerState(**raw)


def _complete(path: Path) -> bool:
    return path.is_dir() and not path.name.endswith(".tmp") and (path / "meta.json").exists()


def _fsync_tree(path: Path) -> None:
    """Flush every file of ``path`` to disk before the rename makes it visible."""
    for f in path.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
