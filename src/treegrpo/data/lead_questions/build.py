"""From the facts of every article to questions: the checks every question passes, two-hop
joins through a bridge article, and the caps (one wording, one answer, one bridge).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, TypeVar

from treegrpo.core.rewards import is_span, normalize_answer
from treegrpo.data.lead_questions.cloze import cloze_fact
from treegrpo.data.lead_questions.facts import Context, Fact
from treegrpo.data.lead_questions.patterns import _words
from treegrpo.data.lead_questions.people import name_facts, person_facts
from treegrpo.data.lead_questions.places import place_facts
from treegrpo.data.lead_questions.science import science_facts
from treegrpo.data.lead_questions.text import passage
from treegrpo.data.lead_questions.works import work_facts
from treegrpo.data.title_questions import leaks
from treegrpo.data.types import Question
from treegrpo.data.wiki import Article, stable_hash

SOURCE = "wiki-qa"
SOURCE_2HOP = "wiki-qa2"
MAX_SAME_ANSWER = 40
MAX_ANSWER_SHARE = 0.03
"""At most ``MAX_SAME_ANSWER`` questions of one set (single-hop or two-hop), and at most this
share of it, have the same first gold answer."""
MAX_PER_BRIDGE = 5
"""At most this many two-hop questions of one kind go through one bridge article (every city in
China would otherwise ask for Beijing)."""

_COMPOSABLE = _words("""nationality occupation full-name birth-name courtesy-name alias birthplace
birth-year death-year capital official-name founded-year family order country""")
"""Kinds a two-hop question may ask of its bridge article: their question names the subject so
that a description ("the author of X") can take its place."""
_NOT_COMPOSED = _words("""capital+capital capital-of+capital country+capital-of capital+country
country+country creator+occupation""")
"""Pairs whose second hop is no hop: "the capital of the country whose capital is X"."""
_ENTITY_ANSWERS = _words("capital capital-of country region creator originator birthplace")
"""Kinds whose answer is another entity: it must not share a word stem with the question."""


@dataclass(frozen=True)
class Built:
    """A question, the articles it reads (first hop first), and those it touches: these and
    the bridge's own article, which its search would find."""

    question: Question
    articles: tuple[int, ...]
    touches: tuple[int, ...]
    bridge: str = ""  # a two-hop question's bridge: the title the first hop answers ("" if none)
    then: str = ""  # the second hop asked of the bridge by name ("What nationality was …?")


class HopPlan(NamedTuple):
    """A two-hop question's reading: find ``bridge`` (a title the first passage writes), then
    ask ``then`` of it."""

    bridge: str
    then: str


class Row(NamedTuple):
    """A question being built (``Built`` once it has a uid)."""

    kind: str
    question: str
    golds: tuple[str, ...]
    articles: tuple[int, ...]
    touches: tuple[int, ...]
    bridge: str = ""
    then: str = ""


def article_facts(article: Article, ctx: Context) -> list[Fact]:
    """Every templated fact of one article, its cloze last (see the package docstring)."""
    facts = name_facts(article) + person_facts(article) + place_facts(article, ctx)
    facts += work_facts(article, ctx) + science_facts(article)
    cloze = cloze_fact(article)
    return facts + ([cloze] if cloze else [])


def is_valid(kind: str, question: str, golds: Sequence[str], text: str) -> bool:
    """Every question's checks: golds are spans of ``text`` (the first verbatim), none is in
    the question, and an entity answer shares no word stem with it."""
    asked = f" {normalize_answer(question)} "
    return (
        bool(golds)
        and golds[0] in text
        and all(is_span(g, text) for g in golds)
        and not any(f" {normalize_answer(g)} " in asked for g in golds)
        and not (kind in _ENTITY_ANSWERS and leaks(question, golds[0]))
    )


def build_questions(
    articles: Sequence[Article],
    max_same_answer: int = MAX_SAME_ANSWER,
    max_answer_share: float = MAX_ANSWER_SHARE,
) -> tuple[Built, ...]:
    """All single- then two-hop questions over ``articles``, each set in article order, in
    which at most ``max_same_answer`` and ``max_answer_share`` (at least one) share a first gold."""
    ctx = Context.of(articles)
    text = {a.index: passage(a) for a in articles}
    index_of = {a.title: a.index for a in articles}
    facts = [f for a in articles for f in article_facts(a, ctx)]
    facts = [f for f in facts if is_valid(f.kind, _ask(f, f.about), f.golds, text[f.index])]
    single = [Row(f.kind, _ask(f, f.about), f.golds, (f.index,), (f.index,)) for f in facts]
    about: dict[str, list[Fact]] = defaultdict(list)
    for f in facts:
        if f.entity and f.kind in _COMPOSABLE:
            about[f.entity].append(f)
    double: list[Row] = []
    for first in facts:
        bridge = first.golds[0]
        if not first.bridge or bridge not in ctx.titles:
            continue
        for second in about[bridge]:
            kind = f"{first.kind}+{second.kind}"
            question = _ask(second, first.bridge.replace("{s}", first.about))
            if (
                second.index == first.index
                or kind in _NOT_COMPOSED
                or leaks(question, bridge)
                or not is_valid(second.kind, question, second.golds, text[second.index])
                or any(is_span(g, text[first.index]) for g in second.golds)
            ):  # the last: "a novel by English author Jane Austen" needs no second hop
                continue
            read = (first.index, second.index)
            touches = tuple(dict.fromkeys((*read, index_of[bridge])))
            then = _ask(second, second.about)
            double.append(Row(kind, question, second.golds, read, touches, bridge, then))
    # at most MAX_PER_BRIDGE per (bridge, kind), then in article order
    double = capped(double, [(lambda r: (r.bridge, r.kind), MAX_PER_BRIDGE)])
    double.sort(key=lambda r: (r.articles, r.question))
    single = answer_capped(single, max_same_answer, max_answer_share)
    double = answer_capped(double, max_same_answer, max_answer_share)
    return (*as_built(SOURCE, single), *as_built(SOURCE_2HOP, double))


def as_built(source: str, rows: Sequence[Row]) -> list[Built]:
    """``rows`` as questions of ``source``, uid ``<source>-<articles read>-<n>``."""
    counter: Counter[str] = Counter()
    out = []
    for row in rows:
        prefix = f"{source}-" + "-".join(map(str, row.articles))
        uid = f"{prefix}-{counter[prefix]}"
        counter[prefix] += 1
        hops, index = len(row.articles), row.articles[0]
        q = Question(uid, row.question, row.golds, source, hops, index, kind=row.kind)
        out.append(Built(q, row.articles, row.touches, row.bridge, row.then))
    return out


def _ask(fact: Fact, subject: str) -> str:
    return fact.ask.replace("{s}", subject)


class Asked(Protocol):
    """A question with its gold answers (a ``Row``, or a web question's ``LinkRow``)."""

    @property
    def question(self) -> str: ...
    @property
    def golds(self) -> tuple[str, ...]: ...


A = TypeVar("A", bound=Asked)


def answer_capped(
    rows: Sequence[A],
    max_same: int = MAX_SAME_ANSWER,
    share: float = MAX_ANSWER_SHARE,
    caps: Sequence[tuple[Callable[[A], Hashable], int]] = (),
) -> list[A]:
    """``rows`` less questions asked with two different answers (the first of equal ones kept),
    ``capped`` by ``caps`` and at most ``max_same`` and ``share`` (at least one) per first gold."""
    answers: dict[str, set[frozenset[str]]] = defaultdict(set)
    first: dict[str, A] = {}  # each wording's first row
    for row in rows:
        key = normalize_answer(row.question)
        answers[key].add(frozenset(map(normalize_answer, row.golds)))
        first.setdefault(key, row)
    unique = [row for key, row in first.items() if len(answers[key]) == 1]
    limit = min(max_same, max(1, int(share * len(unique))))
    return capped(unique, [*caps, (lambda r: normalize_answer(r.golds[0]), limit)])


def capped(rows: Sequence[A], caps: Sequence[tuple[Callable[[A], Hashable], int]]) -> list[A]:
    """``rows`` in order, at most ``limit`` sharing a ``key`` per (key, limit) of ``caps``; a
    hash of the question picks which (a row counts towards a cap only when kept)."""
    counts: list[Counter[Hashable]] = [Counter() for _ in caps]
    keep = set()
    for i in sorted(range(len(rows)), key=lambda i: stable_hash(rows[i].question)):
        keys = [key(rows[i]) for key, _ in caps]
        if all(c[k] < limit for c, k, (_, limit) in zip(counts, keys, caps, strict=True)):
            for c, k in zip(counts, keys, strict=True):
                c[k] += 1
            keep.add(i)
    return [row for i, row in enumerate(rows) if i in keep]
