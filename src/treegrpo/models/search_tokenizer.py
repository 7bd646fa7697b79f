"""The BPE tokenizer of the tiny search agent: protocol tags as single tokens, names as syllables.

Trained on the fixed text the agent sees (the instruction, the observation and feedback wording,
every relation's fact, question and thought templates) and on the syllable inventory of the
synthetic world's names, but on no name itself: BPE never merges across syllables, so a name of
any world is spelled with syllable tokens that every world shares. That is what lets a policy
trained on the train world copy eval-world names it has never seen. The eight protocol tags are
special tokens, so a step-end tag is one token and no text can split it.
"""

from __future__ import annotations

from transformers import PreTrainedTokenizerFast

from treegrpo.agent.prompt import instruction_text
from treegrpo.agent.protocol import CLOSE_INFO, INVALID_FEEDBACK, OPEN_INFO
from treegrpo.data.names import SYLLABLES
from treegrpo.data.relations import PATHS, RELATIONS
from treegrpo.models.tiny import train_bpe_tokenizer

TAGS = (
    "<think>",
    "</think>",
    "<search>",
    "</search>",
    "<information>",
    "</information>",
    "<answer>",
    "</answer>",
)


def tokenizer_texts() -> list[str]:
    """The training text: fixed wording, with empty slots where names go, and syllables."""
    texts = [instruction_text(""), INVALID_FEEDBACK, OPEN_INFO, CLOSE_INFO]
    texts += [f"Doc {i}(Title: " for i in range(1, 6)]
    for rel in RELATIONS.values():
        texts += [t.format(s="", o="") for t in (*rel.templates, rel.statement)]
        texts.append(rel.keyword + ", " + rel.keyword + ":")
    texts += [q.format(s="") for qs in PATHS.values() for q in qs]
    texts += [
        " works as an engineer a painter a teacher a chemist a writer a pilot",
        " was established in released its first album in",
        " has about thousand million inhabitants.",
        " the fact is missing unknown",
    ]
    # Each syllable as its own word, in the three spellings names use: "ka" inside a name,
    # "Ka" at its start, " Ka" at its start after a space. Never two syllables in one word.
    # Repeated so that every consonant-vowel merge outranks the merges of the template words
    # ("or" of "born" must not split "Sorok" into "S", "or", "ok").
    for s in SYLLABLES:
        texts += [s, s.capitalize(), " " + s.capitalize()] * 100
    return texts


def train_search_tokenizer(vocab_size: int = 1536) -> PreTrainedTokenizerFast:
    """The tokenizer (a few seconds at most); deterministic for a given ``vocab_size``."""
    return train_bpe_tokenizer(tokenizer_texts(), vocab_size=vocab_size, special_tokens=TAGS)


def name_start_ids(tokenizer: PreTrainedTokenizerFast) -> list[int]:
    """Ids of the tokens that begin a name: a capitalized syllable, with or without a leading
    space (``"Ka"`` after a quote in a passage title, ``" Ka"`` elsewhere)."""
    starts = {s.capitalize() for s in SYLLABLES}
    vocab = tokenizer.get_vocab()
    return sorted(i for i in vocab.values() if str(tokenizer.decode([i])).strip() in starts)
