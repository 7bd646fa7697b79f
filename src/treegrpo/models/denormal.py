"""Denormal floats flushed to zero on CPU while a job computes.

x86 CPUs compute on denormal floats (fp32 magnitudes below 1.2e-38) through a slow microcode
path. The embedded job's tiny model starts from hand-built copying circuits
(``models.induction``) whose attention is very sharp, so many attention probabilities underflow
into that range: flushing them to zero (FTZ/DAZ, ``torch.set_flush_denormal``) made the warm
start's SFT 1.5x faster on 2 cores of a Xeon and 1.4x on one (BENCHMARKS.md), and changes
results only below 1e-38. Nested uses keep the mode on until the outermost one ends, which
restores the default (denormals kept).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

_depth = 0


@contextmanager
def flush_denormals() -> Iterator[None]:
    """Within the block (or the decorated function) denormals are flushed to zero on CPU."""
    global _depth
    if _depth == 0:
        torch.set_flush_denormal(True)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            torch.set_flush_denormal(False)
