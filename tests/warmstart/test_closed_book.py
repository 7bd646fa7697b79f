"""The closed-book probe (``warmstart.closed_book``): batched generation equals one question at a
time, the first sentence is cut at its end or a tag, and a gold counts only as whole words."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer

from agent_fixtures import FACTS
from treegrpo.warmstart.closed_book import closed_book, first_sentence, known_answer


def test_batches_with_left_padding_give_what_one_question_at_a_time_gives(
    model_dir: Path,
) -> None:
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    questions = [*[f"Where was {p} born" for p in FACTS][:3], "Who?"]  # lengths differ
    together = closed_book(model, tokenizer, questions, batch=4, max_new_tokens=12)
    alone = [closed_book(model, tokenizer, [q], batch=1, max_new_tokens=12)[0] for q in questions]
    assert together == alone and len(together) == 4


def test_the_sentence_ends_at_its_stop_a_line_break_or_a_tag() -> None:
    assert first_sentence(" Lima is the capital of Peru. It is large.") == (
        "Lima is the capital of Peru."
    )
    assert first_sentence("Lima </think><answer> Lima") == "Lima"
    assert first_sentence("Peru's capital\nLima") == "Peru's capital"
    assert first_sentence("It weighs 1.5 kg. More.") == "It weighs 1.5 kg."  # "1.5": no end


def test_a_gold_is_known_only_as_whole_words() -> None:
    golds = ("Turkey", "Republic of Turkey")
    assert known_answer("Ankara is the capital of Turkey.", golds) == "Turkey"
    assert known_answer("Ankara is the capital of Turkeyland.", golds) is None
    assert known_answer("the CZECH people", ("Czech",)) == "Czech"  # normalized words
    assert known_answer("anything", ("", "the")) is None  # a gold with no words is never known
