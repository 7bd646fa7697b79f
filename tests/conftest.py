"""Shared fixtures: tokenizers with and without the protocol tags as single tokens."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from agent_fixtures import TAGS, trained_agent
from treegrpo.models.tiny import train_bpe_tokenizer

TEXTS = [
    "<think>I should search for the capital of France</think><search>capital of France</search>",
    '<information>Doc 1(Title: "Paris") Paris is the capital of France.</information>',
    "<answer>Paris</answer> and then some more words, numbers 123 and symbols >< /.",
] * 20


@pytest.fixture(scope="session")
def split_tokenizer():  # type: ignore[no-untyped-def]
    """Byte-level BPE where tags are several tokens ('</', 'answer', '>')."""
    return train_bpe_tokenizer(TEXTS, vocab_size=300)


@pytest.fixture(scope="session")
def tag_tokenizer():  # type: ignore[no-untyped-def]
    """The same with each protocol tag as one special token."""
    return train_bpe_tokenizer(TEXTS, vocab_size=300, special_tokens=TAGS)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tests' tiny trained agent saved as a Hugging Face model directory."""
    agent = trained_agent()
    path = tmp_path_factory.mktemp("model")
    agent.model.save_pretrained(path)
    agent.tokenizer.save_pretrained(path)
    return path
