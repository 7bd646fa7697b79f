"""The warm start of the default run: a tiny Qwen2 taught the search protocol by imitation.

``warm_start(cfg)`` builds, once per configuration, a tokenizer (``search_tokenizer``), a tiny
Qwen2 (``tiny.tiny_qwen2``) with hand-built copying circuits (``induction``) and scripted,
deliberately imperfect demonstrations on worlds of their own (``demos``), fits the model to them
with a loss on action tokens only (``sft``; the circuits stay fixed), and saves
model and tokenizer in Hugging Face format under ``<cache>/warmstart/<key>/`` (cache root
``$TREEGRPO_CACHE_DIR`` or ``~/.cache/treegrpo``). The key hashes every setting and
``FORMAT_VERSION``; the directory is written under a temporary name and renamed when complete,
so a crash never leaves a half-written model behind, and the next call just returns the path.

The aim is a policy that searches well for one hop and makes the scripted mistakes on longer
questions often enough that reinforcement learning has something to fix. Measured (BENCHMARKS.md):
it uses the protocol, copies names and quotes the fact it read (9–17% held-out EM with the
defaults, depending on rounding in training; 0% without the copying circuits). Load it with
``AutoModelForCausalLM.from_pretrained(path)`` and ``AutoTokenizer.from_pretrained(path)``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from treegrpo.data.synthetic import World, WorldConfig, make_world, train_eval_worlds
from treegrpo.tools.cache import cache_key, cached_dir, default_cache_root

log = logging.getLogger(__name__)

FORMAT_VERSION = 7  # bump when a code change alters what a configuration builds
STATS_FILE = "warmstart.json"
# Where ``induction_init`` writes its circuits: the (tied) embedding and layers 0-1 attention.
# SFT keeps them fixed, and so does the embedded job's RL (``ModelConfig.frozen``): measured,
# RL that trains them loses the copying within a few steps (sampled EM 5% → 0%).
CIRCUIT_PARAMS = ("model.embed_tokens", "model.layers.0.self_attn", "model.layers.1.self_attn")


@dataclass(frozen=True)
class WarmStartConfig:
    """Every setting of the warm start (all of them go into its cache key)."""

    world_seed: int = 0
    """Seed of the worlds (``train_eval_worlds(world_seed)``); demonstrations use the train one."""
    world: WorldConfig = field(default_factory=WorldConfig)
    """Sizes of the synthetic worlds."""
    demo_worlds: int = 8
    """Worlds the demonstrations come from (none is the RL train world or the eval world).
    With one small world a tiny model memorizes its names instead of learning to copy them."""
    seed: int = 0
    """Seed of the model initialization, the demonstration draw and the batch order."""
    vocab_size: int = 1536
    """BPE vocabulary size (the eight protocol tags are single tokens in it)."""
    hidden: int = 128
    """Model width."""
    layers: int = 4
    """Transformer layers."""
    heads: int = 2
    """Attention heads, each hidden/2 wide (``induction.induction_init`` needs that width)."""
    rope_theta: float = 1e8
    """Rotary base: slow pairs for content matching, fast ones for relative positions."""
    induction: bool = True
    """Start from the hand-built copying circuit of ``induction.induction_init`` (a previous-
    token head, an induction head and a name-start head). Without it the tiny model does not
    learn to copy unseen names within the warm start's budget (about 0% held-out EM after
    300–1,000 updates in session 2), against 9–17% with it (BENCHMARKS.md)."""
    two_token: float = 0.7
    """Weight of the induction head's second token of match (0: match one token)."""
    freeze_circuits: bool = True
    """Keep the embedding and the attention of layers 0-1 (where the circuits live) fixed
    during SFT, so its first large updates cannot wipe the circuits out."""
    n_demos: int = 2000
    """Demonstrations drawn from the train world's questions."""
    share_perfect: float = 0.55
    """Share of perfect oracle demonstrations."""
    share_vague: float = 0.15
    """Share with one vague query (no entity name) and a wrong answer after it."""
    share_skip: float = 0.15
    """Share that answers a bridge entity or a guess before the last hop."""
    share_early: float = 0.15
    """Share that answers a guess without searching."""
    max_obs_tokens: int = 160
    """Observation length limit in tokens (demonstrations and the runs that use this model)."""
    max_turns: int = 3
    """Searches per episode, as in the paper; enough for the 3-hop questions."""
    topk: int = 3
    """Passages per search."""
    steps: int = 700
    """SFT updates."""
    lr: float = 3e-3
    """Peak AdamW learning rate (linear warm-up, cosine decay to a tenth)."""
    warmup: int = 20
    """Warm-up updates."""
    max_batch_tokens: int = 4096
    """Padded tokens per SFT batch (sequences of similar length are batched together)."""

    def shares(self) -> dict[str, float]:
        return {
            "perfect": self.share_perfect,
            "vague": self.share_vague,
            "skip": self.share_skip,
            "early": self.share_early,
        }


def demo_worlds(cfg: WarmStartConfig) -> list[World]:
    """``cfg.demo_worlds`` worlds of their own, sharing no name with the RL train world or the
    eval world of ``train_eval_worlds(cfg.world_seed)``: the warm start never sees a question
    that RL trains on, so what RL gains on the train world is what the eval world measures."""
    train, evaluation = train_eval_worlds(cfg.world_seed, **asdict(cfg.world))
    avoid = train.name_words() | evaluation.name_words()
    return [
        make_world(_DEMO_SEED + 1000 * cfg.world_seed + k, avoid=avoid, **asdict(cfg.world))
        for k in range(1, cfg.demo_worlds + 1)
    ]


_DEMO_SEED = 1_000_000  # extra demonstration worlds: seeds far from the train/eval pairs


def warm_start_dir(cfg: WarmStartConfig, cache_dir: str | Path | None = None) -> Path:
    """Where the model of ``cfg`` lives (whether or not it was built yet)."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_root()
    return root / "warmstart" / cache_key(format=FORMAT_VERSION, **asdict(cfg))


def warm_start(
    cfg: WarmStartConfig = WarmStartConfig(),
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> Path:
    """The directory of the warm-started model for ``cfg``, built on first use (about five
    minutes on one CPU thread with the defaults), loaded from the cache afterwards."""
    entry = warm_start_dir(cfg, cache_dir)
    meta = {"format": FORMAT_VERSION, "config": asdict(cfg)}
    hit = cached_dir(entry, lambda tmp: build(cfg, tmp, progress), meta)
    log.info("warm start %s (%s)", entry, "cached" if hit else "built")
    return entry


def build(cfg: WarmStartConfig, out_dir: Path, progress: bool = True) -> dict[str, Any]:
    """Build the warm start into ``out_dir``: tokenizer and model (Hugging Face format) and
    ``warmstart.json`` with the demonstration mix, the SFT losses and the timings."""
    import torch

    from treegrpo.agent.protocol import SearchProtocol
    from treegrpo.models.demos import build_demos
    from treegrpo.models.induction import induction_init
    from treegrpo.models.search_tokenizer import name_start_ids, train_search_tokenizer
    from treegrpo.models.sft import SFTExample, train_sft
    from treegrpo.models.tiny import tiny_qwen2
    from treegrpo.tools.bm25 import BM25Retriever

    t0 = time.perf_counter()
    worlds = demo_worlds(cfg)
    tokenizer = train_search_tokenizer(cfg.vocab_size)
    protocol = SearchProtocol(tokenizer, cfg.max_obs_tokens)
    demos = build_demos(
        [(w, BM25Retriever(w.passages, use_cache=False)) for w in worlds],
        tokenizer,
        protocol,
        cfg.n_demos,
        cfg.shares(),  # type: ignore[arg-type]
        seed=cfg.seed,
        max_turns=cfg.max_turns,
        topk=cfg.topk,
    )
    t_demos = time.perf_counter()
    model = tiny_qwen2(
        len(tokenizer),
        hidden=cfg.hidden,
        layers=cfg.layers,
        heads=cfg.heads,
        kv_heads=cfg.heads,
        head_dim=cfg.hidden // 2,
        rope_theta=cfg.rope_theta,
        seed=cfg.seed,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    if cfg.induction:
        induction_init(
            model, seed=cfg.seed, name_starts=name_start_ids(tokenizer), two_token=cfg.two_token
        )
    frozen = _circuit_params(model) if cfg.induction and cfg.freeze_circuits else []
    for p in frozen:
        p.requires_grad_(False)
    losses = train_sft(
        model,
        [SFTExample(d.ids, d.mask) for d in demos],
        steps=cfg.steps,
        lr=cfg.lr,
        max_batch_tokens=cfg.max_batch_tokens,
        pad_id=tokenizer.pad_token_id,
        seed=cfg.seed,
        warmup=min(cfg.warmup, cfg.steps),
        progress=progress,
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
            "action_tokens": sum(sum(d.mask) for d in demos),
            "behaviours": {b: sum(d.behaviour == b for d in demos) for b in cfg.shares()},
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
    }
    (out_dir / STATS_FILE).write_text(json.dumps(stats, indent=2) + "\n")
    log.info("warm start built in %.0f s", stats["seconds"]["total"])  # type: ignore[index]
    return stats


def _circuit_params(model: Any) -> list[Any]:
    """The parameters that hold ``induction_init``'s circuits (names in ``CIRCUIT_PARAMS``)."""
    return [p for n, p in model.named_parameters() if n.startswith(CIRCUIT_PARAMS)]
