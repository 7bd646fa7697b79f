"""The reader warm start (``smollm2-reader``): the protocol warm start's LoRA SFT on the reading
demonstrations of ``reader_demos`` (train split), merged and cached in ``<cache>/reader/<key>/``.
What it demonstrates, and why: docs/real-model.md, "The reader warm start".
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import AutoModelForCausalLM, AutoTokenizer

from treegrpo.agent.protocol import SearchProtocol
from treegrpo.data.lead_questions import hop_plan, lead_questions, wh_questions
from treegrpo.data.types import Question
from treegrpo.data.wiki import load_articles, wiki_corpus, wiki_questions
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.warmstart.closed_book import closed_book, known_answer
from treegrpo.warmstart.protocol import (
    ProtocolWarmStartConfig,
    cached_build,
    pooled_demos,
    tune_and_save,
)
from treegrpo.warmstart.reader_demos import ReaderMix, build_reader_demos

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # bump when a code change alters what a configuration builds


@dataclass(frozen=True)
class ReaderWarmStartConfig:
    """Every setting of the reader warm start (all of them go into its cache key)."""

    sft: ProtocolWarmStartConfig = field(
        default_factory=lambda: ProtocolWarmStartConfig(n_demos=1280, steps=400, warmup=10)
    )
    """Demonstration count and SFT settings (the protocol warm start's): about one pass."""
    mix: ReaderMix = field(default_factory=ReaderMix)
    """Shares of the demonstration categories."""
    probe: int = 384
    """Single-hop non-cloze train questions asked closed-book for the direct demonstrations."""


def reader_warm_start(
    base: str | Path,
    cfg: ReaderWarmStartConfig = ReaderWarmStartConfig(),
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> Path:
    """The directory of ``base`` warm-started on reading demonstrations, built on first use."""
    return cached_build("reader", base, cfg, FORMAT_VERSION, build, cache_dir, progress)


def build(
    base: Path, cfg: ReaderWarmStartConfig, out_dir: Path, progress: bool = True
) -> dict[str, Any]:
    """Reading demonstrations over the train split, then LoRA SFT of ``base``, merged; the model
    is loaded once, probed closed-book as loaded, then tuned in place."""
    log.info("reader warm start of %s: building it once (cached under %s)", base, out_dir.parent)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base)
    protocol = SearchProtocol(tokenizer, cfg.sft.max_obs_tokens)
    titles = {a.index: a.title for a in load_articles()}
    single = lead_questions("train", hops=1)
    log.info("reader warm start: asking the base model %d questions closed-book", cfg.probe)
    known = probe(model, tokenizer, single, cfg.probe, cfg.sft.seed)
    log.info("reader warm start: %d demonstrations from BM25 episodes", cfg.sft.n_demos)
    demos = build_reader_demos(
        single,
        lead_questions("train", hops=2),
        wiki_questions("train"),
        BM25Retriever(wiki_corpus(split="train")),
        protocol,
        cfg.sft.n_demos,
        cfg.mix,
        subject=lambda q: titles.get(q.index, "") if isinstance(q.index, int) else "",
        plan=lambda q: hop_plan(q.uid),
        seed=cfg.sft.seed,
        known=known,
        wh=wh_questions("train"),
    )
    every, about = pooled_demos("reader", cfg, demos)
    about["closed_book"] = {  # how many probed questions the base model knew
        "asked": len(known),
        "known": sum(known_answer(s, q.golds) is not None for q, s in known),
    }
    return tune_and_save(base, tokenizer, every, cfg.sft, out_dir, progress, about, model)


def probe(
    model: Any, tokenizer: object, single: list[Question], n: int, seed: int
) -> list[tuple[Question, str]]:
    """``n`` non-cloze single-hop questions in a seeded order, each with ``model``'s closed-book
    sentence (greedy, no gradients, in eval mode: its weights stay as they are)."""
    pool = [q for q in single if not q.kind.startswith("cloze")]
    asked = random.Random(f"treegrpo-reader-probe:{seed}").sample(pool, min(n, len(pool)))
    if not asked:
        return []
    sentences = closed_book(model.eval(), tokenizer, [q.question for q in asked])
    return list(zip(asked, sentences, strict=True))
