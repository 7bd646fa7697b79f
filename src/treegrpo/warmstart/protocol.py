"""A protocol warm start for a pretrained model: a short LoRA SFT on title demonstrations
(``reader_demos.build_title_demos``; train split only), merged, since SmolLM2 never writes a
valid step from the instruction alone and RL would have nothing to reinforce. Built once per
(base model, settings) into ``<cache>/protocol/<key>/`` (docs/real-model.md, "The protocol warm
start").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from treegrpo.agent.protocol import SearchProtocol
from treegrpo.data.wiki import wiki_corpus, wiki_questions
from treegrpo.embedded.demos import Demo
from treegrpo.files import cache_entry, cached_dir
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.train.sft import SFTExample, train_sft
from treegrpo.warmstart.reader_demos import build_title_demos

log = logging.getLogger(__name__)

FORMAT_VERSION = 1  # bump when a code change alters what a configuration builds
STATS_FILE = "protocol.json"
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class ProtocolWarmStartConfig:
    """Every setting of the protocol warm start (all of them go into its cache key)."""

    n_demos: int = 256
    """Demonstrations (one per wiki train question, in a seeded order)."""
    steps: int = 40
    """SFT updates."""
    lr: float = 2e-4
    """Peak AdamW learning rate of the LoRA adapters (warm-up, cosine decay to a tenth)."""
    warmup: int = 4
    """Warm-up updates."""
    lora_rank: int = 16
    """LoRA rank r."""
    lora_alpha: int = 32
    """LoRA scaling α."""
    max_batch_tokens: int = 2048
    """Padded tokens per SFT batch."""
    max_obs_tokens: int = 256
    """Observation length limit (the real preset's)."""
    seed: int = 0
    """Seed of the demonstration order, the adapters' initialization and the batch order."""


def protocol_warm_start(
    base: str | Path,
    cfg: ProtocolWarmStartConfig = ProtocolWarmStartConfig(),
    cache_dir: str | Path | None = None,
    progress: bool = True,
    questions: Any = None,
    tool: Any = None,
) -> Path:
    """The directory of ``base`` warm-started on the protocol, built on first use. ``questions``
    and ``tool``: the wiki train questions and BM25 over the wiki corpus unless given (then the
    caller keys the cache on them)."""
    make = partial(build, questions=questions, tool=tool)
    key = {"custom": questions is not None}
    return cached_build("protocol", base, cfg, FORMAT_VERSION, make, cache_dir, progress, **key)


def cached_build(
    kind: str,
    base: str | Path,
    cfg: Any,
    format_version: int,
    build: Callable[[Path, Any, Path, bool], object],
    cache_dir: str | Path | None = None,
    progress: bool = True,
    **key: Any,
) -> Path:
    """``<cache>/<kind>/<key>``, made by ``build(base, cfg, tmp, progress)`` on first use; the
    key hashes the format version, base path, ``key`` and ``cfg`` (``cfg.key()`` or its fields)."""
    config = cfg.key() if hasattr(cfg, "key") else asdict(cfg)
    meta = {"format": format_version, "base": str(Path(base).resolve()), "config": config}
    entry = cache_entry(cache_dir, kind, **meta, **key)
    cached_dir(entry, lambda tmp: build(Path(base), cfg, tmp, progress), meta)
    return entry


def build(
    base: Path,
    cfg: ProtocolWarmStartConfig,
    out_dir: Path,
    progress: bool = True,
    questions: Any = None,
    tool: Any = None,
) -> dict[str, Any]:
    """LoRA SFT of ``base`` on title demonstrations, merged and saved into ``out_dir``."""
    if questions is None or tool is None:
        questions, tool = wiki_questions("train"), BM25Retriever(wiki_corpus())
    tokenizer = AutoTokenizer.from_pretrained(base)
    protocol = SearchProtocol(tokenizer, cfg.max_obs_tokens)
    demos = build_title_demos(questions, tool, protocol, cfg.n_demos, seed=cfg.seed)
    if not demos:
        raise ValueError("protocol warm start: no question gave a demonstration")
    return tune_and_save(base, tokenizer, demos, cfg, out_dir, progress)


def tune_and_save(
    base: Path,
    tokenizer: Any,
    demos: Sequence[Demo],
    cfg: ProtocolWarmStartConfig,
    out_dir: Path,
    progress: bool = True,
    about: dict[str, Any] | None = None,
    model: Any = None,
) -> dict[str, Any]:
    """LoRA SFT of ``base`` on ``demos``, merged and saved with the tokenizer and ``STATS_FILE``
    (``about``, then the SFT statistics, which it returns) into ``out_dir``. ``model``: ``base``
    already loaded (the reader warm start probes it first), else loaded here; either way it is
    changed in place (adapters injected, trained and merged)."""
    torch.manual_seed(cfg.seed)
    if model is None:
        model = AutoModelForCausalLM.from_pretrained(base)
    targets = [t for t in LORA_TARGETS if any(n.endswith(t) for n, _ in model.named_modules())]
    lora = LoraConfig(
        r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, target_modules=targets, task_type="CAUSAL_LM"
    )
    model = get_peft_model(model, lora)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    losses = train_sft(model, [SFTExample(d.ids, d.mask) for d in demos], cfg, pad, progress)
    merged = model.merge_and_unload()
    merged.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    stats = {
        **(about or {}),
        "config": asdict(cfg),
        "base": str(base),
        "demos": len(demos),
        "demo_tokens": sum(len(d.ids) for d in demos),
        "sft_loss_first": losses[0],
        "sft_loss_last": sum(losses[-5:]) / len(losses[-5:]),
        "sft_losses": losses,
    }
    (out_dir / STATS_FILE).write_text(json.dumps(stats, indent=2) + "\n")
    return stats


def pooled_demos(
    kind: str, cfg: Any, demos: Mapping[str, Sequence[Demo]]
) -> tuple[list[Demo], dict[str, Any]]:
    """Every demonstration of ``demos`` (category → demonstrations) in order, and what
    ``STATS_FILE`` says first: ``{kind: asdict(cfg)}`` and the count per category; ValueError
    naming the ``kind`` of warm start ("reader", "web") when there is none."""
    every = [d for ds in demos.values() for d in ds]
    if not every:
        raise ValueError(f"{kind} warm start: no question gave a demonstration")
    log.info("%s warm start: LoRA SFT on %d demonstrations", kind, len(every))
    return every, {kind: asdict(cfg), "categories": {c: len(ds) for c, ds in demos.items()}}
