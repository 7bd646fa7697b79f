"""A Hugging Face model directory and its tokenizer, and the device a model goes to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def load_model(path: Path) -> tuple[Any, Any]:
    """(model, tokenizer) of the directory ``path``, the model on the CPU."""
    model = AutoModelForCausalLM.from_pretrained(path)
    return model, AutoTokenizer.from_pretrained(path)


def resolve_device(name: str) -> torch.device:
    """``"auto"`` → cuda if available, else cpu; anything else is passed to ``torch.device``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)
