"""The web warm start (``smollm2-web``): the protocol warm start's LoRA SFT on the web
demonstrations of ``web_demos`` (train split), merged and cached in ``<cache>/web/<key>/``. They
run on the offline wiki site in this process with the web presets' tools and limits
(configs/real-smollm2-web.yaml), so the tokens imitated are those RL samples after
(docs/real-model.md, "The web warm start").
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from treegrpo.agent.protocol import ToolProtocol
from treegrpo.data.web_questions import (
    all_web_questions,
    is_held_out,
    read_web_questions,
    web_questions,
)
from treegrpo.data.wiki import load_articles, split_of
from treegrpo.data.wiki_web import wiki_web
from treegrpo.warmstart.protocol import (
    ProtocolWarmStartConfig,
    cached_build,
    pooled_demos,
    tune_and_save,
)
from treegrpo.warmstart.web_demos import WebMix, build_web_demos, site_toolbox

log = logging.getLogger(__name__)

FORMAT_VERSION = 1  # bump when a code change alters what a configuration builds


@dataclass(frozen=True)
class WebWarmStartConfig:
    """Every setting of the web warm start (all of them go into its cache key)."""

    sft: ProtocolWarmStartConfig = field(
        default_factory=lambda: ProtocolWarmStartConfig(
            n_demos=1024, steps=300, warmup=10, max_batch_tokens=3072, max_obs_tokens=384
        )
    )
    """Demonstration count and SFT settings (the protocol warm start's): 1,024 demonstrations
    are 0.71M SmolLM2 tokens (about 480 in-snippet, 730 in-page, 950 link), so 300 batches of
    3,072 padded tokens are a little over one pass; ``max_obs_tokens``: the web presets'."""
    mix: WebMix = field(default_factory=WebMix)
    """Shares of the question kinds and of their variants (``web_demos``)."""
    topk: int = 3
    """Search results per search (the presets' data.topk)."""
    visit_chars: int = 1200
    """Characters of a visit's observation (the presets' data.visit_chars; < max_obs_tokens)."""
    max_turns: int = 4
    """Steps that may call a tool before the final step (the presets' data.max_turns)."""
    max_context: int = 3072
    """Longest demonstration in tokens, prompt included (the presets' data.max_context)."""
    held_out_share: float = 0.2
    """Share of the articles held out, as ``jobs.data.WEB_HELD_OUT`` splits wiki-web."""

    def key(self) -> dict[str, Any]:
        """Every setting, ``mix.read`` only when on (so builds without it keep their keys)."""
        settings = asdict(self)
        if not self.mix.read:
            del settings["mix"]["read"]
        return settings


def web_warm_start(
    base: str | Path,
    cfg: WebWarmStartConfig = WebWarmStartConfig(),
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> Path:
    """The directory of ``base`` warm-started on web demonstrations, built on first use."""
    return cached_build("web", base, cfg, FORMAT_VERSION, build, cache_dir, progress)


def build(
    base: Path, cfg: WebWarmStartConfig, out_dir: Path, progress: bool = True
) -> dict[str, Any]:
    """Web demonstrations on the train split, then LoRA SFT of ``base``, merged into ``out_dir``."""
    log.info("web warm start of %s: building it once (cached under %s)", base, out_dir.parent)
    tokenizer = AutoTokenizer.from_pretrained(base)
    site = wiki_web()
    tools = site_toolbox(site, cfg.topk, cfg.visit_chars)
    protocol = ToolProtocol(tokenizer, cfg.sft.max_obs_tokens, tools)
    train_uids = {q.uid for q in web_questions(held_out_share=cfg.held_out_share)[0]}
    questions = [w for w in all_web_questions() if w.question.uid in train_uids]
    titles = {a.index: a.title for a in load_articles()}

    held_out = partial(is_held_out, seed=0, share=cfg.held_out_share)

    def train_side(i: int) -> bool:  # of both the web and the reader splits
        return split_of(titles[i]) == "train" and not held_out(titles[i])

    if cfg.mix.read:  # reworded ones
        questions += [w for w in read_web_questions() if all(map(train_side, w.touches))]
    log.info("web warm start: %d demonstrations through %s", cfg.sft.n_demos, site.public_url)
    demos = build_web_demos(
        questions,
        titles,
        tools,
        protocol,
        cfg.sft.n_demos,
        cfg.mix,
        seed=cfg.sft.seed,
        max_turns=cfg.max_turns,
        max_context=cfg.max_context,
        held_out=held_out,
    )
    every, about = pooled_demos("web", cfg, demos)
    about["mean_reward"] = sum(d.reward for d in every) / len(every)
    return tune_and_save(base, tokenizer, every, cfg.sft, out_dir, progress, about)
