"""Scripted demonstrations of a web agent on the offline wiki site (``data.web_questions``) for
the web warm start: played through the real ``search`` and ``visit`` tools and site, with a
rollout's observation tokens, as a careful agent would (re-searching with
``reader_demos.rewrite`` when the page is not among the results). An episode that ends wrong or
outgrows ``max_context`` gives none, save ``WebMix``'s controlled imperfections, kept only when
wrong (``snippet-visit`` is right, a turn longer). No episode opens a held-out article. Scripts,
shares and counts: docs/real-model.md, "The web warm start".
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from treegrpo.agent.protocol import CLOSE_INFO, OPEN_INFO, ToolProtocol
from treegrpo.data.web_questions import READ, WebQuestion
from treegrpo.embedded.demos import Demo, demo_from_episode
from treegrpo.embedded.oracle import answer_step, run_episode, tool_step
from treegrpo.tools.registry import Toolbox
from treegrpo.tools.web.browse import VisitTool
from treegrpo.tools.web.search import WebSearchTool
from treegrpo.warmstart.reader_demos import CONTEXT_WORDS, rewrite
from treegrpo.website.local import LocalSite

FIRST_THINK = "I need a page that answers this."
CATEGORIES = ("in-snippet", "snippet-visit", "in-page", "read", "link", "skip", "stop")
"""Demonstration categories: the three kinds played right, then the variants."""


@dataclass(frozen=True)
class WebMix:
    """Shares of the demonstrations by question kind (of ``n``; in-page fills the rest), and of
    each kind's variants (of that kind's demonstrations)."""

    in_snippet: float = 0.3
    """In-snippet questions."""
    link: float = 0.3
    """Link questions (in-page questions: the rest, 0.4 by default)."""
    snippet_visit: float = 0.3
    """In-snippet demonstrations that open the page anyway before answering (right)."""
    skip: float = 0.15
    """In-page and link demonstrations answering from the result list, unvisited (wrong)."""
    stop: float = 0.1
    """Link demonstrations that answer page B's title instead of opening it (wrong)."""
    read: float = 0.0
    """In-page demonstrations on reworded wh-questions instead of templated ones
    (``data.web_questions.read_web_questions``)."""

    def __post_init__(self) -> None:
        shares = (self.in_snippet, self.link, self.snippet_visit, self.skip, self.stop, self.read)
        if not all(0 <= s <= 1 for s in shares) or self.in_snippet + self.link > 1:
            raise ValueError(f"shares must lie in [0, 1], in_snippet + link at most 1: {self}")
        if self.skip + self.stop > 1:
            raise ValueError(f"skip + stop must be at most 1: {self}")


def site_toolbox(site: LocalSite, topk: int, visit_chars: int) -> Toolbox:
    """``search`` and ``visit`` over ``site``, as ``jobs.tools.make_toolbox`` builds them."""
    return Toolbox(
        [WebSearchTool(site.search_client(), topk), VisitTool(site.fetcher(), visit_chars)]
    )


@dataclass(frozen=True)
class Result:
    """One entry of a search observation as the agent reads it."""

    k: int
    title: str
    url: str
    snippet: str


_ENTRY = re.compile(r"\[(\d+)\] (.*)")


def information(observation: str) -> str:
    """The text between the information tags of a decoded observation (all of it if none)."""
    body = observation.split(OPEN_INFO.strip(), 1)[-1]
    return body.split(CLOSE_INFO.strip(), 1)[0]


def parse_results(observation: str) -> list[Result]:
    """A search observation's results (``WebSearchTool.format``): ``[k] title``, URL, snippet."""
    lines = information(observation).split("\n")
    out = []
    for i, line in enumerate(lines):
        m = _ENTRY.fullmatch(line)
        if m is None or i + 1 >= len(lines):
            continue
        snippet = lines[i + 2] if i + 2 < len(lines) and not _ENTRY.fullmatch(lines[i + 2]) else ""
        out.append(Result(int(m[1]), m[2], lines[i + 1].strip(), snippet))
    return out


def quote(text: str, span: str) -> str | None:
    """``span``'s first occurrence in ``text`` with up to ``CONTEXT_WORDS`` words before it in
    its sentence and line, or None."""
    at = text.find(span)
    if at < 0:
        return None
    before = re.split(r"(?<=[.;:!?])\s|\n", text[:at])[-1].split()[-CONTEXT_WORDS:]
    return " ".join([*before, span])


def page_text(body: str) -> str:
    """A visit observation's body (``VisitTool.format``) less its title, URL and links."""
    lines = body.split("\n")
    if "Links:" in lines:
        lines = lines[: lines.index("Links:")]
    return "\n".join(line for line in lines if not line.startswith(("Title: ", "URL: ")))


def link_url(observation: str, title: str) -> str | None:
    """The URL a visit observation lists for the link named ``title`` (``- title: URL``)."""
    m = re.search(rf"^- {re.escape(title)}: (\S+)$", information(observation), re.M)
    return m[1] if m else None


class WebOracle:
    """The script of one episode. ``pages``: titles of the pages to open, in order (a link
    question's A then B); ``variant``: "right", "skip", "stop" or "snippet-visit"."""

    def __init__(self, q: WebQuestion, pages: Sequence[str], variant: str = "right") -> None:
        self.q, self.pages, self.variant = q.question, list(pages), variant
        self.gold = q.question.golds[0]
        self.searches: list[str] = []
        self.visited: list[str] = []  # titles of the pages opened

    def __call__(self, observations: Sequence[str]) -> str:
        if not observations:
            return self._search(FIRST_THINK, self.q.question)
        last = observations[-1]
        if not self.visited:
            return self._after_search(last)
        if len(self.visited) < len(self.pages):  # on page A of a link question
            b = self.pages[len(self.visited)]
            url = link_url(last, b)
            if self.variant == "stop":
                return answer_step(f"The page links to {b}.", b)
            if url is None:
                return answer_step("The link is not listed.", "unknown")
            self.visited.append(b)
            return tool_step(f"The page links to {b}; I open it.", "visit", url)
        text = information(last)
        said = quote(page_text(text), self.gold) or quote(text, self.gold)
        if said is None:
            return answer_step("The page does not say.", "unknown")
        return answer_step(f'The page says: "{said}".', self.gold)

    def _after_search(self, observation: str) -> str:
        results = parse_results(observation)
        page = self.pages[0]
        from_snippet = self.q.kind == "in-snippet" and self.variant != "snippet-visit"
        hit = next((r for r in results if r.title == page), None)
        if from_snippet and hit is not None:  # only the question's own page is read
            said = quote(hit.snippet, self.gold)
            if said is None:
                return answer_step("The snippet does not say.", "unknown")
            return answer_step(f'Result {hit.k} ({hit.title}) says: "{said}".', self.gold)
        if hit is None:
            if len(self.searches) == 1:
                again = rewrite(self.q.question, page)
                return self._search("No result is the page I need; I search again.", again)
            return answer_step("No result is the page I need.", "unknown")
        if self.variant == "skip":
            return answer_step(f"Result {hit.k} ({hit.title}) is about this.", hit.title)
        self.visited.append(page)
        why = "to follow its link" if len(self.pages) > 1 else "to read it"
        return tool_step(
            f"Result {hit.k} ({hit.title}) is the page; I open it {why}.", "visit", str(hit.k)
        )

    def _search(self, think: str, query: str) -> str:
        self.searches.append(query)
        return tool_step(think, "search", query)


def play(
    q: WebQuestion,
    pages: Sequence[str],
    variant: str,
    tools: Toolbox,
    protocol: ToolProtocol,
    max_turns: int,
    max_context: int,
) -> Demo | None:
    """One scripted episode's demonstration; None when it outgrows ``max_context``, a right
    variant answers wrong, or a flawed one right."""
    episode = run_episode(WebOracle(q, pages, variant), protocol, tools, max_turns)
    em = episode.score(protocol, q.question.golds)["em"]
    if em != (0.0 if variant in ("skip", "stop") else 1.0):
        return None
    flaws = (variant,) if variant != "right" else ()
    demo = demo_from_episode(q.question, episode, protocol, flaws)
    return demo if len(demo.ids) <= max_context else None


def _kind(w: WebQuestion) -> str:
    """The demonstration kind of ``w``: its question kind, or "read" for a reworded one."""
    return "read" if w.template.startswith(READ) else w.question.kind


def _plan(kind: str, n: int, mix: WebMix, rng: random.Random) -> list[str]:
    """The variants of ``n`` demonstrations of ``kind``, exact shares, in a seeded order."""
    shares = {
        "in-snippet": {"snippet-visit": mix.snippet_visit},
        "link": {"skip": mix.skip, "stop": mix.stop},
    }.get(kind, {"skip": mix.skip})
    plan = [v for v, s in shares.items() for _ in range(round(n * s))]
    plan += ["right"] * (n - len(plan))
    rng.shuffle(plan)
    return plan


def build_web_demos(
    questions: Sequence[WebQuestion],
    titles: Mapping[int, str],
    tools: Toolbox,
    protocol: ToolProtocol,
    n: int,
    mix: WebMix = WebMix(),
    seed: int = 0,
    max_turns: int = 4,
    max_context: int = 3072,
    held_out: Callable[[str], bool] = lambda title: False,
) -> dict[str, list[Demo]]:
    """About ``n`` demonstrations by category (``CATEGORIES``: right ones under their kind,
    variants under their own names) in ``mix``'s exact shares, each question at most once in a
    seeded order (a kind short of questions gives fewer). ``titles``: article index → title; a
    question touching an article that is ``held_out`` is a ValueError.

    Many arguments: the questions, the site's tools and protocol, and the count, mix, seed and
    limits that ``web.build`` takes from its configuration (a class of ``warmstart.web``, which
    imports this module); ``held_out`` is a predicate, so a test can refuse any article."""
    rng = random.Random(f"treegrpo-web-demos:{seed}")
    n_snippet, n_link = round(n * mix.in_snippet), round(n * mix.link)
    n_read = round((n - n_snippet - n_link) * mix.read)
    want = {"in-snippet": n_snippet, "link": n_link, "in-page": n - n_snippet - n_link - n_read}
    want["read"] = n_read
    out: dict[str, list[Demo]] = {c: [] for c in CATEGORIES}
    for kind, count in want.items():
        pending = _plan(kind, count, mix, rng)
        pool = [w for w in questions if _kind(w) == kind]
        for w in rng.sample(pool, len(pool)):
            if not pending:
                break
            pages = [titles[i] for i in w.touches]
            bad = [t for t in pages if held_out(t)]
            if bad:
                raise ValueError(f"{w.question.uid} touches held-out articles: {bad}")
            variant = pending[-1]
            demo = play(w, pages, variant, tools, protocol, max_turns, max_context)
            if demo is not None:
                pending.pop()
                out[kind if variant == "right" else variant].append(demo)
    return out
