"""Denormal floats flushed to zero on CPU, for a whole process.

x86 CPUs compute on denormal floats (fp32 magnitudes below 1.2e-38) through a slow microcode
path. The embedded job's tiny model starts from hand-built copying circuits
(``embedded.induction``) whose attention is very sharp, so many attention probabilities underflow
into that range: flushing them to zero (FTZ/DAZ, ``torch.set_flush_denormal``) avoids that slow
path and changes results only below 1e-38.

The mode is a per-thread CPU register that new threads copy from the thread that creates them.
torch's OpenMP workers are created at its first parallel operation, so call this first, before
any tensor work: the ``treegrpo`` commands that compute do.
"""

from __future__ import annotations

import torch


def flush_denormals() -> bool:
    """Flush denormals to zero in this thread and in the threads it creates from now on
    (torch's CPU workers, if none exist yet). Returns False where the CPU cannot."""
    return bool(torch.set_flush_denormal(True))
