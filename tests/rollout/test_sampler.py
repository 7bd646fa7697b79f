"""Tree and chain rollouts with a tiny trained agent, the real engine and an in-memory tool."""

from __future__ import annotations

import numpy as np
import pytest

from agent_fixtures import PEOPLE, Agent, WordTool, trained_agent, trees_by_prompt
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.core.expansion import Expansion
from treegrpo.engine.hf import HFEngine, StepRequest, StepResult
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.records import Rollout, merge_rollouts
from treegrpo.rollout.sampler import AgentLimits, ForestSampler, pipelined, sample_forest

SAMPLING = SamplingParams(max_new_tokens=40)
LIMITS = AgentLimits(max_turns=2, topk=3, max_context=1024)


class RecordingEngine(HFEngine):
    """The real engine, remembering every token it sampled."""

    sampled: list[list[int]]
    requests: list[StepRequest]
    requests_per_call: list[int]

    def step(self, requests, params, generator=None):  # type: ignore[no-untyped-def]
        out: list[StepResult] = super().step(requests, params, generator)
        self.sampled = getattr(self, "sampled", []) + [r.tokens for r in out]
        self.requests = getattr(self, "requests", []) + list(requests)
        self.requests_per_call = [*getattr(self, "requests_per_call", []), len(requests)]
        return out


@pytest.fixture(scope="module")
def agent() -> Agent:
    return trained_agent()


def _roll(
    agent: Agent,
    shape: TreeShape,
    seed: int = 0,
    reuse: bool = True,
    n_prompts: int = 3,
    limits: AgentLimits = LIMITS,
) -> tuple[Rollout, RecordingEngine, WordTool]:
    eng = RecordingEngine(
        agent.model, agent.tokenizer, StepStopper(agent.tokenizer), reuse_cache=reuse
    )
    tool = WordTool()
    prompts = [agent.prompt(p) for p in PEOPLE[:n_prompts]]
    ro = sample_forest(eng, agent.protocol, tool, prompts, shape, SAMPLING, limits, seed=seed)
    return ro, eng, tool


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape", [TreeShape(4), TreeShape(1, 2, 1), TreeShape(2, 2, 1), TreeShape(2, 3, 2, k=4)]
)
def test_forest_shapes(agent: Agent, shape: TreeShape) -> None:
    ro, _, _ = _roll(agent, shape)
    f = ro.forest
    assert f.n_trees == 3 * shape.m
    assert np.bincount(f.prompt_id[f.roots]).tolist() == [shape.m] * 3
    for tree in range(f.n_trees):
        assert len(f.leaves(tree)) == shape.leaves_per_tree  # each expansion adds one leaf
    assert (
        np.bincount(f.tree_id[ro.kept]).tolist()
        == [min(shape.k or 99, shape.leaves_per_tree)] * f.n_trees
    )
    assert f.depth.max() <= LIMITS.max_turns + 1
    assert ro.spend.total().leaves == f.n_trees * shape.leaves_per_tree


@pytest.mark.slow
def test_leaf_tokens_are_exactly_the_sampled_tokens(agent: Agent) -> None:
    ro, eng, _ = _roll(agent, TreeShape(2, 2, 1))
    sampled = [t for toks in eng.sampled for t in toks]
    recorded = [t for s in ro.steps for t in s.action_ids]
    assert sorted(map(tuple, eng.sampled)) == sorted(tuple(s.action_ids) for s in ro.steps)
    assert len(sampled) == len(recorded)
    for leaf in ro.forest.leaves():
        seq = ro.leaf_sequence(int(leaf))
        ids, mask = np.array(seq.ids), np.array(seq.action_mask)
        assert len(ids) == len(mask) == len(seq.logprobs)
        assert ids[mask == 1].tolist() == ro.action_ids(int(leaf))
        # mask 0 exactly on the prompt and the observations
        path = ro.forest.path(int(leaf))
        obs = [t for n in path for t in ro.step(int(n)).obs_ids]
        assert ids[mask == 0].tolist() == ro.prompts[int(ro.forest.prompt_id[leaf])] + obs
        assert np.all(np.array(seq.logprobs)[mask == 1] < 0)


@pytest.mark.slow
def test_every_step_starts_from_exactly_its_parents_path(agent: Agent) -> None:
    """Request k of the engine produced step k (payload k). Its context must be bit-identical to
    the prompt plus every action and observation token on the path to the node it hangs under,
    and an expansion must reuse the parent's cached segments instead of recomputing them."""
    ro, eng, _ = _roll(agent, TreeShape(1, 3, 2))
    f = ro.forest
    node_of = {int(f.payload[n]): n for n in range(f.n_nodes) if f.parent[n] >= 0}
    first_child_ctx: dict[int, set[int]] = {}
    assert len(eng.requests) == len(ro.steps)
    for k, req in enumerate(eng.requests):
        parent = int(f.parent[node_of[k]])
        expected = list(ro.prompts[int(f.prompt_id[parent])])
        for n in f.path(parent):
            expected += ro.step(int(n)).action_ids + ro.step(int(n)).obs_ids
        assert req.context.context_tokens() + req.pending == expected
        segs = {id(s) for s in req.context.path()}
        if parent in first_child_ctx:  # an expansion: its cached context is shared, not rebuilt
            assert segs <= first_child_ctx[parent] | {id(s) for s in req.context.path()[-1:]}
            assert len(req.pending) == 1
        else:
            first_child_ctx[parent] = segs


@pytest.mark.slow
def test_the_forest_is_reproducible_by_seed(agent: Agent) -> None:
    def digest(ro: Rollout) -> list[object]:
        return [ro.forest.parent.tolist(), [s.action_ids for s in ro.steps], ro.kept.tolist()]

    a, _, _ = _roll(agent, TreeShape(2, 2, 1, k=3), seed=5)
    b, _, _ = _roll(agent, TreeShape(2, 2, 1, k=3), seed=5)
    c, _, _ = _roll(agent, TreeShape(2, 2, 1, k=3), seed=6)
    assert digest(a) == digest(b)
    assert digest(a) != digest(c)


def spent(ro: Rollout) -> dict[int, tuple[int, int, int]]:
    """Tokens generated, searches and leaves per prompt."""
    return {k: (s.generated, s.tool_calls, s.leaves) for k, s in ro.spend.by_prompt.items()}


@pytest.mark.slow
@pytest.mark.parametrize("shape", [TreeShape(2, 2, 1, k=3), TreeShape(3)])
def test_a_prompts_trees_do_not_depend_on_the_rest_of_the_batch(
    agent: Agent, shape: TreeShape
) -> None:
    """What a prompt samples depends on the seed and its key, not on the prompts beside it, so
    a batch split into parts (``prompt_keys``), as over rollout workers, gives the same trees."""
    eng = HFEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer))
    prompts = [agent.prompt(p) for p in PEOPLE[:4]]
    tool = WordTool()
    whole = sample_forest(eng, agent.protocol, tool, prompts, shape, SAMPLING, LIMITS, seed=7)
    parts = []
    for idx in ([2, 0], [3], [1]):
        part = [prompts[i] for i in idx]
        ro = sample_forest(
            eng, agent.protocol, tool, part, shape, SAMPLING, LIMITS, seed=7, prompt_keys=idx
        )
        parts.append((idx, ro))
    by_part = {k: t for idx, ro in parts for k, t in zip(idx, trees_by_prompt(ro), strict=True)}
    want = trees_by_prompt(whole)
    assert [by_part[k] for k in range(4)] == want
    # merged back into one rollout of the batch: the same trees, prompts and spend per prompt
    merged = merge_rollouts(parts, 4)
    assert trees_by_prompt(merged) == want and merged.prompts == whole.prompts
    for idx, ro in parts:  # each prompt's spend as its part booked it
        booked = [ro.spend.by_prompt[j] for j in range(len(idx))]
        assert [merged.spend.by_prompt[k] for k in idx] == booked
    # the same tokens and searches as the whole batch (positions computed depend on padding)
    assert spent(merged) == spent(whole)
    assert len(merged.kept) == len(whole.kept) and len(merged.expansions) == len(whole.expansions)
    assert sorted(merged.forest.depth[merged.expansions].tolist()) == sorted(
        whole.forest.depth[whole.expansions].tolist()
    )
    with pytest.raises(ValueError, match=r"cover prompts 0\.\.3 once each"):
        merge_rollouts(parts[:2], 4)
    assert len({str(t) for trees in want for t in trees}) > 1  # the trees are not all alike
    other = sample_forest(eng, agent.protocol, tool, prompts, shape, SAMPLING, LIMITS, seed=8)
    assert trees_by_prompt(other) != want


@pytest.mark.slow
def test_greedy_rollouts_do_not_depend_on_the_cache(agent: Agent) -> None:
    greedy = SamplingParams(greedy=True, max_new_tokens=40)
    forests = []
    for reuse in (True, False):
        eng = HFEngine(
            agent.model, agent.tokenizer, StepStopper(agent.tokenizer), reuse_cache=reuse
        )
        prompts = [agent.prompt(p) for p in PEOPLE[:4]]
        ro = sample_forest(
            eng, agent.protocol, WordTool(), prompts, TreeShape(2, 2, 1), greedy, LIMITS, seed=0
        )
        forests.append(
            (
                ro.forest.parent.tolist(),
                [s.action_ids for s in ro.steps],
                ro.spend.total().processed,
            )
        )
    assert forests[0][:2] == forests[1][:2]
    assert forests[0][2] < forests[1][2]  # the cache computes fewer positions


@pytest.mark.slow
def test_searches_hit_the_tool_and_observations_follow(agent: Agent) -> None:
    ro, _, tool = _roll(agent, TreeShape(2, 2, 1))
    searches = [s for s in ro.steps if s.action.kind == "search" and not s.final and s.obs_ids]
    assert searches, "the trained agent should search"
    assert len(tool.calls) == sum(s.searched for s in ro.steps)
    assert ro.spend.total().tool_calls == len(tool.calls)
    for s in searches:
        text = agent.protocol.decode(s.obs_ids)
        assert text.startswith("\n\n<information>Doc 1(Title: ")
    answered = [s for s in ro.steps if s.action.kind == "answer"]
    assert answered and all(not s.obs_ids for s in answered)


def test_forced_final_step_does_not_search(agent: Agent) -> None:
    ro, _, tool = _roll(agent, TreeShape(4), limits=AgentLimits(max_turns=0, max_context=1024))
    assert tool.calls == []
    assert all(s.final and not s.obs_ids for s in ro.steps)
    assert ro.forest.depth.max() == 1


def test_context_limit_ends_episodes(agent: Agent) -> None:
    prompt_len = len(agent.prompt(PEOPLE[0]))
    tight = AgentLimits(max_turns=3, max_context=prompt_len + 30)
    ro, _, _ = _roll(agent, TreeShape(2, 2, 1), limits=tight)
    for leaf in ro.forest.leaves():
        assert len(ro.leaf_sequence(int(leaf)).ids) <= tight.max_context


@pytest.mark.slow
def test_token_efficiency_with_and_without_cache(agent: Agent) -> None:
    """Positions computed ÷ distinct forest tokens: near 1 with the cache, far above without."""
    cached, _, _ = _roll(agent, TreeShape(2, 2, 1), n_prompts=4)
    plain, _, _ = _roll(agent, TreeShape(2, 2, 1), n_prompts=4, reuse=False)
    ratio = cached.spend.total().processed / cached.distinct_tokens()
    assert ratio < 1.1
    assert plain.spend.total().processed / plain.distinct_tokens() > 2 * ratio


def test_step_request_from_a_leaf_context_is_possible(agent: Agent) -> None:
    # Engines accept any context: a caller may continue a finished leaf (e.g. for evaluation).
    eng = HFEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer))
    (r,) = eng.step([StepRequest(eng.root(), agent.prompt(PEOPLE[0]))], SAMPLING)
    (r2,) = eng.step([StepRequest(r.end, [r.tokens[-1]])], SAMPLING)
    assert r2.end.context_tokens()[: r.end.length] == r.end.context_tokens()


@pytest.mark.slow
def test_expansions_record_their_start_nodes(agent: Agent) -> None:
    """The rollout keeps the node each expansion branched from: N per tree and round, never a
    leaf, and each new branch hangs right under it."""
    shape = TreeShape(2, 3, 2)
    ro, _, _ = _roll(agent, shape)
    f = ro.forest
    assert ro.expansions.shape == (f.n_trees * shape.n * shape.l,)
    assert not f.is_leaf[ro.expansions].any()
    chains, _, _ = _roll(agent, TreeShape(4))
    assert chains.expansions.size == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape",
    [
        TreeShape(2, 2, 1, k=3),
        TreeShape(2, 3, 2),
        TreeShape(3, 2, 1, expansion=Expansion("no-root")),
    ],
)
def test_rounds_started_tree_by_tree_give_the_forests_of_whole_rounds(
    agent: Agent, shape: TreeShape
) -> None:
    """``ForestSampler.pipeline`` (a tree's next round starts when its own episodes end) gives
    the trees, kept leaves and spend of rounds run for the whole batch at once, in no more
    engine calls (a tree's chain and branches in sequence, not the slowest chain's then the
    slowest branch's)."""
    assert pipelined(shape)
    eng = RecordingEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer))
    prompts = [agent.prompt(p) for p in PEOPLE[:4]]
    piped = sample_forest(eng, agent.protocol, WordTool(), prompts, shape, SAMPLING, LIMITS, seed=3)
    piped_calls = len(eng.requests_per_call)
    eng.requests_per_call = []
    whole = ForestSampler(eng, agent.protocol, WordTool(), prompts, shape, SAMPLING, LIMITS, seed=3)
    whole.begin()
    for _ in range(shape.l):
        whole.expand()
    rounds = whole.finish()
    assert trees_by_prompt(piped) == trees_by_prompt(rounds)
    assert spent(piped) == spent(rounds)
    assert piped.expansion_counts.tolist() == rounds.expansion_counts.tolist()
    assert sorted(piped.expansion_reasons) == sorted(rounds.expansion_reasons)
    assert piped_calls <= len(eng.requests_per_call)
    assert not pipelined(TreeShape(2, 2, 1, expansion=Expansion("informed")))
    assert not pipelined(TreeShape(2, 2, 1, expansion=Expansion(budget="difficulty")))
