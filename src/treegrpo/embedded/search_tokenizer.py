"""The tiny search agent's BPE tokenizer: protocol tags and names as single tokens, so copying a
name is copying one token and no text splits a step-end tag; ``web=True`` adds ``<visit>`` and
its tools' wording (docs/embedded.md, "The warm start").
"""

from __future__ import annotations

from transformers import PreTrainedTokenizerFast

from treegrpo.agent.prompt import instruction_text
from treegrpo.agent.protocol import CLOSE_INFO, INVALID_FEEDBACK, OPEN_INFO, invalid_feedback
from treegrpo.core.rewards import PROTOCOL_TAGS
from treegrpo.embedded.names import NAME_POOL
from treegrpo.embedded.relations import RELATIONS, fact_sentence, question_text
from treegrpo.embedded.web import WEB_TOOLS
from treegrpo.models.tiny import train_bpe_tokenizer

WEB_TAGS = ("<visit>", "</visit>")


def web_texts() -> list[str]:
    """The web variant's fixed wording: its instruction, feedback and result lines."""
    texts = [instruction_text("", WEB_TOOLS), invalid_feedback(WEB_TOOLS)] * 50
    texts += [f"[{i}] " for i in range(1, 6)] * 50
    return texts


def tokenizer_texts() -> list[str]:
    """The training text: fixed wording, relation words, and each name many times."""
    # The fixed wording repeated so that its words become whole tokens too: the prompt and the
    # observations stay short, which is what makes rollouts and the warm start cheap.
    texts = [instruction_text(""), INVALID_FEEDBACK, OPEN_INFO, CLOSE_INFO] * 50
    texts += [f"Doc {i}(Title: " for i in range(1, 6)] * 50
    for rel in RELATIONS:
        texts += [fact_sentence("", rel, ""), question_text("", [rel, rel]), f" {rel}"] * 20
    # Whole names outrank every merge of the template words, so none is split.
    for name in NAME_POOL:
        texts += [name, " " + name, f'"{name}"'] * 100
    return texts


def train_search_tokenizer(vocab_size: int = 768, web: bool = False) -> PreTrainedTokenizerFast:
    """The tokenizer (seconds), deterministic; ValueError when a name is not one token."""
    texts = web_texts() + tokenizer_texts() if web else tokenizer_texts()
    tags = PROTOCOL_TAGS + WEB_TAGS if web else PROTOCOL_TAGS
    tok = train_bpe_tokenizer(texts, vocab_size=vocab_size, special_tokens=tags)
    split = [n for n in NAME_POOL for s in (n, " " + n) if len(tok(s)["input_ids"]) != 1]
    if split:
        raise ValueError(
            f"vocab_size={vocab_size} splits {len(split)} names (e.g. {split[0]!r}); raise it"
        )
    return tok


def name_ids(tokenizer: PreTrainedTokenizerFast) -> list[int]:
    """The ids of every name, as " Kalo" and "Kalo": what the name-start head attends to."""
    ids = {i for n in NAME_POOL for s in (n, " " + n) for i in tokenizer(s)["input_ids"]}
    return sorted(ids)
