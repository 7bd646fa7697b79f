"""A small offline wiki site for web-agent tests: six articles with links between them, and
web questions of every kind over them (``data.web_questions.WebQuestion``)."""

from __future__ import annotations

from treegrpo.data.types import Question
from treegrpo.data.web_questions import WebQuestion
from treegrpo.website.corpus import WebArticle

ARTICLES = [
    WebArticle(
        "Ada Lovelace",
        "Ada Lovelace was an English mathematician born in 1815. She wrote about the "
        "Analytical Engine of Charles Babbage. She is often called the first computer programmer.",
        "English mathematician",
    ),
    WebArticle(
        "Analytical Engine",
        "The Analytical Engine was a proposed mechanical general-purpose computer. It was "
        "designed by Charles Babbage. Its first programs were written by Ada Lovelace.",
    ),
    WebArticle(
        "Charles Babbage",
        "Charles Babbage was an English polymath and mechanical engineer. He was born in 1791 "
        "in London. He originated the concept of a digital programmable computer.",
    ),
    WebArticle(
        "London",
        "London is the capital and largest city of England. It stands on the River Thames.",
    ),
    WebArticle("Mathematics", "Mathematics is a field of study about numbers and shapes."),
    WebArticle("England", "England is a country that is part of the United Kingdom."),
]
TITLES = {i: a.title for i, a in enumerate(ARTICLES)}


def _web(uid: str, text: str, gold: str, kind: str, touches: tuple[int, ...]) -> WebQuestion:
    q = Question(f"wiki-web-{uid}", text, (gold,), "wiki-web", len(touches), uid, kind=kind)
    return WebQuestion(q, "test", touches)


QUESTIONS = [
    _web("in-snippet-0", "In which year was Ada Lovelace born?", "1815", "in-snippet", (0,)),
    _web("in-snippet-3", "What is London the capital of?", "England", "in-snippet", (3,)),
    _web("in-page-2", "In which city was Charles Babbage born?", "London", "in-page", (2,)),
    _web("in-page-3", "Which river does London stand on?", "River Thames", "in-page", (3,)),
    _web(
        "link-1-2",
        "In which year was the designer linked from the page on the Analytical Engine born?",
        "1791",
        "link",
        (1, 2),
    ),
]
"""Two in-snippet, two in-page and one link question (A: Analytical Engine, B: Charles
Babbage)."""
