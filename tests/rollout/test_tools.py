"""Rollouts with a toolbox of several tools: each step's calls go to their tool in one batch,
observations are the tools' outcomes, a call sees exactly the earlier calls on its own path
(never a sibling branch's), the forced final step calls nothing, and the leaves are scored with
the agent's tags."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from agent_fixtures import WordTool
from tests.rollout.test_fuzz import ScriptedEngine
from treegrpo.agent.protocol import SearchProtocol, ToolProtocol
from treegrpo.core.budget import TreeShape
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.sampler import AgentLimits, agent_protocol, sample_forest
from treegrpo.rollout.scoring import ScoredRollout, score_leaves
from treegrpo.rollout.snapshot import forest_snapshot
from treegrpo.tools.calculator import calculate
from treegrpo.tools.registry import Call, Toolbox
from treegrpo.viz.trees import render_step

SAMPLING = SamplingParams(max_new_tokens=64)
LIMITS = AgentLimits(max_turns=3, topk=1, max_context=2048)


@dataclass
class Trail:
    """Answers each call with the arguments of the earlier calls on its path, and records its
    batches."""

    name: str = "trail"
    usage: str = "word"
    description: str = "the words called before on this path"
    batches: list[int] = field(default_factory=list)

    def parse(self, text: str) -> str:
        return text

    def call(self, calls: Sequence[Call]) -> list[Any]:
        self.batches.append(len(calls))
        return [[*(p.argument for p in c.history), c.argument] for c in calls]

    def format(self, result: Any) -> str:
        return " ".join(result)


def _box() -> Toolbox:
    box = Toolbox.search_r1(WordTool(), topk=1)
    box.function("calculate", "expression", "evaluates arithmetic; the value comes back")(calculate)
    return box


def test_a_chain_calls_each_tool_and_reads_its_observation(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    tok, box = split_tokenizer, _box()
    proto = agent_protocol(tok, box, 200)
    script = [
        "<think>a</think><calculate>2 * (3 + 4)</calculate>",
        "<think>b</think><search>Ada</search>",
        "<think>c</think><calculate>1/0</calculate>",
        "<think>d</think><answer>14</answer>",
    ]
    engine = ScriptedEngine(tok, script, tags=proto.stop_tags)
    prompt = proto.prompt_ids("what is 2 * (3 + 4)")
    ro = sample_forest(engine, proto, box, [prompt], TreeShape(1), SAMPLING, LIMITS)
    steps = [ro.step(int(v)) for v in ro.forest.path(int(ro.kept[0]))]
    assert [(s.tool, s.tool_status) for s in steps] == [
        ("calculate", "ok"),
        ("search", "ok"),
        ("calculate", "error"),
        ("", ""),
    ]
    assert steps[0].obs_ids == proto.text_ids("14") and steps[0].result == "14"
    assert steps[1].searched and steps[1].obs_ids == proto.observation_ids(steps[1].passages)
    assert steps[2].obs_ids == proto.text_ids("calculate: division by zero")
    assert not steps[2].tool_failed  # the model's mistake, not an outage
    s = score_leaves(ro, [int(ro.kept[0])], [["14"]], proto.decode, tools=proto.names)
    assert (s.reward[0], s.valid_format[0], s.tool_calls[0]) == (1.0, 1.0, 3.0)
    assert {t: float(c[0]) for t, c in s.calls.items()} == {"search": 1.0, "calculate": 2.0}
    assert ro.spend.by_prompt[0].tool_calls == 3


def test_calls_see_only_their_own_path_and_go_in_one_batch_per_tool(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    tok = split_tokenizer
    trail = Trail()
    box = Toolbox([trail])
    proto = ToolProtocol(tok, 200, box)
    script = [f"<think>x</think><trail>w{i}</trail>" for i in range(7)]
    engine = ScriptedEngine(tok, script, tags=proto.stop_tags)
    prompts = [proto.prompt_ids("q one"), proto.prompt_ids("q two")]
    ro = sample_forest(engine, proto, box, prompts, TreeShape(2, 2, 1), SAMPLING, LIMITS, seed=3)
    called = 0
    for v in range(ro.forest.n_nodes):
        if ro.forest.parent[v] < 0 or not ro.step(v).called:
            continue
        called += 1
        path = [ro.step(int(u)) for u in ro.forest.path(v)]
        assert ro.step(v).result == [p.argument for p in path if p.called]  # this path alone
    assert called == sum(trail.batches) and max(trail.batches) > 1  # batched across episodes
    final = [ro.step(int(v)) for v in ro.forest.leaves()]
    assert all(s.final and not s.called for s in final)  # the last turn calls nothing


def test_a_protocol_that_offers_other_tools_than_the_toolbox_is_refused(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    engine = ScriptedEngine(split_tokenizer, ["<answer>x</answer>"])
    with pytest.raises(ValueError, match="protocol offers the tools"):
        sample_forest(
            engine, SearchProtocol(split_tokenizer, 200), _box(), [[1, 2]], TreeShape(1), SAMPLING
        )


def test_the_tree_page_shows_each_call_its_result_and_what_went_wrong(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    tok, box = split_tokenizer, _box()
    proto = agent_protocol(tok, box, 200)
    script = [
        "<think>a</think><calculate>1/0</calculate>",
        "<think>b</think><calculate>6*7</calculate>",
        "<think>c</think><answer>42</answer>",
    ]
    engine = ScriptedEngine(tok, script, tags=proto.stop_tags)
    ro = sample_forest(
        engine, proto, box, [proto.prompt_ids("6*7?")], TreeShape(1), SAMPLING, LIMITS
    )
    leaves = [int(v) for v in ro.kept]
    scores = score_leaves(ro, leaves, [["42"]], proto.decode, tools=proto.names)
    scored = ScoredRollout(ro, leaves, scores, np.array([0]), np.array([0.0]))
    prompts = forest_snapshot(scored, [0], proto.decode, [["42"]], ["6*7?"])
    page = render_step({"step": 1, "algo": {}, "prompts": prompts})
    assert "calculate: 1/0" in page and "calculate error" in page
    assert "<summary>calculate result</summary><pre>\n\n&lt;information&gt;42" in page
