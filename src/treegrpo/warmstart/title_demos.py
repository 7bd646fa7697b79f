"""Scripted demonstrations of the search protocol on title questions (``data.title_questions``):
the material of the protocol warm start for a pretrained model such as SmolLM2, which does not
follow the protocol from the instruction alone.

A demonstration searches the question, says which retrieved passage is the described article
and answers its title, through ``embedded.oracle.run_episode`` with the real search tool and
observation tokens; a question whose title was not retrieved gives none. The step texts:
docs/real-model.md, "The protocol warm start".
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from treegrpo.agent.protocol import SearchProtocol, parse_passages
from treegrpo.core.rewards import normalize_answer
from treegrpo.data.types import Question
from treegrpo.embedded.demos import Demo, demo_from_episode
from treegrpo.embedded.oracle import answer_step, run_episode, search_step
from treegrpo.retrieval.base import SearchTool


def found_title(observation: str, golds: Sequence[str]) -> tuple[int, str] | None:
    """(k, title) of the first ``Doc k`` in an observation whose title is a gold answer (SQuAD-
    normalized), or None."""
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
            return search_step("I need the article this describes.", self.question.question)
        hit = found_title(observations[-1], self.question.golds)
        if hit is None:
            return answer_step("No passage is the article described.", "unknown")
        k, title = hit
        return answer_step(f'Doc {k}, "{title}", is the article described.', title)


def build_title_demos(
    questions: Sequence[Question],
    tool: SearchTool,
    protocol: SearchProtocol,
    n: int,
    seed: int = 0,
    max_turns: int = 3,
    topk: int = 3,
) -> list[Demo]:
    """Up to ``n`` demonstrations from ``questions`` in a seeded order, each question at most
    once; questions whose article was not retrieved are skipped."""
    order = random.Random(f"treegrpo-title-demos:{seed}").sample(list(questions), len(questions))
    demos: list[Demo] = []
    for q in order:
        if len(demos) == n:
            break
        episode = run_episode(TitleOracle(q), protocol, tool, max_turns, topk)
        if episode.score(protocol, q.golds)["em"] == 1.0:
            demos.append(demo_from_episode(q, episode, protocol))
    return demos
