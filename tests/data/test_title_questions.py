"""The title-question builder on hand-written leads: the title is hidden, plurals, other
spellings and acronyms never slip through, and sentences end where English sentences end."""

from __future__ import annotations

import pytest

from treegrpo.data.title_questions import (
    answer_tokens,
    article_question,
    describe,
    first_sentence,
    hide_title,
    leaks,
    name_words,
)

NAMES = name_words(["He wrote in English and French, not in a king's tongue.", "a central aim"])


def test_the_example_of_the_docstring() -> None:
    extract = (
        "2001: A Space Odyssey is a 1968 epic science fiction film produced and directed by "
        "Stanley Kubrick, who co-wrote the screenplay with Arthur C. Clarke. Its plot was "
        'inspired by several short stories, primarily "The Sentinel" (1951).'
    )
    built = article_question(
        "2001: A Space Odyssey", "1968 film by Stanley Kubrick", extract, NAMES
    )
    assert built == (
        "It is a 1968 epic science fiction film produced and directed by Stanley Kubrick, who "
        "co-wrote the screenplay with Arthur C. Clarke. Which 1968 film by Stanley Kubrick is it?",
        ("2001: A Space Odyssey",),
    )


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("Arthur C. Clarke wrote it. Then more.", "Arthur C. Clarke wrote it."),
        ("It lies in the U.S. state of Ohio. It is big.", "It lies in the U.S. state of Ohio."),
        ("Born c. 1500 in St. Ives, he died. Later.", "Born c. 1500 in St. Ives, he died."),
        ("Written as ∇. When applied, it differs.", "Written as ∇."),
        ("One sentence without a stop", "One sentence without a stop"),
        ('He said "go." Then he left.', 'He said "go."'),
    ],
)
def test_first_sentence(text: str, first: str) -> None:
    assert first_sentence(text) == first


def test_title_becomes_it_with_article_possessive_and_parentheses() -> None:
    assert hide_title("The tomato (Solanum lycopersicum) is a plant.", "Tomato") == (
        "It is a plant."
    )
    assert hide_title("Hamlet's author wrote Hamlet.", "Hamlet") == "Its author wrote it."


def test_plurals_spellings_and_runs_of_clashing_words_become_one_it() -> None:
    assert hide_title("Ants are eusocial insects.", "Ant") == "It are eusocial insects."
    got = hide_title("ʿAbd Allāh al-Mahdī biʾllāh was the founder.", "Abd Allah al-Mahdi Billah")
    assert got == "It was the founder."
    assert not leaks(got, "Abd Allah al-Mahdi Billah")


@pytest.mark.parametrize(
    ("question", "title"),
    [
        ("Which red fruit is the tomato?", "Tomato"),
        ("Which fruits are tomatoes?", "Tomato"),  # plural
        ("Which insects are ants?", "Ant"),  # plural of a short word
        ("Which genre is musical?", "Music"),  # derived form
        ("Who was Allāh's servant?", "Abd Allah"),  # accents
        ("Which number comes after 0?", "0"),  # a title of short tokens only
        ("Which film is Casablanca?", "Casablanca (film)"),
    ],
)
def test_leaks(question: str, title: str) -> None:
    assert leaks(question, title)


def test_function_words_and_disambiguators_are_not_leaks() -> None:
    assert answer_tokens("Pride and Prejudice") == {"pride", "prejudice"}
    assert not leaks("Which 1942 film and novel is it?", "Casablanca (film)")
    assert not leaks("Which art is it?", "Artemis")  # "art" is shorter than a stem


def test_acronyms_short_descriptions_and_leaky_descriptions_make_no_question() -> None:
    lead = "The British Broadcasting Corporation is a public service broadcaster in London."
    assert article_question("BBC", "British public service broadcaster", lead, NAMES) is None
    lead = "A tomato is a plant whose fruit is an edible berry eaten as a vegetable."
    assert article_question("Tomato", "Berry", lead, NAMES) is None
    assert article_question("Tomato", "Tomato plant species", lead, NAMES) is None
    built = article_question("Tomato", "Edible berry", lead, NAMES)
    assert built is not None and built[0].endswith("Which edible berry is it?")


def test_descriptions_keep_the_capital_of_names_only() -> None:
    assert describe("English theologian", NAMES) == "English theologian"
    assert describe("King of Wessex", NAMES) == "king of Wessex"
    assert describe("Central deity", NAMES) == "central deity"
    assert describe("NATO member", NAMES) == "NATO member"
    assert describe("1968 film", NAMES) == "1968 film"
