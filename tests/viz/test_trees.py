"""Rollout-tree pages (``rollout.snapshot`` → ``viz.trees``) from a real forest of the tiny
agent: every kept leaf with its reward and advantages, every branch point, no external URL,
balanced HTML."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from agent_fixtures import FACTS, PEOPLE, WordTool, trained_agent
from treegrpo.agent.stops import StepStopper
from treegrpo.core.advantage import tree_advantage
from treegrpo.core.budget import TreeShape
from treegrpo.core.expansion import Expansion
from treegrpo.core.groups import dense_ids
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.sampler import AgentLimits, sample_forest
from treegrpo.rollout.scoring import ScoredRollout, score_leaves
from treegrpo.rollout.snapshot import forest_snapshot
from treegrpo.viz.trees import render_step, write_pages

VOID = {"meta", "input", "br", "hr", "img", "link"}


class Balance(HTMLParser):
    """Fails on a closing tag that does not close the innermost open one."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [v for k, v in attrs if k in ("src", "href") and v and "://" in v]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-3:])
        self.stack.pop()


@pytest.fixture(scope="module")
def snapshot() -> dict:  # type: ignore[type-arg]
    agent = trained_agent()
    people = PEOPLE[:3]
    prompts = [agent.prompt(p) for p in people]
    golds = [[FACTS[p]] for p in people]
    engine = HFEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer))
    rollout = sample_forest(
        engine,
        agent.protocol,
        WordTool(),
        prompts,
        TreeShape(2, 3, 1),
        SamplingParams(max_new_tokens=40, temperature=1.0),
        AgentLimits(max_turns=2, max_context=1024),
        seed=1,
    )
    leaves = [int(x) for x in rollout.kept]
    scores = score_leaves(rollout, leaves, golds, agent.protocol.decode, "em", 0.0)
    prompt_of, tree_of = rollout.forest.leaf_groups(np.array(leaves))
    groups = dense_ids(prompt_of.tolist())
    adv = tree_advantage(scores.reward, groups, tree_of, "intra+inter")
    questions = [f"Where was {p} born" for p in people]
    data = forest_snapshot(
        ScoredRollout(rollout, leaves, scores, groups, adv),
        [0, 1, 2],
        agent.protocol.decode,
        golds,
        questions,
        hops=[1, 2, 1],
    )
    return {
        "step": 7,
        "algo": {"algo": "tree", "m": 2, "n": 3, "l": 1},
        "prompts": data,
        "expected": {
            "leaves": leaves,
            "reward": scores.reward.tolist(),
            "adv": adv.tolist(),
            "expansions": list(
                zip(rollout.expansions.tolist(), rollout.expansion_reasons, strict=True)
            ),
        },
    }


def _nodes(data: dict) -> list[dict]:  # type: ignore[type-arg]
    return [n for p in data["prompts"] for t in p["trees"] for n in t["nodes"]]


def test_the_snapshot_holds_every_kept_leaf_and_the_node_sums(snapshot) -> None:  # type: ignore[no-untyped-def]
    nodes = {n["id"]: n for n in _nodes(snapshot)}
    want = snapshot["expected"]
    kept = [n for n in nodes.values() if n["kept"]]
    assert sorted(n["id"] for n in kept) == sorted(want["leaves"])
    for leaf, reward, adv in zip(want["leaves"], want["reward"], want["adv"], strict=True):
        node = nodes[leaf]
        assert node["reward"] == reward and node["adv"] == pytest.approx(adv)
        assert node["adv_intra"] + node["adv_inter"] == pytest.approx(adv)
    for n in nodes.values():  # a node's sum is its kept descendants' total advantage
        below = [m for m in kept if _descends(nodes, m["id"], n["id"])]
        assert n["sum_adv"] == pytest.approx(sum(m["adv"] for m in below))
        assert n["n_leaves"] == len(below)
    assert any(
        n["depth"] > 0 and n["action"] == "search" and n["observation"] for n in nodes.values()
    )
    assert any(n["reward"] > 0 for n in kept) and any(n["reward"] == 0 for n in kept)


def _descends(nodes: dict, node: int, ancestor: int) -> bool:  # type: ignore[type-arg]
    while node >= 0:
        if node == ancestor:
            return True
        node = nodes[node]["parent"]
    return False


def test_the_page_shows_leaves_branches_and_no_external_url(snapshot) -> None:  # type: ignore[no-untyped-def]
    page = render_step(snapshot, title="run")
    nodes = _nodes(snapshot)
    for n in (n for n in nodes if n["kept"]):
        assert f"reward {n['reward']:g}" in page
        assert f"total {n['adv']:+.2f}" in page and f"intra {n['adv_intra']:+.2f}" in page
    children: dict[int, int] = {}
    for n in nodes:
        children[n["parent"]] = children.get(n["parent"], 0) + 1
    branches = [k for k, c in children.items() if k >= 0 and c > 1]
    assert branches and len(re.findall(r"branch ×\d", page)) == len(branches)
    for p in snapshot["prompts"]:
        assert p["question"] in page and p["golds"][0] in page
        assert f'data-prompt="{p["index"]}" data-hops="{p["hops"]}"' in page
    assert [p["hops"] for p in snapshot["prompts"]] == [1, 2, 1]
    qhops = page[page.index('id="qhops"') :].split("</select>")[0]
    assert re.findall(r'<option value="(\w+)"', qhops) == ["all", "1", "2"]
    parser = Balance()
    parser.feed(page)
    parser.close()
    assert parser.stack == [] and parser.urls == []
    assert "http://" not in page and "https://" not in page


def test_write_pages_makes_an_index_and_a_page_per_kept_step(snapshot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "forests").mkdir()
    for step in (1, 10):
        data = {k: v for k, v in snapshot.items() if k != "expected"} | {"step": step}
        (tmp_path / "forests" / f"step-{step:06d}.json").write_text(json.dumps(data))
    index, *pages = write_pages(tmp_path)
    assert [p.name for p in pages] == ["step-000001.html", "step-000010.html"]
    assert all(f'href="{p.name}"' in index.read_text() for p in pages)
    assert "step 10" in pages[1].read_text()
    with pytest.raises(FileNotFoundError, match="no kept forests"):
        write_pages(tmp_path / "empty")


def test_model_output_in_the_trees_is_text_never_markup(snapshot) -> None:  # type: ignore[no-untyped-def]
    evil = '"><img src=x onerror=alert(1)><script>alert(2)</script>'
    data = json.loads(json.dumps({k: snapshot[k] for k in ("step", "algo", "prompts")}))
    for node in _nodes(data):
        node["text"] = evil
    data["prompts"][0]["question"] = evil
    page = render_step(data)
    assert "<script>alert(2)" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(2)" in page


def _badges(page: str, node: int) -> str:
    """What the page shows on node ``node``'s own line (before its details and children)."""
    found = re.search(rf'data-node="{node}"[^>]*>(.*?)(?:<details|<ul|</li>)', page)
    assert found, node
    return found.group(1)


def test_each_expansion_says_why_beside_its_node(snapshot) -> None:  # type: ignore[no-untyped-def]
    """The default rule's reason ("uniform") on every node an expansion started from, counted
    when the node was picked more than once; nowhere else."""
    started: dict[int, list[str]] = {}
    for v, why in snapshot["expected"]["expansions"]:
        started.setdefault(v, []).append(why)
    assert started and all(w == "uniform" for ws in started.values() for w in ws)
    nodes = {n["id"]: n for n in _nodes(snapshot)}
    page = render_step(snapshot)
    for v, node in nodes.items():
        assert node.get("expansions", []) == started.get(v, [])
        times = len(started.get(v, []))
        line = _badges(page, v)
        if times == 0:
            assert "expanded" not in line
        else:
            count = f" ×{times}" if times > 1 else ""
            assert f'<span class="badge why">expanded{count}: uniform</span>' in line


@pytest.mark.slow
def test_the_entropy_rules_reasons_reach_the_page() -> None:
    agent = trained_agent()
    engine = HFEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer))
    rollout = sample_forest(
        engine,
        agent.protocol,
        WordTool(),
        [agent.prompt(PEOPLE[0])],
        TreeShape(1, 2, 1, expansion=Expansion("entropy", repeat_penalty=1.0)),
        SamplingParams(max_new_tokens=40),
        AgentLimits(max_turns=2, max_context=1024),
        seed=2,
    )
    leaves = [int(x) for x in rollout.kept]
    golds = [[FACTS[PEOPLE[0]]]]
    scores = score_leaves(rollout, leaves, golds, agent.protocol.decode)
    adv = np.zeros(len(leaves))
    scored = ScoredRollout(rollout, leaves, scores, np.zeros(len(leaves), int), adv)
    data = forest_snapshot(scored, [0], agent.protocol.decode, golds, ["q"])
    page = render_step({"step": 1, "algo": {"expansion": "entropy"}, "prompts": data})
    assert "expansion=entropy" in page
    assert len(rollout.expansion_reasons) == 2
    for v, why in zip(rollout.expansions.tolist(), rollout.expansion_reasons, strict=True):
        assert why.startswith("entropy ") and why in _badges(page, v)


def test_the_batch_terms_part_is_shown_beside_intra_and_inter() -> None:
    """With ``algo.batch_baseline`` w the total advantage is intra + inter + w·Â_batch; the
    snapshot holds each part and the page shows the batch part, so the three add up."""
    agent = trained_agent()
    people = PEOPLE[:3]
    engine = HFEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer))
    rollout = sample_forest(
        engine,
        agent.protocol,
        WordTool(),
        [agent.prompt(p) for p in people],
        TreeShape(2, 3, 1),
        SamplingParams(max_new_tokens=40, temperature=1.0),
        AgentLimits(max_turns=2, max_context=1024),
        seed=3,
    )
    leaves = [int(x) for x in rollout.kept]
    golds = [[FACTS[p]] for p in people]
    scores = score_leaves(rollout, leaves, golds, agent.protocol.decode, "em", 0.0)
    prompt_of, tree_of = rollout.forest.leaf_groups(np.array(leaves))
    groups = dense_ids(prompt_of.tolist())
    adv = tree_advantage(scores.reward, groups, tree_of, "intra+inter", batch=2.0)
    scored = ScoredRollout(rollout, leaves, scores, groups, adv)
    data = forest_snapshot(scored, [0, 1, 2], agent.protocol.decode, golds, people, batch=2.0)
    kept = [n for n in _nodes({"prompts": data}) if n["kept"]]
    assert len(kept) == len(leaves)
    assert any(abs(n["adv_batch"]) > 1e-6 for n in kept)  # the rewards differ over the batch
    for n in kept:
        assert n["adv_intra"] + n["adv_inter"] + n["adv_batch"] == pytest.approx(n["adv"])
    page = render_step({"step": 1, "algo": {}, "prompts": data})
    assert all(f", batch {n['adv_batch']:+.2f}, total {n['adv']:+.2f}" in page for n in kept)
    plain = forest_snapshot(scored, [0], agent.protocol.decode, golds[:1], people[:1])
    assert all("adv_batch" not in n for n in _nodes({"prompts": plain}))
