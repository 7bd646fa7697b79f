"""Property tests of the agent protocol on adversarial model output, in token ids.

Three tokenizers: the byte-level BPE with the tags split over several tokens, the same with each
tag one special token (both from conftest), and a SentencePiece-style BPE with byte fallback
whose merges cross tag boundaries ("x</search>", "></answer>", "answer>"), as Llama-family
vocabularies do. Steps are random token ids from the whole vocabulary, special tokens included,
or "tag soups": text built from tags, tag parts, words, unicode and whitespace, tokenized, with
random ids spliced in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from conftest import TEXTS
from treegrpo.agent.prompt import format_question, instruction_text, render_prompt
from treegrpo.agent.protocol import (
    CLOSE_INFO,
    OPEN_INFO,
    Action,
    SearchProtocol,
    format_passages,
)
from treegrpo.agent.stops import STEP_END_TAGS, StepStopper
from treegrpo.core.rewards import PROTOCOL_TAGS

FRAGMENTS = [
    *PROTOCOL_TAGS,
    *PROTOCOL_TAGS,
    "<",
    ">",
    "/",
    "</",
    "answer",
    "search",
    "answer>",
    "search>",
    "</answer",
    "<search",
    "><",
    ">>",
    " ",
    "  ",
    "\n",
    "\t",
    "Paris",
    "capital of France",
    " x",
    "a > b",
    "é",
    "e\u0301",
    "東京",
    "🙂",
    "<|pad|>",
    "<0x3E>",
]
soup_text = st.lists(st.sampled_from(FRAGMENTS), max_size=16).map("".join)
# A well-formed step with soup around and inside it, so that actions are common, not rare.
step_text = st.builds(
    lambda pre, kind, body, post: f"{pre}<{kind}>{body}</{kind}>{post}",
    soup_text,
    st.sampled_from(["search", "answer"]),
    soup_text,
    soup_text,
)


def _piece_tokenizer() -> PreTrainedTokenizerFast:
    """BPE without byte-level pre-splitting (merges may join letters and tag characters), with
    byte-fallback pieces "<0x00>".."<0xFF>" for characters it has no token for."""
    tok = Tokenizer(models.BPE(byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    texts = [*TEXTS, *["x</search>y</answer>,z></answer>\n<search>a</search>b"] * 20]
    byte_pieces = [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<pad>", "<eos>", *byte_pieces], show_progress=False
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="<eos>",
        clean_up_tokenization_spaces=False,
    )


@pytest.fixture(scope="module", params=["split", "tag", "piece"])
def tok(request: pytest.FixtureRequest) -> Any:
    if request.param == "piece":
        return _piece_tokenizer()
    return request.getfixturevalue(f"{request.param}_tokenizer")


def _step_ids(tok: Any, data: st.DataObject) -> list[int]:
    """Random ids from the whole vocabulary, or a tokenized tag soup (whole, or one character
    at a time, so that a tag spans up to nine tokens) with random ids spliced in."""
    anything = st.integers(0, len(tok) - 1)
    how = data.draw(st.sampled_from(["ids", "text", "chars"]), label="how")
    if how == "ids":
        return data.draw(st.lists(anything, max_size=40), label="ids")
    text = data.draw(st.one_of(soup_text, step_text), label="text")
    pieces = list(text) if how == "chars" else [text]
    ids = [i for p in pieces for i in tok(p, add_special_tokens=False)["input_ids"]]
    for _ in range(data.draw(st.integers(0, 3), label="splices")):
        at = data.draw(st.integers(0, len(ids)), label="at")
        ids.insert(at, data.draw(anything, label="id"))
    return ids


def _reference_action(text: str) -> Action:
    """The protocol's rule written out with find/rfind: the first closing tag ends the step;
    its action is the text after the last matching opening tag before it."""
    closes = [(text.find(tag), tag) for tag in STEP_END_TAGS if tag in text]
    if not closes:
        return Action("invalid")
    at, close = min(closes)
    kind = close[2:-1]
    start = text.rfind(f"<{kind}>", 0, at)
    if start < 0:
        return Action("invalid")
    body = text[start + len(kind) + 2 : at].strip()
    if kind == "search" and not body:
        return Action("invalid")
    return Action("answer" if kind == "answer" else "search", body)


def _decode(tok: Any, ids: Sequence[int]) -> str:
    return str(tok.decode(list(ids), skip_special_tokens=False))


def _first_tag_end(tok: Any, ids: Sequence[int]) -> int | None:
    """Index of the first token after which the decoded text holds a step-end tag."""
    for i in range(len(ids)):
        text = _decode(tok, ids[: i + 1])
        if any(tag in text for tag in STEP_END_TAGS):
            return i
    return None


def _first_hit(stopper: StepStopper, ids: Sequence[int]) -> int | None:
    """Where a generation loop that asks the stopper after every new token stops."""
    for i in range(len(ids)):
        if stopper.hit(ids[: i + 1]):
            return i
    return None


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_parse_any_step(tok: Any, data: st.DataObject) -> None:
    proto = SearchProtocol(tok)
    ids = _step_ids(tok, data)
    action = proto.parse(ids)
    text = proto.decode(ids)
    assert action.kind in ("search", "answer", "invalid")
    event(f"action: {action.kind}")
    assert action == _reference_action(text)
    if action.kind == "invalid":
        assert action.text == ""
    else:  # the text is the stripped content of a complete tag pair of the step
        assert action.text.strip() == action.text
        assert action.kind == "answer" or action.text
        assert f"<{action.kind}>" not in action.text
        assert f"<{action.kind}>" in text and f"</{action.kind}>" in text
        assert action.text in text


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_stopper_fires_exactly_where_the_first_tag_closes(tok: Any, data: st.DataObject) -> None:
    stopper = StepStopper(tok)
    ids = _step_ids(tok, data)
    at = _first_hit(stopper, ids)
    assert at == _first_tag_end(tok, ids)
    event("ran on" if at is None else "stopped")
    if at is None:  # no step-end tag anywhere: the step runs on, and is not an action
        assert SearchProtocol(tok).parse(ids) == Action("invalid")
        return
    # vLLM stops only at end_token_ids and then asks hit(): the completing id must be one
    assert ids[at] in stopper.end_token_ids
    # the step as generated (cut at the completing token) has the action of the whole stream
    proto = SearchProtocol(tok)
    assert proto.parse(ids[: at + 1]) == proto.parse(ids)


@settings(max_examples=60, deadline=None)
@given(st.lists(soup_text, max_size=4), st.integers(0, 150), st.data())
def test_observation_keeps_its_wrapper(
    tok: Any, passages: list[str], room: int, data: st.DataObject
) -> None:
    # Passages in Search-R1's `"Title"\ntext` form, whatever they hold (tags included).
    titles = data.draw(st.lists(soup_text, min_size=len(passages), max_size=len(passages)))
    contents = [f"{t}\n{p}" for t, p in zip(titles, passages, strict=True)]
    wrapper = len(tok(OPEN_INFO + CLOSE_INFO, add_special_tokens=False)["input_ids"]) + 4
    proto = SearchProtocol(tok, max_obs_tokens=wrapper + room)
    ids = proto.observation_ids(contents)
    assert len(ids) <= proto.max_obs_tokens
    open_ids = tok(OPEN_INFO, add_special_tokens=False)["input_ids"]
    close_ids = tok(CLOSE_INFO, add_special_tokens=False)["input_ids"]
    assert ids[: len(open_ids)] == open_ids and ids[len(ids) - len(close_ids) :] == close_ids
    body = tok(format_passages(contents).strip(), add_special_tokens=False)["input_ids"]
    if len(open_ids) + len(body) + len(close_ids) <= proto.max_obs_tokens:  # nothing cut
        assert ids == open_ids + body + close_ids


@pytest.fixture(scope="module", params=["split", "tag"])
def byte_tok(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(f"{request.param}_tokenizer")


@settings(max_examples=60, deadline=None)
@given(question=st.one_of(st.text(max_size=30), soup_text))
def test_prompt_holds_the_question_verbatim(byte_tok: Any, question: str) -> None:
    q = format_question(question)
    assert format_question(q) == q and q.endswith("?")
    text = instruction_text(question)
    assert text.endswith(f"Question: {q}\n")
    # byte-level BPE round-trips any text: the prompt ids spell exactly the instruction
    assert _decode(byte_tok, render_prompt(byte_tok, question)) == text
