"""One decode token per row through a Llama-family model, without transformers' plumbing.

``LeanDecoder`` computes what the model's own forward computes for ``q_len = 1`` and an additive
mask, calling the model's linear, MLP and rotary modules (so LoRA adapters, packed oneDNN
weights and any rope scaling still apply) and doing the rest with a few tensor ops per layer:

    x = h + o_proj(attn(rope(q_proj(n1(h))), cache ⊕ rope(k_proj(n1(h))), cache ⊕ v_proj(n1(h))))
    h' = x + mlp(n2(x));   logits = lm_head(norm(h_L))

with RMSNorm n(x) = w · x / sqrt(mean(x²) + eps) (Zhang & Sennrich 2019) and rotary position
embedding (Su et al. 2021) as the model defines them. Grouped-query attention runs on the
key/value heads: the n_rep query heads of a group become n_rep query rows. ``lean_decoder``
returns None for layers of another form. Why each part, and measurements: docs/library.md,
"CPU speed-ups".
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from treegrpo.core.partition import contiguous_partition
from treegrpo.engine.cpu.lora import Fused, fold

# Decoder layers computed as in the docstring; a model type joins once a test covers it.
SUPPORTED = frozenset({"qwen2", "llama"})
# Rope types whose inv_freq is fixed (transformers' "dynamic" and "longrope" rescale it with the
# sequence length, so a table built for the longest position would differ from a step's own).
STATIC_ROPE = frozenset({"default", "linear", "llama3"})
# The fixed cost of one attention call, in bytes of KV it could have read instead (~15 µs at the
# ~10 GB/s one core streams on these CPUs); see attention_spans.
CALL_BYTES = 150_000


def lean_decoder(model: Any) -> LeanDecoder | None:
    """A ``LeanDecoder`` for ``model`` (peft unwrapped), or None where this file cannot reproduce
    its architecture exactly."""
    config = model.config
    if getattr(config, "model_type", None) not in SUPPORTED:
        return None
    if getattr(model, "hf_device_map", None):  # accelerate hooks move tensors between devices
        return None
    if any(t != "full_attention" for t in getattr(config, "layer_types", None) or []):
        return None
    inner = getattr(model, "model", None)
    needed = ("embed_tokens", "layers", "norm", "rotary_emb")
    if inner is None or not all(hasattr(inner, n) for n in needed):
        return None
    return LeanDecoder(model)


class LeanDecoder:
    """``decoder(ids, bias, pos, cache)`` → next-token logits (b, V), as ``model(...)`` would give.
    ids: (b, 1); bias: (b, 1, 1, n) additive mask over the n = cached + 1 columns, or None for all;
    pos: (b, 1) position ids; cache: a ``DynamicCache`` whose layers take the new column with
    ``update``. Call ``prepare`` first, and again whenever the weights may have changed."""

    def __init__(self, model: Any) -> None:
        inner = model.model
        self.embed = inner.embed_tokens
        self.layers = list(inner.layers)
        self.norm = inner.norm
        self.rotary = inner.rotary_emb
        self.lm_head = model.lm_head
        config = model.config
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        column = 2 * config.num_key_value_heads * head_dim * model.dtype.itemsize  # K, V: a row
        self.call_overhead = max(1, CALL_BYTES // column)  # in row-columns
        # per layer: fused q/k/v and gate/up products, and o and down with LoRA folded in, or
        # None where a part does not fold into one product (see _fuse)
        self.qkv = [_fuse(la.self_attn, ("q_proj", "k_proj", "v_proj")) for la in self.layers]
        self.o = [_fuse(la.self_attn, ("o_proj",)) for la in self.layers]
        self.gate_up = [_fuse(la.mlp, ("gate_proj", "up_proj")) for la in self.layers]
        self.down = [_fuse(la.mlp, ("down_proj",)) for la in self.layers]
        rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
        rope_type = (rope or {}).get("rope_type", (rope or {}).get("type", "default"))
        self._static_rope = rope_type in STATIC_ROPE
        self._rope: tuple[torch.Tensor, torch.Tensor] | None = None  # cos, sin: (P, D) each

    def prepare(self, packed: bool, positions: int = 0) -> None:
        """Bring the fused weights in step with the model's (once per batch of decode steps), packed
        for oneDNN if ``packed``; with ``positions`` > 0 (static rope types), tabulate cos and sin
        for positions below it (0: each step calls the rotary module)."""
        for f in (*self.qkv, *self.o, *self.gate_up, *self.down):
            if f is not None:
                f.refresh(packed)
        if not self._static_rope or positions <= 0:
            self._rope = None
        else:
            device = self.embed.weight.device
            table = self._rope
            if table is not None and table[0].shape[0] >= positions and table[0].device == device:
                return
            n = -(-positions // 1024) * 1024  # in whole 1024s, so growing contexts rarely rebuild
            pos = torch.arange(n, device=device)[None]  # (1, P)
            probe = torch.zeros(1, n, 1, dtype=self.embed.weight.dtype, device=device)
            cos, sin = self.rotary(probe, pos)  # (1, P, D) each
            self._rope = cos[0], sin[0]

    def __call__(
        self,
        ids: torch.Tensor,
        bias: torch.Tensor | None,
        pos: torch.Tensor,
        cache: DynamicCache,
        spans: Sequence[tuple[int, int, int]] | None = None,
    ) -> torch.Tensor:
        """``spans``: attend in row ranges (see ``attention_spans``); None = one call."""
        b = ids.shape[0]
        h = self.embed(ids)  # (b, 1, E)
        if self._rope is not None:
            cos, sin = self._rope[0][pos], self._rope[1][pos]  # (b, 1, D) each
        else:
            cos, sin = self.rotary(h, pos)
        cos, sin = cos[:, None], sin[:, None]  # (b, 1, 1, D), broadcast over heads
        products = zip(self.qkv, self.o, self.gate_up, self.down, strict=True)
        for layer, kv, fused in zip(self.layers, cache.layers, products, strict=True):
            # the fused products that hold a weight now; None: call the modules
            qkv, o_proj, gate_up, down = (f if f is not None and f.ready else None for f in fused)
            att = layer.self_attn
            x = _rms_norm(h, layer.input_layernorm)
            d = att.head_dim
            if qkv is not None:  # rope on the q and k heads side by side
                qk, v = qkv(x, split=qkv.sizes[0] + qkv.sizes[1])
                qk = _rope(qk.reshape(b, -1, 1, d), cos, sin)  # (b, Hq + Hkv, 1, D)
                hq = qkv.sizes[0] // d
                q, k = qk[:, :hq], qk[:, hq:]  # (b, Hq, 1, D), (b, Hkv, 1, D)
            else:
                q = _rope(att.q_proj(x).reshape(b, -1, 1, d), cos, sin)  # (b, Hq, 1, D)
                k = _rope(att.k_proj(x).reshape(b, -1, 1, d), cos, sin)  # (b, Hkv, 1, D)
                v = att.v_proj(x)
            v = v.reshape(b, -1, 1, d)  # (b, Hkv, 1, D)
            keys, values = kv.update(k, v)  # type: ignore[union-attr]  # (b, Hkv, n, D)
            hkv = keys.shape[1]
            q = q.view(b, hkv, -1, d)  # (b, Hkv, n_rep, D): a group's query heads as rows
            o = _attend(q, keys, values, bias, att.scaling, spans)  # (b, Hkv, n_rep, D)
            o = o.reshape(b, 1, -1)  # (b, 1, Hq·D), heads in order
            h = h + (o_proj(o)[0] if o_proj is not None else att.o_proj(o))
            x = _rms_norm(h, layer.post_attention_layernorm)
            if gate_up is not None:  # down(act(gate(x)) · up(x)), the Llama/Qwen2 MLP
                g, u = gate_up(x)
                a = layer.mlp.act_fn(g) * u
                h = h + (down(a)[0] if down is not None else layer.mlp.down_proj(a))
            else:
                h = h + layer.mlp(x)
        logits: torch.Tensor = self.lm_head(_rms_norm(h, self.norm))[:, -1]  # (b, V)
        return logits


def _fuse(module: Any, names: Sequence[str]) -> Fused | None:
    """The named projections of ``module`` as one ``Fused`` product, or None where one of them
    does not fold (then the decoder calls the modules). A single projection is fused only when
    it carries LoRA adapters: a plain one already runs as one product through its module."""
    parts = [getattr(module, n, None) for n in names]
    if any(p is None or fold(p) is None for p in parts):
        return None
    if len(parts) == 1 and type(parts[0]) is torch.nn.Linear:
        return None
    return Fused(parts)


def attention_spans(pads: Sequence[int], width: int, overhead: int) -> list[tuple[int, int, int]]:
    """Split the rows of a decode batch into contiguous ranges that attend separately. Row i has
    ``pads[i]`` padding columns (ascending) then ``width - pads[i]`` real ones; a call over rows [a,
    b) starts at column ``pads[a]`` and costs a fixed ``overhead`` (row-columns). Returns the ranges
    (a, b, first column) minimizing Σ (b − a)(width − pads[a]) + overhead (``core.partition``); the
    mask still hides the rest of the padding."""
    if any(x > y for x, y in itertools.pairwise(pads)):
        raise ValueError("pads must be ascending (rows longest first)")
    ranges = contiguous_partition(len(pads), lambda a, b: (b - a) * (width - pads[a]) + overhead)
    return [(a, b, pads[a]) for a, b in ranges]


def _attend(
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    bias: torch.Tensor | None,
    scale: float,
    spans: Sequence[tuple[int, int, int]] | None,
) -> torch.Tensor:
    """softmax(q kᵀ · scale + bias) v, over all rows at once or per span, skipping each span's
    leading columns (views, no copies). q (b, Hkv, n_rep, D); keys, values (b, Hkv, n, D)."""
    one = _attend_matmul if q.device.type == "cpu" and q.dtype == torch.float32 else _attend_sdpa
    if spans is None or (len(spans) == 1 and spans[0][2] == 0):
        return one(q, keys, values, bias, scale)
    parts = []
    for a, b, c in spans:
        span_bias = None if bias is None else bias[a:b, ..., c:]
        parts.append(one(q[a:b], keys[a:b, :, c:], values[a:b, :, c:], span_bias, scale))
    return torch.cat(parts)


def _attend_sdpa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, scale: float
) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)


def _attend_matmul(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, scale: float
) -> torch.Tensor:
    """The same attention as two batched products and a softmax, for CPU fp32: faster than SDPA's
    flash kernel at a query block of n_rep rows (docs/library.md, "CPU speed-ups")."""
    s = torch.matmul(q, k.transpose(-1, -2)).mul_(scale)  # (b, Hkv, n_rep, n)
    if bias is not None:
        s = s.add_(bias)
    return torch.matmul(torch.softmax(s, dim=-1), v)  # (b, Hkv, n_rep, D)


def _rms_norm(x: torch.Tensor, norm: Any) -> torch.Tensor:
    """The model's RMSNorm: normalized in fp32, cast back, then scaled by the weight."""
    if x.dtype == torch.float32:
        return F.rms_norm(x, norm.weight.shape, norm.weight, norm.variance_epsilon)
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    out: torch.Tensor = norm.weight * xf.to(x.dtype)
    return out


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding x·cos + rotate_half(x)·sin, rotate_half: (x1, x2) → (−x2, x1) over the
    last dimension's halves (the pairing of Llama-family models)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin
