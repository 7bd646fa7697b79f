"""What a model knows without searching, for the reader warm start's "direct" demonstrations: it
finishes ``<think> I know this:`` greedily, and knows a question when a gold is in that sentence
as whole words (``known_answer``; docs/real-model.md, "The reader warm start").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch

from treegrpo.agent.prompt import render_prompt
from treegrpo.core.rewards import is_span

KNOW_THINK = "I know this:"
"""How a direct demonstration's thought opens; the probe's prompt ends with it."""
_SENTENCE_END = re.compile(r"</think>|<answer>|<search>|\n|(?<=[.!?])\s")


def first_sentence(text: str) -> str:
    """``text`` up to its first sentence end, line break or tag, stripped."""
    return _SENTENCE_END.split(text, maxsplit=1)[0].strip()


def known_answer(sentence: str, golds: Sequence[str]) -> str | None:
    """The first gold (as written) that is a span of ``sentence`` (``is_span``), or None."""
    return next((gold for gold in golds if is_span(gold, sentence)), None)


@torch.no_grad()
def closed_book(
    model: Any,
    tokenizer: Any,
    questions: Sequence[str],
    batch: int = 32,
    max_new_tokens: int = 32,
) -> list[str]:
    """Each question's greedy first sentence after ``<think> KNOW_THINK``, left-padded batches."""
    opening = tokenizer(f"<think> {KNOW_THINK}", add_special_tokens=False)["input_ids"]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    device = next(model.parameters()).device
    out: list[str] = []
    for start in range(0, len(questions), batch):
        prompts = [render_prompt(tokenizer, q) + opening for q in questions[start : start + batch]]
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
        gen = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=pad,
        )  # [B, width + new]
        out += [first_sentence(tokenizer.decode(g[width:], skip_special_tokens=True)) for g in gen]
    return out
