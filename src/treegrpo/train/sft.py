"""Supervised fine-tuning on masked token sequences, in length-grouped batches (``length_batches``):
the loss counts action tokens only, prompt and observation tokens are context (``weighted_nll``).
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from treegrpo.engine.cpu import speedups
from treegrpo.engine.cpu.speedups import CpuSpeedups
from treegrpo.train.head import logits_at

log = logging.getLogger(__name__)

IGNORE = -100  # label of a token without loss (the convention of transformers' LM heads)

Collated = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""A batch of demonstrations as ``collate`` gives it: ``input_ids``, ``action``, ``labels``."""


@dataclass(frozen=True)
class SFTExample:
    ids: list[int]  # (T,)
    mask: list[int]  # (T,) 1: trained (an action token); 0: context; -1: neither


def length_batches(
    lengths: Sequence[int], max_batch_tokens: int, rng: random.Random
) -> list[list[int]]:
    """Indices grouped into batches of similar length, each of at most ``max_batch_tokens``
    padded tokens (a longer sequence is a batch of its own), in a random order."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], rng.random()))
    batches: list[list[int]] = []
    for i in order:
        # sorted ascending: the newest sequence is the batch's longest
        if not batches or lengths[i] * (len(batches[-1]) + 1) > max_batch_tokens:
            batches.append([])
        batches[-1].append(i)
    rng.shuffle(batches)
    return batches


def right_pad(rows: Sequence[Any], fill: float, dtype: torch.dtype) -> torch.Tensor:
    """(b, T) ``rows`` (lists or arrays) padded on the right with ``fill`` to the longest's T."""
    out = torch.full((len(rows), max(len(r) for r in rows)), fill, dtype=dtype)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(r, dtype=dtype)
    return out


def collate(examples: Sequence[SFTExample], pad_id: int) -> Collated:
    """Right-padded ``input_ids`` (B, T), ``action`` (B, T), 1 on action tokens, and ``labels``
    (B, T): the token itself on every real position, ``IGNORE`` on padding and where the mask
    is -1 (no loss, not even as context)."""
    ids = right_pad([e.ids for e in examples], pad_id, torch.long)
    mask = right_pad([e.mask for e in examples], -1, torch.long)  # padding: -1, neither
    return ids, (mask == 1).long(), torch.where(mask >= 0, ids, IGNORE)


def weighted_nll(
    model: Any, ids: torch.Tensor, action: torch.Tensor, labels: torch.Tensor, context: float
) -> torch.Tensor:
    """Next-token NLL, mean over action tokens plus ``context`` × the mean over the other labelled
    tokens (0: action tokens only). ids, action, labels (B, T); position t predicts labels[t + 1];
    the LM head runs on the positions that count only (``train.head``)."""
    target = labels[:, 1:]  # (B, T-1)
    is_action = action[:, 1:].bool() & (target != IGNORE)  # (B, T-1)
    keep = is_action | ((target != IGNORE) & (context > 0))  # (B, T-1)
    logits = logits_at(model, ids, None, torch.nn.functional.pad(keep, (0, 1)))  # (n, V)
    nll = torch.nn.functional.cross_entropy(logits.float(), target[keep], reduction="none")
    on_action = is_action[keep]  # (n,)
    loss = nll[on_action].sum() / max(int(on_action.sum()), 1)
    if context > 0 and bool((~on_action).any()):
        loss = loss + context * nll[~on_action].mean()
    return loss


def lr_at(step: int, steps: int, warmup: int, floor: float = 0.1) -> float:
    """Linear warm-up, then cosine decay to ``floor`` × the peak."""
    if step < warmup:
        return (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(t, 1.0)))


class SFTSettings(Protocol):
    """The SFT fields of a warm start's configuration."""

    @property
    def steps(self) -> int: ...  # SFT updates
    @property
    def lr(self) -> float: ...  # peak AdamW learning rate
    @property
    def max_batch_tokens(self) -> int: ...  # padded tokens per batch
    @property
    def seed(self) -> int: ...  # seed of the batch order
    @property
    def warmup(self) -> int: ...  # warm-up updates


def train_sft(
    model: torch.nn.Module,
    examples: Sequence[SFTExample],
    cfg: SFTSettings,
    pad_id: int,
    progress: bool = True,
    context_weight: float = 0.0,
    cpu_speedups: bool | None = None,
    onednn: bool | None = None,
) -> list[float]:
    """``cfg.steps`` AdamW updates (no weight decay, gradient norm clipped at 1), one
    length-grouped batch each (data cycled, reshuffled every epoch), of ``weighted_nll`` with
    ``context_weight``, after ``min(cfg.warmup, cfg.steps)`` warm-up updates. ``cpu_speedups``:
    ``engine.cpu.speedups``'s switch (None: on for a model on CPU); ``onednn``: linear layers
    train on oneDNN (None: where ``engine.cpu.onednn.preferred``). Returns each step's loss."""
    if not examples:
        raise ValueError("no examples to train on")
    fast = speedups.enabled(model, cpu_speedups)
    if fast:
        CpuSpeedups.attach(model, trainable=onednn)
    elif onednn:
        raise ValueError("oneDNN linear layers are a CPU speed-up: cpu_speedups must be on")
    steps, warmup = cfg.steps, min(cfg.warmup, cfg.steps)
    rng = random.Random(f"treegrpo-sft:{cfg.seed}")
    torch.manual_seed(cfg.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s, steps, warmup))
    lengths = [len(e.ids) for e in examples]
    queue: list[list[int]] = []
    losses: list[float] = []
    every = max(1, min(100, steps // 10))  # log lines: about ten per run, at most every 100
    model.train()
    with _progress(progress, steps) as advance:
        for _ in range(steps):
            if not queue:
                queue = length_batches(lengths, cfg.max_batch_tokens, rng)
            ids, action, labels = collate([examples[i] for i in queue.pop()], pad_id)
            # No attention mask: the rows are right-padded, and in a causal LM a real token
            # never attends to the padding after it, so attention runs its causal kernel
            # (same numbers on real positions; padding carries no label).
            loss = weighted_nll(model, ids, action, labels, context_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            advance(losses[-1])
            if len(losses) % every == 0 or len(losses) == steps:
                recent = losses[-every:]
                log.info("SFT %d/%d: loss %.3f", len(losses), steps, sum(recent) / len(recent))
            if len(losses) % 50 == 0:
                speedups.release_memory(fast)
    model.eval()
    return losses


@contextmanager
def _progress(enabled: bool, total: int) -> Iterator[Callable[[float], None]]:
    """A rich progress bar with the running loss, or nothing."""
    if not enabled:
        yield lambda loss: None
        return
    bar = Progress(
        TextColumn("warm start SFT"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("loss {task.fields[loss]:.3f}"),
        TimeRemainingColumn(),
        transient=True,
    )
    with bar:
        task = bar.add_task("sft", total=total, loss=float("nan"))
        yield lambda loss: bar.update(task, advance=1, loss=loss)
