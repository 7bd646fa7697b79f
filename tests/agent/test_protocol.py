import pytest

from treegrpo.agent.prompt import format_question, instruction_text, render_prompt
from treegrpo.agent.protocol import (
    CLOSE_INFO,
    OPEN_INFO,
    Action,
    SearchProtocol,
    format_passages,
    parse_action,
    parse_passages,
)
from treegrpo.core.rewards import PROTOCOL_TAGS


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("<think>x</think><answer> Paris </answer>", Action("answer", "Paris")),
        (
            "<think>x</think><search> capital of France </search>",
            Action("search", "capital of France"),
        ),
        ("<think>x</think><search>  </search>", Action("invalid")),  # empty query
        ("<think>x</think><search>unclosed", Action("invalid")),
        ("<think>just thinking</think>", Action("invalid")),
        ("no tags", Action("invalid")),
        ("x </answer>", Action("invalid")),  # closing tag without an opening one
        ("<search>a</search> then <answer>b</answer>", Action("search", "a")),  # first close wins
        ("<answer>a</answer><search>b</search>", Action("answer", "a")),
        ("<search>old <search>new</search>", Action("search", "new")),
        ("<answer></answer>", Action("answer", "")),
        ("<think>é</think><answer>Zürich 東京</answer>", Action("answer", "Zürich 東京")),
    ],
)
def test_parse_action(text: str, action: Action) -> None:
    assert parse_action(text) == action


def test_format_passages_follows_search_r1() -> None:
    body = format_passages(['"Paris"\nParis is the capital.', '"Lyon"\nLyon is big.\nSecond line'])
    assert body == (
        'Doc 1(Title: "Paris") Paris is the capital.\n'
        'Doc 2(Title: "Lyon") Lyon is big.\nSecond line'
    )


def test_parse_passages_reads_back_what_format_passages_wrote() -> None:
    contents = ['"Paris (city)"\nParis is the capital.', '"Lyon"\nLyon is big.\nSecond line']
    observation = f"\n\n{OPEN_INFO}{format_passages(contents)}{CLOSE_INFO}\n\n"
    expected = [
        (1, "Paris (city)", "Paris is the capital."),
        (2, "Lyon", "Lyon is big.\nSecond line"),
    ]
    assert parse_passages(observation) == expected
    response = f"<search> a </search>{observation}<search> b </search>{observation}"
    assert parse_passages(response) == expected * 2  # every observation of a whole response
    assert parse_passages("<answer> x </answer>") == []


def test_observation_layout_and_truncation(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    proto = SearchProtocol(split_tokenizer, max_obs_tokens=40)
    passages = ['"Paris"\n' + "Paris is the capital of France. " * 20]
    ids = proto.observation_ids(passages)
    assert len(ids) == 40
    text = proto.decode(ids)
    assert text.startswith(OPEN_INFO + 'Doc 1(Title: "Paris") Paris')
    assert text.endswith(CLOSE_INFO)  # the closing tag survives truncation
    short = proto.decode(proto.observation_ids(['"A"\nshort']))
    assert short == OPEN_INFO + 'Doc 1(Title: "A") short' + CLOSE_INFO
    with pytest.raises(ValueError, match="no room"):
        SearchProtocol(split_tokenizer, max_obs_tokens=5)


def test_invalid_feedback_is_not_an_action(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    proto = SearchProtocol(split_tokenizer)
    text = proto.decode(proto.invalid_ids())
    assert "<search>" in text and "<answer>" in text  # it tells the model the tags


def test_prompt_plain_and_chat(tag_tokenizer) -> None:  # type: ignore[no-untyped-def]
    assert format_question(" who is it ") == "who is it?"
    assert format_question("who?") == "who?"
    text = instruction_text("who wrote Hamlet")
    assert text.endswith("Question: who wrote Hamlet?\n")
    for tag in PROTOCOL_TAGS:
        assert tag in text
    plain = render_prompt(tag_tokenizer, "who wrote Hamlet")
    assert tag_tokenizer.decode(plain) == text
    tag_tokenizer.chat_template = (
        "{% for m in messages %}<|user|>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    try:
        chat = render_prompt(tag_tokenizer, "who wrote Hamlet")
        assert tag_tokenizer.decode(chat) == "<|user|>" + text + "<|assistant|>"
        assert render_prompt(tag_tokenizer, "who wrote Hamlet", use_chat_template=False) == plain
    finally:
        tag_tokenizer.chat_template = None
