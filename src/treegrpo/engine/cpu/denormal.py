"""Denormal floats flushed to zero on CPU, for a whole process: x86 CPUs compute on denormals
(below 1.2e-38 in fp32) through a slow microcode path, and the embedded job's copying circuits
(``embedded.induction``) have attention sharp enough for many probabilities to underflow into that
range; flushing them (FTZ/DAZ) changes results only below 1e-38. The mode is a per-thread register
that new threads copy from their creator, and torch makes its OpenMP workers at its first parallel
operation: call this before any tensor work.
"""

from __future__ import annotations

import torch


def flush_denormals() -> bool:
    """Flush denormals to zero in this thread and in the threads it creates from now on
    (torch's CPU workers, if none exist yet). Returns False where the CPU cannot."""
    return bool(torch.set_flush_denormal(True))
