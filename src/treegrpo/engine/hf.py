"""A generation engine on transformers for agent steps, with a prefix KV cache. ``HFEngine.step``:

1. prefill: each row's pending tokens (a prompt, or the last action token and an observation) on
   its cached context, in chunks (``engine.chunks``); the last pending token's logits give the
   first new token;
2. decode: all rows in one batch, one token per forward, a row leaving as soon as its step ends
   (a step-end tag, an end-of-sequence token, its token limit).

``fork`` (context + pending[:-1]) is where an expansion resumes; ``end`` (everything but the last
sampled token) where the episode continues. ``reuse_cache=False`` re-computes every step's whole
context, like the authors' code. A prefill chunk (b rows, C cached columns, P new columns):

    cache columns  [ zeros … | context_i ]     right-aligned, masked where zero
    new columns    [ pad … | pending_i ]       right-aligned, so logits_to_keep=1 suffices

Explicit position ids hide the padding from the model (a test compares plain forwards).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from treegrpo.engine.base import (
    Finish,
    Requests,
    StepRequest,
    StepResult,
    Stopper,
    special_ids,
    state_dict_of,
    token_limits,
    unwrap_peft,
)
from treegrpo.engine.cache import assemble_cache, keep_rows
from treegrpo.engine.chunks import prefill_chunks
from treegrpo.engine.cpu import speedups
from treegrpo.engine.cpu.lean import SUPPORTED, LeanDecoder, attention_spans, lean_decoder
from treegrpo.engine.cpu.speedups import CpuSpeedups
from treegrpo.engine.prefix import shared_prefix_groups
from treegrpo.engine.sampling import SamplingParams, sample, stream_uniforms
from treegrpo.engine.segments import Segment


@dataclass
class _Row:
    index: int
    context: Segment  # cached part (the empty root when the cache is off)
    feed: list[int]  # tokens computed in this call's prefill
    limit: int
    feed_kv: torch.Tensor | None = None  # (layers, 2, H, len(feed), D)
    prefill_width: int = 0
    tokens: list[int] = field(default_factory=list)  # sampled so far
    logprobs: list[float] = field(default_factory=list)


class HFEngine:
    """Agent-step generation with any transformers causal LM (full attention layers;
    docs/library.md, "The engine" and "CPU speed-ups").

    stopper: decides step ends (``agent.stops.StepStopper``); reuse_cache: keep KV between steps and
    branches; max_prefill_tokens: positions per prefill forward; pad_waste: the share of a prefill
    forward that may go to padding (``engine.chunks``); min_shared_prefix: the shortest start
    several rows share that ``prefill`` computes once (``engine.prefix``; 0 = never; cache on only).
    A peft model runs through the model it wraps (the wrapper's ``forward(**kwargs)`` would hide
    ``logits_to_keep``). cpu_speedups: None = where the model is on CPU; within it packed_linear
    (None = ``engine.cpu.onednn.engine_mode``), lean_decode (None = where supported) and fold_lora
    (None = on) are for benchmarks and tests.

    Many arguments: one per setting of the engine, each named at the call; a settings object would
    only move them."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        stopper: Stopper | None = None,
        eos_ids: Sequence[int] | None = None,
        reuse_cache: bool = True,
        max_prefill_tokens: int = 16384,
        pad_waste: float = 0.05,
        packed_linear: bool | Literal["decode"] | None = None,
        lean_decode: bool | None = None,
        min_shared_prefix: int = 16,
        cpu_speedups: bool | None = None,
        fold_lora: bool | None = None,
    ) -> None:
        self.model = model = unwrap_peft(model)
        self.stopper = stopper
        self.reuse_cache = reuse_cache
        self.max_prefill_tokens = max_prefill_tokens
        self.pad_waste = pad_waste
        self.min_shared_prefix = min_shared_prefix
        self._att_per_token = _attention_per_token(model)
        self.cpu_speedups = speedups.enabled(model, cpu_speedups)
        if not self.cpu_speedups and any([packed_linear, lean_decode, fold_lora]):
            raise ValueError("packed_linear, lean_decode and fold_lora need cpu_speedups on")
        self._cpu: CpuSpeedups | None = None
        self._lean: LeanDecoder | None = None
        if self.cpu_speedups:
            self._cpu = CpuSpeedups.attach(model, packed=packed_linear, fold_lora=fold_lora)
            self._lean = lean_decoder(model) if lean_decode is not False else None
            if lean_decode and self._lean is None:
                raise ValueError(
                    f"lean_decode supports model types {sorted(SUPPORTED)} with full attention; "
                    f"this model is {getattr(model.config, 'model_type', None)!r}"
                )
        self.eos_ids, self.pad_id = special_ids(model, tokenizer, eos_ids)
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = "logits_to_keep" in params
        probe = DynamicCache(config=model.config)
        self._n_layers = len(probe.layers) or model.config.get_text_config().num_hidden_layers
        full_attention = all(type(la) is DynamicLayer for la in probe.layers)
        # Decode can then hand SDPA its additive mask itself (see _DecodeMask).
        sdpa = getattr(model.config, "_attn_implementation", None) == "sdpa"
        self._sdpa_bias = self.cpu_speedups and bool(probe.layers) and full_attention and sdpa
        if reuse_cache and not full_attention:
            raise ValueError(
                "reuse_cache needs full-attention layers; this model has sliding-window or other "
                "cache layers. Use reuse_cache=False."
            )

    @property
    def device(self) -> torch.device:
        device: torch.device = next(self.model.parameters()).device
        return device

    def root(self) -> Segment:
        return Segment(None, [])

    @torch.inference_mode()
    def prefill(
        self, contexts: Sequence[Segment], tokens: Sequence[list[int]]
    ) -> tuple[list[Segment], list[int]]:
        """``Engine.prefill``; with the cache off, only records the tokens (steps compute them)."""
        pairs = zip(contexts, tokens, strict=True)
        rows = [_Row(i, c, list(t), 0) for i, (c, t) in enumerate(pairs)]
        shared_cost = [0] * len(rows)
        if self.reuse_cache:
            # a radix tree: rows that share a start may share more of what follows it
            while self.min_shared_prefix > 0 and self._share_prefixes(rows, shared_cost):
                pass
            if any(r.feed for r in rows):
                self._prefill([r for r in rows if r.feed])
        cost = [r.prefill_width + c for r, c in zip(rows, shared_cost, strict=True)]
        return [r.context.extend(r.feed, r.feed_kv) for r in rows], cost

    @torch.inference_mode()
    def step(
        self, requests: Requests, params: SamplingParams, generator: torch.Generator | None = None
    ) -> list[StepResult]:
        """``Engine.step``."""
        results: list[StepResult | None] = [None] * len(requests)
        live, active = [], []
        limits = token_limits(requests, params)
        for i, (req, limit) in enumerate(zip(requests, limits, strict=True)):
            if self.reuse_cache:
                r = _Row(i, req.context, list(req.pending), limit)
            else:  # re-compute the whole context, as if nothing were cached
                r = _Row(i, self.root(), req.context.context_tokens() + req.pending, limit)
            if limit <= 0:  # no room left in the context: the step ends before it starts
                results[i] = self._result(r, req, "length")
            else:
                live.append(r)
        if live:
            last_logits = self._prefill(live)  # (b, V)
            tok, lp = sample(last_logits, params, generator, _uniforms(live, requests, params))
            for r, t, p in zip(live, tok.tolist(), lp.tolist(), strict=True):
                r.tokens, r.logprobs = [t], [p]
                finish = self._finish(r)
                if finish is None:
                    active.append(r)
                else:
                    results[r.index] = self._result(r, requests[r.index], finish)
        if active:
            with self._cpu.decoding() if self._cpu is not None else nullcontext():
                self._decode(active, requests, params, generator, results)
        return [r for r in results if r is not None]

    def update_weights(self, weights: torch.nn.Module | Mapping[str, torch.Tensor]) -> None:
        """Generate with these weights from now on: the engine's own model is used in place (no
        copy); another module or a state dict is loaded into it. Segments made before are stale."""
        if isinstance(weights, torch.nn.Module) and unwrap_peft(weights) is self.model:
            return
        with torch.no_grad():
            self.model.load_state_dict(state_dict_of(weights))

    def reset_prefix_cache(self) -> None:
        """Nothing to forget: the KV cache lives in the segments the caller holds."""

    def _share_prefixes(self, rows: list[_Row], cost: list[int]) -> bool:
        """Compute once each start of at least ``min_shared_prefix`` tokens that several rows on the
        same context share (``engine.prefix``): it becomes their context and their feeds shrink to
        what follows. Adds to ``cost`` each row's even share; False if nothing was shared."""
        by_context: dict[int, list[_Row]] = {}
        for r in rows:
            by_context.setdefault(id(r.context), []).append(r)
        heads: list[tuple[_Row, list[_Row]]] = []
        for members in by_context.values():
            groups = shared_prefix_groups([r.feed for r in members], self.min_shared_prefix)
            for idx, n in groups:
                group = [members[i] for i in idx]
                heads.append((_Row(-1, group[0].context, group[0].feed[:n], 0), group))
        if not heads:
            return False
        self._prefill([h for h, _ in heads])
        for head, group in heads:
            seg = head.context.extend(head.feed, head.feed_kv)
            share, extra = divmod(head.prefill_width, len(group))
            for j, r in enumerate(group):
                r.context, r.feed = seg, r.feed[len(head.feed) :]
                cost[r.index] += share + (j < extra)
        return True

    def _finish(self, r: _Row) -> Finish | None:
        if self.stopper is not None and self.stopper.hit(r.tokens):
            return "stop"
        if r.tokens[-1] in self.eos_ids:
            return "eos"
        if len(r.tokens) >= r.limit:
            return "length"
        return None

    def _result(
        self,
        r: _Row,
        req: StepRequest,
        finish: Finish,
        tail_kv: torch.Tensor | None = None,
        decode_steps: int = 0,
    ) -> StepResult:
        """Build the result from ``r.tokens``; ``tail_kv`` is the KV of the last pending token
        and tokens[:-1] when decoding ran (None: no decode step, or the cache is off)."""
        base = r.context if self.reuse_cache else req.context
        pending = r.feed if self.reuse_cache else req.pending
        kv = r.feed_kv if self.reuse_cache else None
        fork = base.extend(pending[:-1], None if kv is None else kv[:, :, :, :-1])
        if tail_kv is None and kv is not None:
            tail_kv = kv[:, :, :, -1:]
        end = fork.extend([pending[-1], *r.tokens[:-1]], tail_kv)
        reused = r.context.length if self.reuse_cache else 0  # the cached context it read
        processed = r.prefill_width + decode_steps
        return StepResult(r.tokens, r.logprobs, finish, fork, end, processed, reused)

    def _forward(
        self, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, cache: DynamicCache
    ) -> torch.Tensor:
        kwargs: dict[str, Any] = {self._cache_kw: cache, "use_cache": True}
        if self._keep_kw:
            kwargs["logits_to_keep"] = 1
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, **kwargs)
        logits: torch.Tensor = out.logits[:, -1]  # (b, V)
        return logits

    def _prefill(self, rows: list[_Row]) -> torch.Tensor:
        """Compute every row's feed on top of its context; sets feed_kv and prefill_width and
        returns the logits after each row's last feed token, (len(rows), V) in row order."""
        feeds, contexts = [len(r.feed) for r in rows], [r.context.length for r in rows]
        limits = (self._att_per_token, self.max_prefill_tokens, self.pad_waste)
        logits: dict[int, torch.Tensor] = {}  # row index → its (V,) logits
        for chunk in prefill_chunks(feeds, contexts, *limits):
            logits.update(zip(chunk, self._prefill_chunk([rows[i] for i in chunk]), strict=True))
        return torch.stack([logits[i] for i in range(len(rows))])

    def _prefill_chunk(self, rows: list[_Row]) -> torch.Tensor:
        dev = self.device
        b = len(rows)
        parts = [r.context.kv_parts() for r in rows]
        p = max(len(r.feed) for r in rows)
        cache, c = assemble_cache(parts, p, self.model.config, self._n_layers)
        mask = torch.zeros(b, c + p, dtype=torch.long, device=dev)
        ids = torch.full((b, p), self.pad_id, dtype=torch.long, device=dev)
        pos = torch.zeros(b, p, dtype=torch.long, device=dev)
        for i, (r, kv) in enumerate(zip(rows, parts, strict=True)):
            n_ctx = sum(k.shape[3] for k in kv)
            n = len(r.feed)
            mask[i, c - n_ctx : c] = 1
            mask[i, c + p - n :] = 1
            ids[i, p - n :] = torch.tensor(r.feed, device=dev)
            pos[i, p - n :] = torch.arange(n_ctx, n_ctx + n, device=dev)
        logits = self._forward(ids, mask, pos, cache)
        for i, r in enumerate(rows):
            r.feed_kv = _row_kv(cache, i, c + p - len(r.feed), c + p)
            r.prefill_width = p
        return logits

    def _decode(
        self,
        rows: list[_Row],
        requests: Requests,
        params: SamplingParams,
        generator: torch.Generator | None,
        results: list[StepResult | None],
    ) -> None:
        """One token per forward for all rows until each row's step ends. The mask is built once and
        sliced; a leaving row's KV is read once and the rows that stay move up in place; the model
        sees exactly what a plainer loop would give it."""
        dev = self.device
        # longest first: rows of similar length sit together, so attention can skip padding
        rows = sorted(rows, key=lambda r: -(r.context.length + len(r.feed)))
        full = []
        for r in rows:
            assert r.feed_kv is not None
            full.append([*r.context.kv_parts(), r.feed_kv])
        room = max(r.limit for r in rows)
        cache, width = assemble_cache(full, room, self.model.config, self._n_layers)
        pads = [width - sum(k.shape[3] for k in parts) for parts in full]
        del full
        # SDPA wants the mask in the query's dtype, which autocast would change
        plain = not torch.is_autocast_enabled(dev.type)
        lean = self._lean if plain else None
        bias = plain and (self._sdpa_bias or lean is not None)
        mask = _DecodeMask(pads, width + room, self.model.dtype if bias else None, dev)
        starts = [r.context.length + len(r.feed) for r in rows]  # each row's next position
        lengths = torch.tensor(starts, device=dev)
        last = torch.tensor([[r.tokens[-1]] for r in rows], device=dev)
        spans = _spans(lean, mask.pads, width + 1)
        if lean is not None:
            packed = self._cpu is not None and bool(self._cpu.packed)
            lean.prepare(packed=packed, positions=max(starts) + room)
        steps = 0
        while rows:
            steps += 1
            pos = (lengths + (steps - 1))[:, None]
            if lean is not None:
                logits = lean(last, mask.additive(width + steps), pos, cache, spans)
            else:
                logits = self._forward(last, mask.columns(width + steps), pos, cache)
            tok, lp = sample(logits, params, generator, _uniforms(rows, requests, params))
            keep = []
            for i, (r, t, p) in enumerate(zip(rows, tok.tolist(), lp.tolist(), strict=True)):
                r.tokens.append(t)
                r.logprobs.append(p)
                finish = self._finish(r)
                if finish is None:
                    keep.append(i)
                    continue
                # KV of the last pending token (column width - 1) and of tokens[:-1]
                end_kv = _row_kv(cache, i, width - 1, width + steps) if self.reuse_cache else None
                results[r.index] = self._result(r, requests[r.index], finish, end_kv, steps)
            last = tok[:, None]  # (b, 1)
            if len(keep) < len(rows):
                rows = [rows[i] for i in keep]
                if not rows:
                    break
                idx = torch.tensor(keep, device=dev)
                keep_rows(cache, keep)
                mask.keep(keep)
                spans = _spans(lean, mask.pads, width + steps)
                lengths, last = lengths[idx], last[idx]


class _DecodeMask:
    """Which cache columns each decode row attends to, built once at full width: row i has
    ``pads[i]`` padding columns, then its context, then every decoded column. ``columns(n)`` gives
    the first n columns: with ``dtype`` set (SDPA on full-attention layers) as the additive (b, 1,
    1, n) mask that transformers and SDPA would build at every forward (0 attended, -inf on
    padding), without padding as the all-ones 2-D mask that transformers drops."""

    def __init__(
        self, pads: list[int], width: int, dtype: torch.dtype | None, device: torch.device
    ) -> None:
        self.pads = list(pads)  # padding columns per row, ascending (rows longest first)
        columns = torch.arange(width, device=device)[None]  # (1, W)
        self.mask = (columns >= torch.tensor(pads, device=device)[:, None]).long()  # (b, W)
        self.bias = None
        if dtype is not None:
            bias = torch.zeros(len(pads), 1, 1, width, dtype=dtype, device=device)
            self.bias = bias.masked_fill(self.mask[:, None, None, :] == 0, float("-inf"))

    def additive(self, n: int) -> torch.Tensor | None:
        """The additive mask of the first n columns, or None when no row has padding."""
        return self.bias[..., :n] if self.bias is not None and any(self.pads) else None

    def columns(self, n: int) -> torch.Tensor:
        bias = self.additive(n)
        return self.mask[:, :n] if bias is None else bias

    def keep(self, rows: list[int]) -> None:
        idx = torch.tensor(rows, device=self.mask.device)
        self.pads = [self.pads[i] for i in rows]
        self.mask = self.mask[idx]
        if self.bias is not None:
            self.bias = self.bias[idx]


def _spans(
    lean: LeanDecoder | None, pads: list[int], width: int
) -> list[tuple[int, int, int]] | None:
    """The lean decoder's attention row ranges for rows with ``pads`` (None without it)."""
    return None if lean is None else attention_spans(pads, width, lean.call_overhead)


def _row_kv(cache: DynamicCache, row: int, start: int, stop: int) -> torch.Tensor:
    """(layers, 2, H, stop - start, D) copy of one row's cached columns [start, stop)."""
    layers: list[DynamicLayer] = cache.layers  # type: ignore[assignment]  # checked in __init__
    return torch.stack(
        [torch.stack([la.keys[row, :, start:stop], la.values[row, :, start:stop]]) for la in layers]  # type: ignore[index]
    )


def _attention_per_token(model: Any) -> float:
    """F_att / F_lin of ``engine.chunks``: one query-key pair's attention work (QKᵀ and the sum
    over V: 2 · heads · head_dim multiply-adds per layer) over one token's work in the weights
    outside the embeddings (one multiply-add per parameter)."""
    config = model.config.get_text_config()
    heads = getattr(config, "num_attention_heads", None)
    layers = getattr(config, "num_hidden_layers", None)
    if not heads or not layers:  # a shape we cannot read: chunk by feed padding alone
        return 0.0
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    params = {id(p): p.numel() for p in model.parameters()}
    for emb in (model.get_input_embeddings(), model.get_output_embeddings()):
        if emb is not None:
            params.pop(id(emb.weight), None)
    body: int = max(1, sum(params.values()))
    pairs: int = 2 * heads * head_dim * layers
    return pairs / body


def _uniforms(
    rows: Sequence[_Row], requests: Requests, params: SamplingParams
) -> torch.Tensor | None:
    """Each row's next draw from its request's stream (``StepRequest.seed``; the draw's number
    is the count of tokens the row has sampled), or None to draw from the step's generator."""
    seeds = [requests[r.index].seed for r in rows]
    if params.greedy or all(s is None for s in seeds):
        return None
    if any(s is None for s in seeds):
        raise ValueError("give every request of a step a seed, or none")
    counters = [len(r.tokens) for r in rows]
    return torch.from_numpy(stream_uniforms([s for s in seeds if s is not None], counters))
