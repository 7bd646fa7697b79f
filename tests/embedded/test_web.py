"""The embedded world as a small web: the result list names who a page is about but never the
fact, a visit reads the page; a flawless agent answers every question through the real tools
with a search and a visit per hop, and the demonstrations' flaws (skipping the visit among
them) cost what they should."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from treegrpo.agent.protocol import ToolProtocol
from treegrpo.embedded.demos import Flaws, WebFlawedAgent, build_demos
from treegrpo.embedded.oracle import run_episode
from treegrpo.embedded.search_tokenizer import train_search_tokenizer
from treegrpo.embedded.synthetic import make_world
from treegrpo.embedded.web import WEB_TOOLS, world_web
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.tools.registry import PastCall
from treegrpo.warmstart.tiny import WarmStartConfig

PERFECT = Flaws(early=0.0, stop=0.0, vague=0.0)


@pytest.fixture(scope="module")
def web() -> tuple[object, ToolProtocol]:
    tok = train_search_tokenizer(1024, web=True)
    return tok, ToolProtocol(tok, 160, WEB_TOOLS)


def test_search_lists_titles_and_visit_opens_the_page() -> None:
    world = make_world(3)
    box = world_web(BM25Retriever(world.passages, use_cache=False), world.passages, topk=2)
    fact = world.facts[0]
    title = f"{fact.subject}'s {fact.relation}"
    (hits,) = box.run("search", [(title, ())])
    assert hits.status == "ok" and hits.text.startswith(f"[1] {title}\n[2] ")
    assert fact.object not in hits.text.split("\n")[0]  # the fact is on the page only
    after = (PastCall("search", title, hits.result),)
    out = box.run("visit", [("1", after), ("[2]", after), ("3", after), (title, ()), ("1", ())])
    assert out[0].text == f"{title} is {fact.object}."
    assert out[1].status == "ok" and out[1].text != out[0].text
    assert (out[2].status, out[2].text) == ("error", "visit: the last search has results 1 to 2")
    assert out[3].text == out[0].text  # a page by its title
    assert out[4].text == "visit: there are no results to open yet: search first"


def test_a_flawless_web_agent_answers_everything_with_two_calls_per_hop(web) -> None:  # type: ignore[no-untyped-def]
    _, proto = web
    world = make_world(4)
    box = world_web(BM25Retriever(world.passages, use_cache=False), world.passages, topk=1)
    for q in world.questions[::10]:
        agent = WebFlawedAgent(world.plans[q.uid], PERFECT, 0.0, random.Random(0))
        episode = run_episode(agent, proto, box, max_turns=8)
        s = episode.score(proto, q.golds)
        assert (s["em"], s["valid_format"], s["tool_calls"]) == (1.0, 1.0, 2 * q.hops), q.question
        assert [t.tool for t in episode.turns[:-1]] == ["search", "visit"] * q.hops


def test_web_demonstrations_carry_each_flaw_and_skipping_always_misses(web) -> None:  # type: ignore[no-untyped-def]
    tok, proto = web
    world = make_world(6)
    box = world_web(BM25Retriever(world.passages, use_cache=False), world.passages, topk=1)
    cfg = WarmStartConfig(n_demos=300, seed=1, max_turns=8, web=True, skip=0.3)
    demos = build_demos([(world, box)], proto, cfg)
    drawn = Counter(f for d in demos for f in d.flaws)
    assert set(drawn) == {"early", "stop", "vague", "skip"}
    assert all(d.reward < 1.0 for d in demos if "skip" in d.flaws)  # the entity in hand is wrong
    assert any(d.reward == 1.0 for d in demos if not d.flaws)
    ids = tok("<visit>", add_special_tokens=False)["input_ids"]
    assert len(ids) == 1  # the web tags are single tokens
    for d in demos[:20]:
        assert len(d.ids) == len(d.mask) and d.mask[: d.prompt_len] == [0] * d.prompt_len
