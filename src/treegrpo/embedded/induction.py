"""Hand-built copying circuits in a fresh tiny Qwen2, so it can copy unseen names from step zero
(why, and what it buys: docs/embedded.md, "The warm start"). The warm start writes four heads
into the weights before SFT; SFT and RL keep them fixed (``warmstart.tiny.CIRCUIT_PARAMS``):

- The token embedding E fills the first half of the residual stream ("content" dims; zeros in
  the second half, so the tied output layer reads only E).
- Layer 0, head 0, previous-token head: constant query and key biases whose rotary phases make
  the score Σ_i a² cos((Δ − 1) θ_i) peak at distance Δ = 1 (fast pairs θ_i), and a value/output
  that copies the previous token's embedding into the second half ("previous" dims).
- Layer 0, head 1: the same at distance 2, the token two back rotated by a fixed random
  orthogonal matrix and scaled by ``TWO_TOKEN``, added to the "previous" dims, so the match
  rewards agreeing on two tokens ("born in" → X) over one.
- Layer 1, head 0, induction head: the query reads the current token's embedding (and the
  previous token's, rotated like head 1's), the key the "previous" dims, through one shared
  projection onto the slow rotary pairs (under 0.3 rad over 4,096 positions: the match ignores
  distance); the embedding found is added to the residual: A B … A → B.
- Layer 1, head 1, name-start head (optional): a shared direction u is added to the embeddings
  of name-initial tokens; the key reads u, and a constant rotary pair lowers the score by
  ``RECENCY`` nats per position, so the head copies the most recent name start.

Requirements: head_dim = hidden / 2, exactly two heads, at least two layers, no grouped-query
sharing (num_key_value_heads = num_attention_heads), tied embeddings and a large rotary
base (1e8 gives 15 slow pairs of 32 at head_dim 64, and still 8 fast ones).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

CONTEXT = 4096  # positions over which the slow pairs must stay aligned
EMBED_STD = 0.5  # of the content dims of the embedding
PREV_GAIN = 10.0  # a in the previous-token heads' biases (``previous_token_bias``)
N_FAST = 8  # the fast rotary pairs those biases use
MATCH_GAIN = 3.0  # of the induction head's shared query/key projection
COPY_GAIN = 4.0  # of the induction head's output
NAME_GAIN = 3.0  # of the direction u added to name-start embeddings
RECENCY = 0.5  # nats per position the name-start head's score falls with distance
TWO_TOKEN = 0.7  # the two-back head's scale in the previous dims


def previous_token_bias(
    inv_freq: torch.Tensor, n_fast: int, gain: float, distance: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Query and key biases, each (head_dim,), of a head that attends to the previous position.

    Rotary pair i is (i, i + d/2), rotated by m·θ_i at position m. With q̃_i = a·e^(−iθ_i) and
    k̃_i = a on the ``n_fast`` fastest pairs, the score between positions m and n is
    Σ_i a² cos((m − n − 1) θ_i): largest at m − n = 1 (``distance`` replaces the 1)."""
    half = inv_freq.shape[0]
    q, k = torch.zeros(2 * half), torch.zeros(2 * half)
    theta = inv_freq[:n_fast] * distance
    q[:n_fast] = gain * torch.cos(theta)
    q[half : half + n_fast] = -gain * torch.sin(theta)
    k[:n_fast] = gain
    return q, k


def induction_init(model: Any, seed: int = 0, name_starts: Sequence[int] = ()) -> Any:
    """Write the module docstring's circuits into ``model`` (a fresh Qwen2ForCausalLM), in place;
    ``name_starts``: the ids of name-initial tokens (empty: no name-start head)."""
    cfg = model.config
    hidden, d = cfg.hidden_size, cfg.head_dim
    if d * 2 != hidden or cfg.num_key_value_heads != cfg.num_attention_heads:
        raise ValueError("induction_init needs head_dim == hidden / 2 and no grouped-query heads")
    if cfg.num_attention_heads != 2 or cfg.num_hidden_layers < 2 or not cfg.tie_word_embeddings:
        raise ValueError("induction_init needs two heads, at least two layers and tied embeddings")
    c, half = d, d // 2  # content dims [0, c), previous-token dims [c, 2c)
    gen = torch.Generator().manual_seed(seed)
    inv_freq = model.model.rotary_emb.inv_freq.float().cpu()  # (d/2,), fastest first
    slow = [i for i in range(half) if float(inv_freq[i]) * CONTEXT < 0.3]
    if not slow:
        raise ValueError("rotary base too small: no slow pairs for content matching")
    with torch.no_grad():
        emb = model.model.embed_tokens.weight  # (V, hidden)
        emb.zero_()
        emb[:, :c] = torch.randn(emb.shape[0], c, generator=gen) * EMBED_STD
        # RMSNorm gives a content-only row norm sqrt(hidden); this restores the embedding scale.
        unscale = EMBED_STD * math.sqrt(c) / math.sqrt(hidden)

        a0 = model.model.layers[0].self_attn
        rot = torch.linalg.qr(torch.randn(c, c, generator=gen))[0]  # (c, c) orthogonal
        # head 0 copies the token at distance 1 as it is, head 1 the one at distance 2 rotated
        for head, out in ((0, torch.eye(c)), (1, rot * TWO_TOKEN)):
            own = slice(head * d, (head + 1) * d)
            _clear_head(a0, head, d)
            q, k = previous_token_bias(inv_freq, N_FAST, PREV_GAIN, distance=head + 1)
            a0.q_proj.bias[own], a0.k_proj.bias[own] = q, k
            a0.v_proj.weight[own, :c] = torch.eye(c) * unscale
            a0.o_proj.weight[c:, own] = out

        a1 = model.model.layers[1].self_attn
        _clear_head(a1, 0, d)
        rows = slow + [i + half for i in slow]
        proj = torch.linalg.qr(torch.randn(c, len(rows), generator=gen))[0].T  # (r, c)
        a1.q_proj.weight[rows, :c] = proj * MATCH_GAIN  # current token
        a1.k_proj.weight[rows, c:] = proj * MATCH_GAIN  # previous token
        # the query adds the previous token, rotated like the key's second one
        a1.q_proj.weight[rows, c:] = proj @ rot * TWO_TOKEN * MATCH_GAIN
        # Both halves are filled at layer 1, so RMSNorm scales each by about 1/sqrt(2) more.
        a1.v_proj.weight[:d, :c] = torch.eye(c) * unscale * math.sqrt(2)
        a1.o_proj.weight[:c, :d] = torch.eye(c) * COPY_GAIN
        if name_starts:
            u = torch.randn(c, generator=gen)
            u /= u.norm()
            # u is orthogonal to every random row, so u·x is the same for all name starts and
            # the recency term decides between them.
            emb[:, :c] -= (emb[:, :c] @ u)[:, None] * u
            emb[list(name_starts), :c] += u * NAME_GAIN
            _name_start_head(a1, inv_freq, u, RECENCY, unscale * math.sqrt(2) * COPY_GAIN)
    return model


def _clear_head(attn: Any, head: int, d: int) -> None:
    """Zero one head's query, key and value (weights and biases) and its output columns."""
    rows = slice(head * d, (head + 1) * d)
    for lin in (attn.q_proj, attn.k_proj, attn.v_proj):
        lin.weight[rows] = 0
        lin.bias[rows] = 0
    attn.o_proj.weight[:, rows] = 0


def _name_start_head(
    attn: Any, inv_freq: torch.Tensor, u: torch.Tensor, recency: float, copy: float
) -> None:
    """Head 1 of ``attn`` attends to the most recent name start and copies it (see the module
    docstring). Content: the slowest pair scores u·x. Recency: a pair with θ·CONTEXT < π/2 and
    q̃ conj(k̃) = iR scores −R sin(Δθ) ≈ −RθΔ, so R = recency / θ (before the 1/sqrt(d) scaling,
    undone here) costs ``recency`` nats per position."""
    d = attn.head_dim
    half, c = d // 2, d
    _clear_head(attn, 1, d)
    scale = math.sqrt(d)  # undo the attention's 1/sqrt(d)
    slowest = half - 1
    attn.q_proj.bias[d + slowest] = 1.0
    attn.k_proj.weight[d + slowest, :c] = u * scale * 3.0
    j = next(i for i in range(half) if float(inv_freq[i]) * CONTEXT < math.pi / 2)
    attn.k_proj.bias[d + j] = 1.0
    attn.q_proj.bias[d + half + j] = scale * recency / float(inv_freq[j])
    attn.v_proj.weight[d : 2 * d, :c] = torch.eye(c) * copy
    attn.o_proj.weight[:c, d : 2 * d] = torch.eye(c)
