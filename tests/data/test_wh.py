"""Reworded wh-questions over any sentence of a lead (``lead_questions.wh``): each way a sentence
is turned around, on hand-written leads; the rejections (a question that copies its passage,
does not name its article, or could have two answers); and, over the real corpus, the checks
on every question and the split rule."""

from __future__ import annotations

from collections import Counter

from treegrpo.data.lead_questions import Context, passage, splits, wh_questions
from treegrpo.data.lead_questions.wh import COPY_WORDS, build_read, copies, resolve, wh_rows
from treegrpo.data.wiki import Article, load_articles, split_of


def article(index: int, title: str, lead: str, description: str = "", topic: str = "") -> Article:
    return Article(index, title, lead, description, topic)


APU = article(
    0,
    "The Apu Trilogy",
    "The Apu Trilogy is a series of three Indian films. The trilogy's score was composed by "
    "Ravi Shankar.",
)
RECIFE = article(1, "Recife", "Recife is a city. It was founded in 1537.", "City in Brazil")
JUDO = article(2, "Judo", "Judo is a martial art. In 1882, Kanō Jigorō created judo.")
CHADWICK = article(
    7, "James Chadwick", "James Chadwick was a physicist. He was knighted in Britain in 1945."
)
ANGELOU = article(
    3,
    "Maya Angelou",
    "Maya Angelou was a poet and memoirist. She published seven autobiographies.",
    "American poet (1928–2014)",
    "People",
)
RWANDA = article(
    4, "Rwanda", "Rwanda is a country. Its capital and largest city is Kigali.", "Country in Africa"
)
NIRO = article(
    5,
    "Robert De Niro",
    "Robert De Niro is an American actor. He was honored with the Golden Award in 2003 and the "
    "Silver Medal in 2009.",
    "American actor (born 1943)",
    "People",
)
LEAGUE = article(
    6,
    "Hanseatic League",
    "The Hanseatic League was a network of guilds. It was founded by the merchants of Lübeck "
    "and Hamburg in 1241.",
)
ALL = (APU, RECIFE, JUDO, ANGELOU, RWANDA, NIRO, LEAGUE, CHADWICK)


def asked(a: Article, rejected: Counter[str] | None = None) -> dict[str, tuple[str, ...]]:
    return {r.question: r.golds for r in wh_rows(a, Context.of(ALL), rejected)}


def test_a_leading_pronoun_becomes_the_articles_name() -> None:
    assert resolve("Its capital (since 1990) is Kigali.", "Rwanda") == "Rwanda's capital is Kigali"
    assert resolve("She wrote seven books.", "Maya Angelou") == "Maya Angelou wrote seven books"
    assert resolve("The score was composed.", "X") == "The score was composed"


def test_each_kind_is_turned_around_its_answer() -> None:
    assert asked(APU) == {"Who composed the trilogy's score?": ("Ravi Shankar",)}
    assert asked(RECIFE) == {"In what year was Recife founded?": ("1537",)}
    # "In 1882, …" goes to the end first
    assert asked(JUDO) == {"In what year did Kanō Jigorō create judo?": ("1882",)}
    # the place between the verb and the answer is dropped in a second form
    assert asked(CHADWICK) == {
        "In what year was James Chadwick knighted in Britain?": ("1945",),
        "In what year was James Chadwick knighted?": ("1945",),
    }
    assert asked(ANGELOU) == {"How many autobiographies did Maya Angelou publish?": ("seven",)}
    assert asked(RWANDA) == {"What is the capital and largest city of Rwanda?": ("Kigali",)}


def test_a_question_that_could_have_two_answers_keeps_what_tells_them_apart() -> None:
    # two years in the sentence: "In what year was Robert De Niro honored?" is not asked
    questions = asked(NIRO)
    assert "In what year was Robert De Niro honored?" not in questions
    assert all("Golden Award" in q or "Silver Medal" in q for q in questions)


def test_questions_that_copy_their_passage_are_rejected_and_counted() -> None:
    rejected: Counter[str] = Counter()
    # "… founded by the merchants of Lübeck and Hamburg" would repeat five words of the lead
    assert asked(LEAGUE, rejected) == {}
    assert rejected["when: copies the passage"] >= 1
    assert copies("Who wrote a b c d e?", "x a b c d e y")
    assert not copies("Who wrote a b c d?", "x a b c d y")
    assert COPY_WORDS == 5


def test_every_real_question_holds_its_checks() -> None:
    articles = {a.index: a for a in load_articles()}
    rejected: Counter[str] = Counter()
    built = build_read(tuple(articles.values()), rejected)
    assert len(built) >= 200 and sum(rejected.values()) > len(built)
    assert {b.question.kind for b in built} >= {"who", "when", "where", "what", "how-many"}
    for b in built:
        q, a = b.question, articles[b.question.index]
        text = passage(a)
        assert q.golds[0] in text and not copies(q.question, text), q.uid
        assert q.hops == 1 and b.touches == (a.index,)
    answers = Counter(b.question.golds[0] for b in built)
    assert answers.most_common(1)[0][1] <= 40


def test_the_splits_follow_the_articles() -> None:
    title = {a.index: a.title for a in load_articles()}
    train, val, test = (wh_questions(s) for s in ("train", "val", "test"))
    assert len(train) >= 150 and val and test
    assert all(split_of(title[q.index]) == "train" for q in train)  # type: ignore[index]
    assert all(split_of(title[q.index]) == "test" for q in test)  # type: ignore[index]
    assert {q.uid for q in val} <= {q.uid for q in train}
    assert len(splits.all_wh()) == len(train) + len(test)
