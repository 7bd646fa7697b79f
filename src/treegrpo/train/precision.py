"""Device and mixed precision of the update.

On CUDA the update's forward passes run under ``torch.autocast`` (bfloat16 by default) while
weights, optimizer state and all log-prob math stay float32; on CPU nothing changes.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def autocast_dtype(name: str, device: torch.device) -> torch.dtype:
    """The dtype forward passes compute in: float32 off CUDA whatever ``name`` says (autocast is
    only used on CUDA); on CUDA ``"auto"`` is bfloat16 where the GPU supports it."""
    if device.type != "cuda":
        return torch.float32
    if name == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    return _DTYPES[name]  # ModelConfig.dtype checks the name


def autocast(
    device: torch.device, dtype: torch.dtype | None
) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast`` on CUDA for a lower precision; a no-op context everywhere else."""
    if device.type == "cuda" and dtype is not None and dtype != torch.float32:
        return torch.autocast(device_type="cuda", dtype=dtype)
    return contextlib.nullcontext()
