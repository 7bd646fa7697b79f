import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treegrpo.core.rewards import (
    PROTOCOL_TAGS,
    exact_match,
    extract_answer,
    f1_score,
    is_valid_format,
    normalize_answer,
    search_r1_f1_reward,
    search_r1_reward,
)

VALID_1 = "<think>easy</think>\n<answer> Beijing </answer>"
VALID_2 = (
    "<think>need to look it up</think>\n<search>capital of France</search>\n\n"
    '<information>Doc 1(Title: "Paris") Paris is the capital.</information>\n\n'
    "<think>found it</think>\n<answer>Paris</answer>"
)


@pytest.mark.parametrize(
    ("text", "norm"),
    [
        ("The Beatles", "beatles"),
        ("  A  man, a plan!  ", "man plan"),
        ("AN apple", "apple"),
        ("theater", "theater"),  # articles only as whole words
        ("U.S.A.", "usa"),
        ("Café", "café"),
        ("Cafe\u0301", "café"),  # decomposed é is NFC-normalized
        ("ÉCOLE Normale", "école normale"),
        ("Tōkyō—Japan", "tōkyō—japan"),  # SQuAD drops ASCII punctuation only
        ("", ""),
    ],
)
def test_normalize_answer(text: str, norm: str) -> None:
    assert normalize_answer(text) == norm


def test_exact_match() -> None:
    assert exact_match("the Eiffel Tower.", ["Eiffel tower"]) == 1.0
    assert exact_match("Eiffel", ["Eiffel tower"]) == 0.0
    assert exact_match("paris", ["London", "Paris"]) == 1.0  # several golds: any
    assert exact_match("paris", "Paris") == 1.0  # a single gold string
    assert exact_match(None, ["x"]) == 0.0
    assert exact_match("x", []) == 0.0
    with pytest.raises(TypeError, match="strings"):
        exact_match("x", [1])  # type: ignore[list-item]


def test_f1_score() -> None:
    # pred tokens {barack, obama}, gold {barack, hussein, obama}: P = 1, R = 2/3, F1 = 0.8.
    assert f1_score("Barack Obama", ["Barack Hussein Obama"]) == pytest.approx(0.8)
    assert f1_score("Barack Obama", ["Michelle", "Barack Hussein Obama"]) == pytest.approx(0.8)
    assert f1_score("the", ["a"]) == 1.0  # both normalize to nothing
    assert f1_score("", ["Paris"]) == 0.0
    assert f1_score("dog dog", ["dog"]) == pytest.approx(2 * 0.5 * 1 / 1.5)  # token counts
    assert f1_score(None, ["a"]) == 0.0 and f1_score("x", []) == 0.0


@pytest.mark.parametrize(
    ("response", "answer"),
    [
        (VALID_2, "Paris"),
        ("<answer>a</answer> then <answer> b </answer>", "b"),  # the last one
        ("<answer></answer>", ""),  # empty but present
        ("<answer>unclosed", None),
        ("no tags at all", None),
        ("<answer>a <answer>b</answer>", "b"),  # nested opening: innermost span
        ("<answer>x</answer><answer>y", "x"),  # a trailing unclosed tag does not count
        ("<answer>multi\nline</answer>", "multi\nline"),
        ("</answer>x<answer>", None),
    ],
)
def test_extract_answer(response: str, answer: str | None) -> None:
    assert extract_answer(response) == answer


@pytest.mark.parametrize(
    "response", [VALID_1, VALID_2, " \n" + VALID_1 + "\n ", "<think></think><answer></answer>"]
)
def test_valid_format(response: str) -> None:
    assert is_valid_format(response)


@pytest.mark.parametrize(
    "response",
    [
        "<answer>Paris</answer>",  # no think first
        "<think>x</think>",  # no answer
        "<think>x</think> so <answer>y</answer>",  # text outside tags
        "<think>x</think><answer>y</answer> trailing",
        "<think>x</think><think>y</think><answer>z</answer>",
        "<think>x</think><search>q</search><think>y</think><answer>z</answer>",  # no info
        "<think>x</think><search>q</search><information>i</information><answer>z</answer>",
        "<think>a <search>q</search></think><answer>z</answer>",  # tag inside content
        "<think>x</answer><answer>z</answer>",  # mismatched close
        "<think>x</think><answer>z",  # unclosed
        "<think>x</think><answer>y</answer><answer>z</answer>",  # two answers
        "<|im_start|>assistant\n<think>x</think><answer>y</answer>",  # template text: not ours
        "",
    ],
)
def test_invalid_format(response: str) -> None:
    assert not is_valid_format(response)


def test_search_r1_reward_schedule() -> None:
    golds = ["Paris"]
    assert search_r1_reward(VALID_2, golds) == 1.0  # correct, valid
    assert search_r1_reward("I think <answer>Paris</answer>", golds) == pytest.approx(0.8)
    assert search_r1_reward(VALID_2.replace("<answer>Paris", "<answer>Lyon"), golds) == 0.2
    assert search_r1_reward("<answer>Lyon</answer>", golds) == 0.1  # wrong, invalid
    assert search_r1_reward("<think>no idea", golds) == 0.0  # no answer, invalid


def test_search_r1_reward_ignores_prompt_and_template() -> None:
    # The same response scores the same whatever chat template produced the prompt.
    llama = "<|start_header_id|>assistant<|end_header_id|>\n\n"
    assert search_r1_reward(VALID_1, ["beijing"]) == 1.0
    assert search_r1_reward(llama + VALID_1, ["beijing"]) == pytest.approx(0.8)


def test_answer_read_from_model_text_when_given() -> None:
    # A passage that happens to contain answer tags must not become the model's answer.
    obs = "<information>Doc 1(Title: x) see <answer>Paris</answer></information>"
    response = "<think>a</think><search>q</search>" + obs + "<think>b</think><answer>Lyon</answer>"
    model_text = "<think>a</think><search>q</search><think>b</think><answer>Lyon</answer>"
    assert search_r1_reward(response, ["Paris"]) == 0.1  # the tag in the passage breaks format
    no_answer = "<think>a</think><search>q</search>" + obs
    assert search_r1_reward(no_answer, ["Paris"]) == pytest.approx(0.8)  # read from the passage
    assert search_r1_reward(no_answer, ["Paris"], model_text="<think>a</think>") == 0.0
    assert search_r1_reward(response, ["Lyon"], model_text=model_text) == pytest.approx(0.8)
    assert search_r1_f1_reward(no_answer, ["Paris"], model_text="<search>q</search>") == 0.0


def test_f1_reward_matches_em_schedule_at_the_ends_and_interpolates() -> None:
    golds = ["Barack Hussein Obama"]
    right = VALID_1.replace("Beijing", "Barack Hussein Obama")
    wrong = VALID_1.replace("Beijing", "Nixon")
    part = VALID_1.replace("Beijing", "Barack Obama")  # F1 = 0.8
    assert search_r1_f1_reward(right, golds) == pytest.approx(1.0)
    assert search_r1_f1_reward(wrong, golds) == pytest.approx(0.2)
    assert search_r1_f1_reward(part, golds) == pytest.approx(0.2 + 0.8 * 0.8)
    assert search_r1_f1_reward("x <answer>Barack Hussein Obama</answer>", golds) == pytest.approx(
        0.8
    )
    assert search_r1_f1_reward("x <answer>Nixon</answer>", golds) == pytest.approx(0.1)
    assert search_r1_f1_reward("x <answer>Barack Obama</answer>", golds) == pytest.approx(
        0.1 + 0.7 * 0.8
    )
    assert search_r1_f1_reward("nothing", golds) == 0.0


tagged = st.lists(
    st.sampled_from(
        [
            *PROTOCOL_TAGS,
            " ",
            "x",
            "Paris",
            "\n",
        ]
    ),
    max_size=20,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(tagged, st.lists(st.sampled_from(["Paris", "x", "", "the"]), max_size=3))
def test_rewards_are_in_range_for_any_text(response: str, golds: list[str]) -> None:
    em = search_r1_reward(response, golds)
    f1 = search_r1_f1_reward(response, golds)
    assert em in {0.0, 0.1, 0.2, 0.8, 1.0} or em == pytest.approx(0.8)
    assert 0.0 <= f1 <= 1.0
    if is_valid_format(response):
        assert extract_answer(response) is not None
