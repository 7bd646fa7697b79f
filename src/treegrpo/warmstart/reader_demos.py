"""Scripted demonstrations of the search protocol, played with the real search tool
(``embedded.oracle.run_episode``); an episode that does not answer exactly gives none. Title
questions (``build_title_demos``) make the protocol warm start, reading questions
(``build_reader_demos``: reads, re-searches, two-hop, closed-book and title) the reader warm
start. Step texts and shares: docs/real-model.md, "The protocol warm start" and "The reader warm
start".
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TypeVar

from treegrpo.agent.protocol import SearchProtocol, parse_passages
from treegrpo.core.rewards import normalize_answer
from treegrpo.data.lead_questions import HopPlan
from treegrpo.data.title_questions import FUNCTION_WORDS, base_title
from treegrpo.data.types import Question
from treegrpo.embedded.demos import Demo, demo_from_episode
from treegrpo.embedded.oracle import Policy, answer_step, run_episode, tool_step
from treegrpo.retrieval.base import SearchTool
from treegrpo.train.config import Checked, ConfigValueError, check_ranges
from treegrpo.warmstart.closed_book import KNOW_THINK, known_answer

_QUESTION_WORDS = """what which who whom whose when where why how is was were are did does do the a
an of in on to by as at it be been fill blank about"""
QUESTION_WORDS = frozenset(_QUESTION_WORDS.split())
"""Words of a question that are no key terms, beside ``title_questions.FUNCTION_WORDS``."""
CONTEXT_WORDS = 6  # words of the passage quoted before the answer in the answering thought
MAX_TURNS, TOPK = 3, 3  # an episode's turn limit and passages per search, the real presets'
FIRST_THINK = "I need a passage that answers this."
CATEGORIES = ("read", "wh", "cloze", "retry", "two-hop", "direct", "title")


@dataclass(frozen=True)
class ReaderMix(Checked):
    """Shares of the demonstrations (of ``n``); single-hop reading fills the rest."""

    two_hop: float = 0.2
    """Two-hop questions (search, read the bridge, search the bridge, answer)."""
    title: float = 0.1
    """Title questions of ``wiki:train`` (answer: the retrieved article's title)."""
    wh: float = 0.3
    """Reworded wh-questions (``lead_questions.wh``), of the single-hop demonstrations (at most)."""
    cloze: float = 0.4
    """Cloze questions, of the single-hop demonstrations (a cap: they are 63% of the set)."""
    retry: float = 0.05
    """Single-hop questions whose first search misses and a rewrite finds the answer, of the
    single-hop demonstrations (at most: they are about 1% of the set)."""
    direct: float = 0.05
    """Single-hop questions answered from the base model's closed-book sentence, unsearched (at
    most: as many as it knows of those probed)."""

    def _check(self) -> None:
        shares = ("two_hop", "title", "wh", "cloze", "retry", "direct")
        check_ranges(self, **dict.fromkeys(shares, "in [0, 1]"))
        taken = self.two_hop + self.title + self.direct  # of n: single-hop reading needs the rest
        if taken > 1:
            raise ConfigValueError("two_hop", "+ title + direct must be at most 1", taken)
        if self.cloze + self.retry > 1:  # of the single-hop demonstrations
            raise ConfigValueError("cloze", "+ retry must be at most 1", self.cloze + self.retry)


def key_terms(question: str) -> list[str]:
    """The question's content words (SQuAD-normalized, without function and question words)."""
    words = normalize_answer(question).split()
    return [w for w in words if w not in FUNCTION_WORDS and w not in QUESTION_WORDS]


def find_span(observation: str, span: str, prefer: str = "") -> tuple[int, str, str] | None:
    """(k, title, quote) of the first Doc (the one titled ``prefer`` first) whose text or title
    holds ``span`` verbatim, or None; ``quote``: up to ``CONTEXT_WORDS`` words of its sentence
    before the span, and the span."""
    docs = parse_passages(observation)
    docs.sort(key=lambda d: d[1] != prefer)
    for k, title, text in docs:
        if span in text:
            before = re.split(r"(?<=[.;:!?])\s", text[: text.find(span)])[-1].split()
            return k, title, " ".join([*before[-CONTEXT_WORDS:], span])
        if span in f'"{title}" ':
            return k, title, span
    return None


def rewrite(question: str, subject: str) -> str:
    """The second query: the name of ``subject`` (an article title) if the question writes it,
    else the key terms."""
    name = base_title(subject)
    if name and name.lower() in question.lower():
        return name
    return " ".join(key_terms(question))


class ReaderOracle:
    """Per hop, searches its query (then its rewrite if the span sought is not retrieved) and
    reads the span; answers the last, or "unknown" when a span was never retrieved (dropped)."""

    def __init__(self, hops: Sequence[tuple[str, str, str]], golds: Sequence[str]) -> None:
        """``hops``: (query, rewrite, article to prefer) per hop; ``bridges``: the span sought
        at each hop but the last."""
        self.hops, self.golds = hops, golds
        self.bridges: list[str] = []
        self.hop, self.tries = 0, 0
        self.searches: list[str] = []

    def __call__(self, observations: Sequence[str]) -> str:
        if not observations:
            return self._search(FIRST_THINK, self.hops[0][0])
        last = self.hop == len(self.hops) - 1
        span = self.golds[0] if last else self.bridges[self.hop]
        hit = find_span(observations[-1], span, self.hops[self.hop][2])
        if hit is None:
            if self.tries == 1:
                query = self.hops[self.hop][1]
                return self._search("No passage holds the answer; I search again.", query)
            return answer_step("No passage holds the answer.", "unknown")
        k, title, quote = hit
        read = f'Doc {k} ({title}) says: "{quote}".'
        if last:
            return answer_step(read, span)
        self.hop, self.tries = self.hop + 1, 0
        return self._search(f"{read} Now: {self.hops[self.hop][0]}", self.hops[self.hop][0])

    def _search(self, think: str, query: str) -> str:
        self.tries += 1
        self.searches.append(query)
        return tool_step(think, "search", query)


def single_oracle(q: Question, subject: str) -> ReaderOracle:
    return ReaderOracle([(q.question, rewrite(q.question, subject), subject)], q.golds)


def two_hop_oracle(q: Question, plan: HopPlan, first: str) -> ReaderOracle:
    """``first``: the title of the article the first hop reads."""
    oracle = ReaderOracle(
        [(q.question, rewrite(q.question, first), first), (plan.then, plan.bridge, plan.bridge)],
        q.golds,
    )
    oracle.bridges = [plan.bridge]
    return oracle


def found_title(observation: str, golds: Sequence[str]) -> tuple[int, str] | None:
    """(k, title) of the first ``Doc k`` titled by a gold (SQuAD-normalized), or None."""
    wanted = {normalize_answer(g) for g in golds}
    for k, title, _ in parse_passages(observation):
        if normalize_answer(title) in wanted:
            return k, title
    return None


class TitleOracle:
    """Searches the question's text once, then answers the retrieved title that is gold (or
    "unknown" when none is, which ``build_title_demos`` drops)."""

    def __init__(self, question: Question) -> None:
        self.question = question

    def __call__(self, observations: Sequence[str]) -> str:
        if not observations:
            think = "I need the article this describes."
            return tool_step(think, "search", self.question.question)
        hit = found_title(observations[-1], self.question.golds)
        if hit is None:
            return answer_step("No passage is the article described.", "unknown")
        k, title = hit
        return answer_step(f'Doc {k}, "{title}", is the article described.', title)


def _episode_demo(
    q: Question, oracle: ReaderOracle, tool: SearchTool, protocol: SearchProtocol
) -> tuple[Demo, int] | None:
    """One oracle episode's demonstration and search count, or None (``_exact_demo``)."""
    demo = _exact_demo(q, oracle, tool, protocol)
    return None if demo is None else (demo, len(oracle.searches))


def _direct_demo(
    q: Question, sentence: str, tool: SearchTool, protocol: SearchProtocol
) -> Demo | None:
    """Answer ``q`` at once with the gold the closed-book ``sentence`` holds (thought:
    ``KNOW_THINK`` and the sentence), or None when it holds none."""
    gold = known_answer(sentence, q.golds)
    if gold is None:
        return None
    step = answer_step(f"{KNOW_THINK} {sentence}", gold)
    return _exact_demo(q, lambda obs: step, tool, protocol)


def _exact_demo(
    q: Question, policy: Policy, tool: SearchTool, protocol: SearchProtocol
) -> Demo | None:
    """The demonstration of ``policy``'s episode (``MAX_TURNS``, ``TOPK``) when it answers one
    of ``q``'s golds exactly, else None."""
    episode = run_episode(policy, protocol, tool, MAX_TURNS, TOPK)
    if episode.score(protocol, q.golds)["em"] != 1.0:
        return None
    return demo_from_episode(q, episode, protocol)


T = TypeVar("T")


def _first(
    items: Iterable[T], limit: int, make: Callable[[T], Demo | None]
) -> list[tuple[T, Demo]]:
    """The first ``limit`` items that ``make`` demonstrates (not None), each with its demo."""
    made = ((item, make(item)) for item in items)  # lazily: nothing is made past the limit
    return list(islice(((item, d) for item, d in made if d is not None), limit))


def build_title_demos(
    questions: Sequence[Question],
    tool: SearchTool,
    protocol: SearchProtocol,
    n: int,
    seed: int = 0,
) -> list[Demo]:
    """Up to ``n`` demonstrations, questions in a seeded order, those not retrieved skipped."""
    order = random.Random(f"treegrpo-title-demos:{seed}").sample(list(questions), len(questions))
    made = _first(order, n, lambda q: _exact_demo(q, TitleOracle(q), tool, protocol))
    return [demo for _, demo in made]


def build_reader_demos(
    single: Sequence[Question],
    two_hop: Sequence[Question],
    titles: Sequence[Question],
    tool: SearchTool,
    protocol: SearchProtocol,
    n: int,
    mix: ReaderMix = ReaderMix(),
    subject: Callable[[Question], str] = lambda q: "",
    plan: Callable[[Question], HopPlan | None] = lambda q: None,
    seed: int = 0,
    known: Sequence[tuple[Question, str]] = (),
    wh: Sequence[Question] = (),
) -> dict[str, list[Demo]]:
    """About ``n`` demonstrations by category (``CATEGORIES``), each question used at most once
    in a seeded order: ``mix.title`` from ``titles``, ``mix.two_hop`` from ``two_hop`` (as many
    as retrieved), at most ``mix.direct`` from ``known`` (single-hop questions with the base
    model's closed-book sentence; those holding a gold), at most ``mix.wh`` of the single-hop
    rest from ``wh``, the rest from ``single`` (``_single_hop``). ``subject``: a question's
    article title (for its rewrite); ``plan``: a two-hop question's bridge and second hop.

    Many arguments: five question sources and two lookups, which ``reader.build`` draws from
    the wiki data, beside its configuration's count, mix and seed (a class of
    ``warmstart.reader``, which imports this module)."""
    rng = random.Random(f"treegrpo-reader-demos:{seed}")
    out: dict[str, list[Demo]] = {c: [] for c in CATEGORIES}
    direct = _first(known, round(n * mix.direct), lambda k: _direct_demo(*k, tool, protocol))
    out["direct"] = [demo for _, demo in direct]

    def play(q: Question) -> tuple[Demo, int] | None:
        return _episode_demo(q, single_oracle(q, subject(q)), tool, protocol)

    def one(q: Question) -> Demo | None:
        return _exact_demo(q, single_oracle(q, subject(q)), tool, protocol)

    def two(q: Question) -> Demo | None:
        p = plan(q)
        return _exact_demo(q, two_hop_oracle(q, p, subject(q)), tool, protocol) if p else None

    def holds(q: Question) -> bool:  # searching the question retrieves golds[0]
        return any(q.golds[0] in p.contents for p in tool.search([q.question], TOPK)[0])

    n_two, n_title = round(n * mix.two_hop), round(n * mix.title)
    out["two-hop"] = [d for _, d in _first(rng.sample(list(two_hop), len(two_hop)), n_two, two)]
    n_single = n - n_title - len(out["two-hop"]) - len(out["direct"])
    out["wh"] = [d for _, d in _first(rng.sample(list(wh), len(wh)), round(n_single * mix.wh), one)]
    used = {q.uid for (q, _), _ in direct}
    rest = [q for q in rng.sample(list(single), len(single)) if q.uid not in used]
    out |= _single_hop(rest, n_single - len(out["wh"]), mix, play, holds)
    out["title"] = build_title_demos(titles, tool, protocol, n_title, seed)
    return out


def _single_hop(
    questions: Iterable[Question],
    n: int,
    mix: ReaderMix,
    play: Callable[[Question], tuple[Demo, int] | None],
    holds: Callable[[Question], bool],
) -> dict[str, list[Demo]]:
    """``n`` single-hop demonstrations from ``questions`` in order, by category: cloze at
    ``mix.cloze``, re-searches at most ``mix.retry``, reads the rest and what the others lack.
    ``play``: a demonstration and its search count, or None; ``holds``: whether the first
    search retrieves the answer."""
    want = {"cloze": round(n * mix.cloze), "retry": round(n * mix.retry)}
    want["read"] = n - want["cloze"] - want["retry"]
    out: dict[str, list[Demo]] = {c: [] for c in want}
    spare: list[Demo] = []  # reads beyond their share: they fill what cloze or retry lack
    for q in questions:
        if all(len(out[c]) >= want[c] for c in want):
            break
        cloze = q.kind.startswith("cloze")
        if cloze and len(out["cloze"]) >= want["cloze"]:
            continue
        full = len(out["read"]) >= want["read"] and len(spare) >= want["cloze"] + want["retry"]
        if full and holds(q):
            continue  # only re-searches are still wanted: skip the episode of a plain read
        made = play(q)
        if made is None:
            continue
        demo, searches = made
        category = "retry" if searches > 1 else "cloze" if cloze else "read"
        if len(out[category]) < want[category]:
            out[category].append(demo)
        elif category == "read":
            spare.append(demo)
    out["read"] += spare[: max(0, n - sum(len(ds) for ds in out.values()))]
    return out
