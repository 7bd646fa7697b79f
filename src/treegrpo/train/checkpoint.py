"""Atomic checkpoints: a Hugging Face model directory plus the trainer state for exact resume
(docs/configuration.md, "The run directory"), written into ``step-000010.tmp`` and renamed into
place when complete. Layout of ``<run>/checkpoints/step-000010/``:

    model/              save_pretrained (safetensors) and the tokenizer; a LoRA policy merged
    adapter/            LoRA only: peft's adapter directory, for exact resume (and for peft)
    trainer_state.pt    optimizer, scheduler, step, data position, RNG states of python, numpy
                        and torch: tensors and plain values only (``weights_only=True``)
    meta.json           step, data position and every file's size; written last
"""

from __future__ import annotations

import copy
import json
import logging
import os
import pickle
import random
import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from treegrpo.train.policy import is_lora

PREFIX = "step-"
FORMAT = 2  # 2: weights-only trainer state and file sizes in meta.json

log = logging.getLogger(__name__)


@dataclass
class TrainerState:
    step: int  # RL steps completed
    data_position: int  # prompts consumed from the training order
    optimizer: dict[str, Any]
    scheduler: dict[str, Any] | None
    rng: dict[str, Any]
    extra: dict[str, Any]


def rng_state() -> dict[str, Any]:
    """The global RNG states as tensors and plain values (``weights_only`` loadable)."""
    state: Any = np.random.get_state()  # noqa: NPY002  (user code may use the global RNG)
    name, keys, pos, has_gauss, gauss = state
    return {
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, keys, pos, has_gauss, gauss = state["numpy"]
    keys = np.asarray(keys.numpy() if isinstance(keys, torch.Tensor) else keys).astype(np.uint32)
    np.random.set_state((name, keys, pos, has_gauss, gauss))  # noqa: NPY002
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
    healthy: bool = True,
) -> Path:
    """Write checkpoint ``step`` atomically; keep the newest ``keep`` and the newest ``healthy``
    one.

    Many arguments: the parts of a checkpoint and how many to keep, each named at the call."""
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{PREFIX}{step:06d}"
    log.debug("writing checkpoint %s", final)
    tmp = root / f"{final.name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    if is_lora(model):
        # a merged copy: merging in place and un-merging later would not restore the weights bit
        # for bit (one model copy in memory while the checkpoint is written)
        merged = copy.deepcopy(model).merge_and_unload()
        merged.save_pretrained(tmp / "model", safe_serialization=True)
        model.save_pretrained(tmp / "adapter", safe_serialization=True)  # peft's adapter directory
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
    sizes = {
        str(f.relative_to(tmp)): f.stat().st_size for f in sorted(tmp.rglob("*")) if f.is_file()
    }
    meta = {"format": FORMAT, "step": step, "data_position": data_position, "healthy": healthy}
    (tmp / "meta.json").write_text(json.dumps(meta | {"files": sizes}, indent=1))
    _fsync_tree(tmp)
    if final.exists():  # re-saving the same step (for example after a resume)
        shutil.rmtree(final)
    os.replace(tmp, final)
    done = _saved_in(run_dir, complete=True)
    good = [p for p in done if _meta(p).get("healthy", True)][-1:]
    for old in done[:-keep]:
        if old not in good:
            shutil.rmtree(old)
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest intact checkpoint of ``run_dir``, or None. Newer ones that are damaged
    (``checkpoint_problem``) are skipped with a warning that says why."""
    for path in reversed(_saved_in(run_dir)):
        problem = checkpoint_problem(path)
        if problem is None:
            return path
        log.warning("checkpoint %s is damaged (%s); using the one before it", path, problem)
    return None


def checkpoint_problem(path: Path) -> str | None:
    """What is wrong with checkpoint ``path`` (None: nothing found): no or bad ``meta.json``, a file
    it lists missing or resized (format 1 lists none), a safetensors header that does not parse."""
    try:
        meta = json.loads((path / "meta.json").read_text())
    except FileNotFoundError:
        return "no meta.json: its save did not finish"
    except (OSError, ValueError) as exc:
        return f"meta.json unreadable: {exc}"
    if not isinstance(meta, dict) or not isinstance(meta.get("step"), int):
        return "meta.json has no step"
    for name, size in dict(meta.get("files") or {}).items():
        f = path / name
        if not f.is_file():
            return f"{name} is missing"
        if f.stat().st_size != size:
            return f"{name} has {f.stat().st_size} bytes, {size} were written"
    for f in sorted(path.rglob("*.safetensors")):
        if (problem := _safetensors_problem(f)) is not None:
            return f"{f.relative_to(path)}: {problem}"
    return None


def healthy_checkpoint(run_dir: Path, before: int) -> Path | None:
    """The newest intact checkpoint of ``run_dir`` from before step ``before`` that was saved
    while the run was healthy (``meta.json`` "healthy"), or None."""
    for path in reversed(_saved_in(run_dir, complete=True)):
        meta = _meta(path)
        good = meta.get("step", before) < before and meta.get("healthy", True)
        if good and checkpoint_problem(path) is None:
            return path
    return None


def discard_newer(run_dir: Path, checkpoint: Path, why: str = "damaged") -> list[Path]:
    """Rename each checkpoint of ``run_dir`` newer than ``checkpoint`` to ``<name>.<why>`` (damaged,
    or left by a rollback), out of the way of redone steps and clean-up; returns the new names."""
    moved = []
    for p in _saved_in(run_dir):
        if p.name > checkpoint.name:
            target = p.with_name(f"{p.name}.{why}")
            if target.exists():
                shutil.rmtree(target)
            os.replace(p, target)
            moved.append(target)
    return moved


def load_trainer_state(checkpoint: Path) -> TrainerState:
    """The trainer state of ``checkpoint``, loaded with ``weights_only=True``."""
    path = Path(checkpoint) / "trainer_state.pt"
    try:
        raw = torch.load(path, weights_only=True)
    except pickle.UnpicklingError as exc:
        raise ValueError(
            f"{path} holds more than tensors and plain values, and loading it could run code; "
            f"it was not written by this version of treegrpo ({exc})"
        ) from None
    return TrainerState(**raw)


def _saved_in(run_dir: Path, complete: bool = False) -> list[Path]:
    """The checkpoint directories of ``run_dir`` (``_saved``), oldest first; ``complete``: only
    those with a ``meta.json``."""
    found = sorted(p for p in (Path(run_dir) / "checkpoints").glob(f"{PREFIX}*") if _saved(p))
    return [p for p in found if (p / "meta.json").exists()] if complete else found


def _saved(path: Path) -> bool:
    """A checkpoint directory (``step-000010``), not a save in progress (``.tmp``) or one set
    aside (``.damaged``, ``.rolled-back``)."""
    return path.is_dir() and re.fullmatch(rf"{PREFIX}\d+", path.name) is not None


def _meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _safetensors_problem(path: Path) -> str | None:
    """Whether ``path`` starts with a readable safetensors header whose tensors fit the file."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > size - 8:
                return "truncated header"
            header = json.loads(f.read(n))
        ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
    except (OSError, ValueError, struct.error, KeyError, TypeError, IndexError) as exc:
        return f"unreadable header ({type(exc).__name__}: {exc})"
    if 8 + n + max(ends, default=0) > size:
        return "truncated data"
    return None


def _fsync_tree(path: Path) -> None:
    """Flush every file of ``path`` to disk before the rename makes it visible."""
    for f in path.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
