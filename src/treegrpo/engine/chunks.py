"""Which rows of a prefill go through the model together, so that padding costs little.

A prefill forward takes b rows, each with n_i new tokens on top of C_i cached ones, laid out
right-aligned: p = max n_i new columns and c = max C_i cached columns per row. Its work is

    linear layers:   b · p · F_lin             every new column, padding included
    attention:       b · p · (c + p) · F_att   every query against every column, masked or not

with F_lin one token's cost in the linear layers and F_att one query-key pair's (QKᵀ and the
weighted sum of V, over all heads and layers); a row needs n_i · F_lin + n_i (C_i + n_i) F_att of
it. Grouping by feed length alone misses the context padding (docs/library.md, "CPU speed-ups").
Pure Python on lengths; the engine (``engine.hf``) computes F_att / F_lin from the model's shape.
"""

from __future__ import annotations

from collections.abc import Sequence


def prefill_chunks(
    feeds: Sequence[int],
    contexts: Sequence[int],
    att_per_token: float,
    max_tokens: int,
    waste: float,
) -> list[list[int]]:
    """Group rows (``feeds[i]`` new tokens on ``contexts[i]`` cached ones) into prefill chunks.
    ``att_per_token`` = F_att / F_lin; ``max_tokens`` caps b · p (one row may exceed it); ``waste``:
    the share of a chunk's work that may go to padding. Rows are taken longest feed first (then
    longest context), each joining the current chunk unless that breaks either bound. Returns lists
    of row indices, each row in exactly one."""
    if len(feeds) != len(contexts):
        raise ValueError(f"{len(feeds)} feeds but {len(contexts)} contexts")
    order = sorted(range(len(feeds)), key=lambda i: (-feeds[i], -contexts[i]))
    chunks: list[list[int]] = []
    cur: list[int] = []
    p = c = 0
    need = 0.0  # the current chunk's own work, in units of F_lin
    for i in order:
        n, ctx = feeds[i], contexts[i]
        row_need = n * (1 + att_per_token * (ctx + n))
        if cur:
            b, cc = len(cur) + 1, max(c, ctx)
            work = b * p * (1 + att_per_token * (cc + p))
            if b * p <= max_tokens and work - (need + row_need) <= waste * work:
                cur.append(i)
                c, need = cc, need + row_need
                continue
            chunks.append(cur)
        cur, p, c, need = [i], n, ctx, row_need
    if cur:
        chunks.append(cur)
    return chunks
