import pytest

from treegrpo.agent.stops import StepStopper


def _first_hit(stopper: StepStopper, ids: list[int]) -> int | None:
    """Index of the token at which the stopper fires when fed one token at a time."""
    for i in range(1, len(ids) + 1):
        if stopper.hit(ids[:i]):
            return i - 1
    return None


@pytest.mark.parametrize("tag", ["</search>", "</answer>"])
def test_split_tag_stops_at_the_completing_token(split_tokenizer, tag) -> None:  # type: ignore[no-untyped-def]
    tok = split_tokenizer
    head = tok("<think>x</think><search>capital of", add_special_tokens=False)["input_ids"]
    tail = tok(tag, add_special_tokens=False)["input_ids"]
    more = tok(" after <answer>y</answer>", add_special_tokens=False)["input_ids"]
    assert len(tail) > 1, "this test needs the tag split across tokens"
    ids = head + tail + more
    at = _first_hit(StepStopper(tok), ids)
    assert at == len(head) + len(tail) - 1
    assert tag in tok.decode(ids[: at + 1])


def test_split_tag_built_from_single_characters(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    tok = split_tokenizer
    chars = [tok.convert_tokens_to_ids(c) for c in "</answer>"]
    assert None not in chars and tok.unk_token_id not in chars
    ids = tok("abc ", add_special_tokens=False)["input_ids"] + chars
    assert _first_hit(StepStopper(tok), ids) == len(ids) - 1


def test_special_token_tags(tag_tokenizer) -> None:  # type: ignore[no-untyped-def]
    tok = tag_tokenizer
    ids = tok("<think>a</think><search>q</search> more", add_special_tokens=False)["input_ids"]
    close = tok.convert_tokens_to_ids("</search>")
    assert _first_hit(StepStopper(tok), ids) == ids.index(close)


def test_open_tags_and_other_closers_do_not_stop(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    tok = split_tokenizer
    text = "<think>a > b</think><search>q <answer> </information> </think>"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert _first_hit(StepStopper(tok), ids) is None
    assert not StepStopper(tok).hit([])
