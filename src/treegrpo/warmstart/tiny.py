"""The default run's warm start: a tiny Qwen2 with hand-built copying circuits (``induction``,
kept fixed) fitted to flawed demonstrations on worlds of their own (``demos``), its tokenizer
holding each name as one token (``search_tokenizer``). ``warm_start(cfg)`` builds it once per
configuration into ``<cache>/warmstart/<key>/`` (Hugging Face format; the key hashes every
setting and ``FORMAT_VERSION``). The aim, a policy that reads and searches right but answers
after one search too often, and its scores: docs/embedded.md, "The warm start".
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from treegrpo.agent.protocol import ToolProtocol
from treegrpo.embedded.demos import Demo, Flaws, build_demos, query_drills
from treegrpo.embedded.induction import induction_init
from treegrpo.embedded.search_tokenizer import name_ids, train_search_tokenizer
from treegrpo.embedded.synthetic import World, WorldConfig, make_world
from treegrpo.embedded.web import WEB_TOOLS, world_web
from treegrpo.engine.cpu.onednn import resolve_path
from treegrpo.engine.cpu.paths import LinearPath
from treegrpo.files import cache_entry, cached_dir
from treegrpo.models.tiny import tiny_qwen2
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.train.sft import SFTExample, train_sft

log = logging.getLogger(__name__)

FORMAT_VERSION = 8  # bump when a code change alters what a configuration builds
STATS_FILE = "warmstart.json"
# Where ``induction_init`` writes its circuits: the (tied) embedding and layers 0-1 attention.
# SFT keeps them fixed, and so does the embedded job's RL (``ModelConfig.frozen``).
CIRCUIT_PARAMS = ("model.embed_tokens", "model.layers.0.self_attn", "model.layers.1.self_attn")


@dataclass(frozen=True)
class WarmStartConfig:
    """Every setting of the warm start (all of them go into its cache key)."""

    world_seed: int = 0
    """Seed of the RL train and eval worlds (``train_eval_worlds(world_seed)``); the
    demonstrations come from worlds of their own (``demo_worlds``)."""
    world: WorldConfig = field(default_factory=WorldConfig)
    """Sizes of the synthetic worlds."""
    demo_worlds: int = 4
    """Worlds the demonstrations come from (none is the RL train world or the eval world)."""
    seed: int = 0
    """Seed of the model initialization, the demonstration draw and the batch order."""
    vocab_size: int = 1024
    """BPE vocabulary size (it must hold every name of the pool as one token)."""
    hidden: int = 128
    """Model width."""
    layers: int = 4
    """Transformer layers."""
    heads: int = 2
    """Attention heads, each hidden / heads wide (``induction`` needs two of hidden / 2)."""
    rope_theta: float = 1e8
    """Rotary base: slow pairs for content matching, fast ones for relative positions."""
    induction: bool = True
    """Start from ``induction.induction_init``'s copying circuits, fixed in SFT
    (``CIRCUIT_PARAMS``): the model copies from its first update, not after thousands."""
    flaws: Flaws = field(default_factory=Flaws)
    """How often the demonstrations stop early, search vaguely or guess (``demos.Flaws``)."""
    n_demos: int = 3000
    """Demonstrations drawn from the demonstration worlds' questions."""
    max_obs_tokens: int = 160
    """Observation length limit in tokens (demonstrations and the runs that use this model)."""
    max_turns: int = 4
    """Searches per episode: enough for the 4-hop questions."""
    topk: int = 1
    """Passages per search: one passage states one fact, so the one the search ranks first is
    the fact, and reading it is copying its last name."""
    context_weight: float = 1.0
    """Loss weight of prompt and observation tokens beside the action tokens' (0: action tokens
    only, as RL): passages and questions give the layers above the circuits many more copying
    examples than the few action tokens do."""
    steps: int = 1600
    """SFT updates (at 800 the greedy start depended on the build's rounding)."""
    lr: float = 3e-3
    """Peak AdamW learning rate (linear warm-up, cosine decay to a tenth)."""
    warmup: int = 20
    """Warm-up updates."""
    max_batch_tokens: int = 1024
    """Padded tokens per SFT batch (sequences of similar length are batched together)."""
    web: bool = False
    """The web variant (``embedded.web``): demonstrations search for a page title, then visit
    the page to read the fact (``demos.WebFlawedAgent``); the tokenizer knows ``<visit>``."""
    skip: float = 0.3
    """Web variant: after a search, answer the entity in hand without visiting the page."""

    counted: bool = False
    """Thoughts that count the relations left ("1 left: Xa's rival"; ``oracle.plan_text``)."""

    query_drills: int = 0
    """Oracle episodes of 3- and 4-hop questions trained on their third and later queries only
    (``demos.query_drills``; search world only; docs/algorithm.md §9). 0: none."""

    linear: LinearPath = "auto"
    """Which path trains SFT's linear layers (``engine.cpu.onednn``): mkl (``F.linear``), onednn
    or auto (this CPU's, resolved in the cache key); their fp32 rounding differs, RL from their
    warm starts as much as two seeds' (docs/algorithm.md, "Learning that does not collapse")."""

    def key(self) -> dict[str, Any]:
        """Every setting, the linear path resolved on this CPU; the web variant's, ``counted``
        and ``query_drills`` only when on (older search-world warm starts keep their keys)."""
        fields = asdict(self)
        fields["linear"] = resolve_path(self.linear)
        if not self.web:
            del fields["web"], fields["skip"]
        if not self.counted:
            del fields["counted"]
        if not self.query_drills:
            del fields["query_drills"]
        return fields


def demo_worlds(cfg: WarmStartConfig) -> list[World]:
    """``cfg.demo_worlds`` worlds (same name pool, other facts): the warm start never sees a
    fact that RL trains on or that the evaluation asks about."""
    return [
        make_world(_DEMO_SEED + 1000 * cfg.world_seed + k, **asdict(cfg.world))
        for k in range(1, cfg.demo_worlds + 1)
    ]


_DEMO_SEED = 1_000_000  # extra demonstration worlds: seeds far from the train/eval pairs


def warm_start_dir(cfg: WarmStartConfig, cache_dir: str | Path | None = None) -> Path:
    """Where the model of ``cfg`` lives (whether or not it was built yet)."""
    return cache_entry(cache_dir, "warmstart", format=FORMAT_VERSION, **cfg.key())


def warm_start(
    cfg: WarmStartConfig = WarmStartConfig(),
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> Path:
    """The warm start's directory, built on first use (defaults: about 5 min on two cores)."""
    entry = warm_start_dir(cfg, cache_dir)
    meta = {"format": FORMAT_VERSION, "config": cfg.key()}
    hit = cached_dir(entry, lambda tmp: build(cfg, tmp, progress), meta)
    log.info("warm start %s (%s)", entry, "cached" if hit else "built")
    return entry


def build(cfg: WarmStartConfig, out_dir: Path, progress: bool = True) -> dict[str, Any]:
    """Tokenizer, model and ``STATS_FILE`` (demo mix, SFT losses, timings) into ``out_dir``."""
    t0 = time.perf_counter()
    tokenizer = train_search_tokenizer(cfg.vocab_size, web=cfg.web)
    demos = _demonstrations(cfg, tokenizer)
    t_demos = time.perf_counter()
    model = _model(cfg, tokenizer)
    log.info("warm start: SFT, %d updates", cfg.steps)
    losses = train_sft(
        model,
        [SFTExample(d.ids, d.mask) for d in demos],
        cfg,
        tokenizer.pad_token_id,
        progress,
        context_weight=cfg.context_weight,
        onednn=resolve_path(cfg.linear) == "onednn",
    )
    t_sft = time.perf_counter()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    stats = {
        "params": sum(p.numel() for p in model.parameters()),
        "vocab": len(tokenizer),
        "demos": {
            "n": len(demos),
            "tokens": sum(len(d.ids) for d in demos),
            "action_tokens": sum(m == 1 for d in demos for m in d.mask),
            "query_drills": cfg.query_drills,
            "flaws": {
                f: sum(f in d.flaws for d in demos) for f in ("early", "stop", "vague", "skip")
            },
            "mean_reward": sum(d.reward for d in demos) / len(demos),
        },
        "sft_loss_first": losses[0],
        "sft_loss_last": sum(losses[-10:]) / len(losses[-10:]),
        "sft_losses": losses,
        "seconds": {
            "demos": t_demos - t0,
            "sft": t_sft - t_demos,
            "total": time.perf_counter() - t0,
        },
        "threads": torch.get_num_threads(),
        "linear": resolve_path(cfg.linear),
    }
    (out_dir / STATS_FILE).write_text(json.dumps(stats, indent=2) + "\n")
    log.info("warm start built in %.0f s", stats["seconds"]["total"])
    return stats


def demonstrations(cfg: WarmStartConfig, oracle: bool = False) -> list[SFTExample]:
    """The demonstrations the warm start of ``cfg`` is fitted on, drawn again (seconds) as SFT
    examples; ``oracle``: only those without a flaw (``demos.Flaws``), the expert's own."""
    demos = _demonstrations(cfg, train_search_tokenizer(cfg.vocab_size, web=cfg.web))
    return [SFTExample(d.ids, d.mask) for d in demos if not (oracle and d.flaws)]


def _demonstrations(cfg: WarmStartConfig, tokenizer: Any) -> list[Demo]:
    """``cfg.n_demos`` flawed demonstrations on ``demo_worlds``, by BM25 (or their web pages)."""
    if cfg.query_drills and cfg.web:
        raise ValueError("query_drills: the search world's warm start only (web is on)")
    worlds = demo_worlds(cfg)
    log.info("warm start: %d demonstrations from %d worlds", cfg.n_demos, len(worlds))
    pairs = [(w, BM25Retriever(w.passages, use_cache=False)) for w in worlds]
    if cfg.web:
        protocol = ToolProtocol(tokenizer, cfg.max_obs_tokens, WEB_TOOLS)
        tools: list[Any] = [(w, world_web(r, w.passages, cfg.topk)) for w, r in pairs]
    else:
        protocol, tools = ToolProtocol(tokenizer, cfg.max_obs_tokens), pairs
    return build_demos(tools, protocol, cfg) + query_drills(pairs, protocol, cfg)


def _model(cfg: WarmStartConfig, tokenizer: Any) -> Any:
    """The tiny Qwen2 before SFT, its copying circuits written in and frozen if ``induction``."""
    model = tiny_qwen2(
        len(tokenizer),
        hidden=cfg.hidden,
        layers=cfg.layers,
        heads=cfg.heads,
        kv_heads=cfg.heads,
        head_dim=cfg.hidden // cfg.heads,
        rope_theta=cfg.rope_theta,
        seed=cfg.seed,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    if cfg.induction:
        induction_init(model, seed=cfg.seed, name_starts=name_ids(tokenizer))
        for n, p in model.named_parameters():
            if n.startswith(CIRCUIT_PARAMS):
                p.requires_grad_(False)
    return model
