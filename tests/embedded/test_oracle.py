"""An agent that searches perfectly (``FlawedAgent`` without flaws) scores 100% EM through the
real pipeline: real BM25 over the world's corpus, the real observation format, the real reward,
reading every bridge entity from the passages it retrieved."""

from __future__ import annotations

import random

from treegrpo.agent.protocol import SearchProtocol
from treegrpo.embedded.demos import FlawedAgent, Flaws
from treegrpo.embedded.oracle import run_episode
from treegrpo.embedded.synthetic import Plan, train_eval_worlds
from treegrpo.retrieval.bm25 import BM25Retriever


def oracle(plan: Plan) -> FlawedAgent:
    return FlawedAgent(plan, Flaws(early=0.0, stop=0.0, vague=0.0), random.Random(0))


def test_oracle_scores_every_question(tag_tokenizer) -> None:  # type: ignore[no-untyped-def]
    _, world = train_eval_worlds(0)
    bm25 = BM25Retriever(world.passages, use_cache=False)
    protocol = SearchProtocol(tag_tokenizer, max_obs_tokens=4000)
    results = []
    for q in world.questions:
        episode = run_episode(oracle(world.plans[q.uid]), protocol, bm25, max_turns=4)
        results.append((q, episode.score(protocol, q.golds)))
    wrong = [q.question for q, s in results if s["em"] != 1.0]
    assert wrong == []
    assert all(s["reward"] == 1.0 and s["valid_format"] == 1.0 for _, s in results)
    assert all(s["searches"] == q.hops for q, s in results)


def test_oracle_fails_when_retrieval_hides_the_fact(tag_tokenizer) -> None:  # type: ignore[no-untyped-def]
    """The oracle really reads the passages: with a retriever that returns nothing useful it
    cannot answer multi-hop questions."""
    _, world = train_eval_worlds(0)

    class Useless:
        def search(self, queries, topk=3):  # type: ignore[no-untyped-def]
            return [[world.passages[0]] for _ in queries]

    protocol = SearchProtocol(tag_tokenizer, max_obs_tokens=4000)
    multi = [q for q in world.questions if q.hops >= 2][:20]
    ems = [
        run_episode(oracle(world.plans[q.uid]), protocol, Useless(), 4).score(protocol, q.golds)[
            "em"
        ]
        for q in multi
    ]
    assert sum(ems) <= 2


def test_counted_thoughts_count_down_the_relations_left(tag_tokenizer) -> None:  # type: ignore[no-untyped-def]
    """With ``counted`` each thought starts with the number of relations still to follow, one
    less after every fact read, and the answer's thought says none is left; without it the
    thoughts are the plain plans, and the actions are the same either way."""
    _, world = train_eval_worlds(0)
    bm25 = BM25Retriever(world.passages, use_cache=False)
    protocol = SearchProtocol(tag_tokenizer, max_obs_tokens=4000)
    q = next(q for q in world.questions if q.hops == 3)
    plan = world.plans[q.uid]
    texts = {}
    for counted in (False, True):
        agent = FlawedAgent(plan, Flaws(early=0.0, stop=0.0, vague=0.0), random.Random(0), counted)
        episode = run_episode(agent, protocol, bm25, max_turns=4)
        texts[counted] = [protocol.decode(t.action_ids) for t in episode.turns]
    thoughts = [t.split("</think>")[0].removeprefix("<think>").strip() for t in texts[True]]
    assert [t.split(" left: ")[0] for t in thoughts] == ["3", "2", "1", "0"]
    plain = [t.split("</think>")[0].removeprefix("<think>").strip() for t in texts[False]]
    assert [t.split(" left: ")[1] for t in thoughts] == plain
    assert plain[0] == "'s ".join([plan.start, *plan.relations])
    assert [t.split("</think>")[1] for t in texts[True]] == [
        t.split("</think>")[1] for t in texts[False]
    ]
