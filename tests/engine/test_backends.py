"""The same checks on every installed engine (``engine.base.Engine``): greedy steps equal to
``HFEngine``'s, sampled-token log-probs equal to the trainer's under the sampled distribution,
forests of the same shape and accounting, prefix-cache reuse, and weight pushes. The vLLM cases
run where vLLM is installed (``make test-vllm``) and skip elsewhere."""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from agent_fixtures import CORPUS, FACTS, PEOPLE, Agent, WordTool, trained_agent
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.engine.base import Engine, StepRequest, StepResult
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.eval.evaluate import EvalItem, evaluate
from treegrpo.jobs.presets import DataConfig
from treegrpo.models.tiny import tiny_qwen2
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.rollout.sampler import AgentLimits, sample_forest
from treegrpo.rollout.source import LocalRollout
from treegrpo.train.config import AlgorithmConfig, ModelConfig, OptimConfig
from treegrpo.train.logprobs import token_logprobs
from treegrpo.train.policy import prepare_policy
from treegrpo.train.step import Batch, Learning, Rollouts, StepSettings, rl_step

KINDS = [
    "hf",
    pytest.param(
        "vllm",
        marks=[
            pytest.mark.vllm,
            pytest.mark.skipif(
                importlib.util.find_spec("vllm") is None,
                reason="vLLM is not installed here (make setup-vllm; make test-vllm runs these)",
            ),
        ],
    ),
]
GREEDY = SamplingParams(greedy=True, max_new_tokens=40)
LIMITS = AgentLimits(max_turns=2, topk=3, max_context=1024)
AGENT = DataConfig(max_turns=2, topk=3, max_context=1024, max_new_tokens=40, max_obs_tokens=200)


def make_engine(kind: str, model: torch.nn.Module, tokenizer: object) -> Engine:
    stopper = StepStopper(tokenizer)
    if kind == "hf":
        return HFEngine(model, tokenizer, stopper)
    from treegrpo.engine.vllm import VLLMEngine

    return VLLMEngine(model, tokenizer, stopper, kv_cache_bytes=64 << 20)


@pytest.fixture(scope="module")
def agent() -> Agent:
    return trained_agent(heads=2)  # head size 32: vLLM's CPU attention has no smaller one


@pytest.fixture(scope="module", params=KINDS)
def engine(request: pytest.FixtureRequest, agent: Agent) -> Iterator[Engine]:
    """An engine of each kind on the agent, whose weights each test leaves as it found them."""
    yield make_engine(request.param, agent.model, agent.tokenizer)


class _Tally:
    """An engine that records, per step result, the context positions its request started from
    and how many of them the engine says it read from its cache."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.pairs: list[tuple[int, int]] = []  # (context + pending positions, reused)

    def __getattr__(self, name: str) -> object:
        return getattr(self.engine, name)

    def step(self, requests, params, generator=None):  # type: ignore[no-untyped-def]
        out = self.engine.step(requests, params, generator)
        for req, res in zip(requests, out, strict=True):
            self.pairs.append((req.context.length + len(req.pending), res.reused))
        return out


def _prompts(agent: Agent, n: int = 3) -> list[list[int]]:
    return [agent.prompt(p) for p in PEOPLE[:n]]


def _observation(agent: Agent) -> list[int]:
    return agent.protocol.observation_ids(['"Doc"\nAlan was born in Rome.'])


def _two_turns(eng: Engine, prompts: list[list[int]], obs: list[int]) -> list[StepResult]:
    """A greedy first step from each prompt, then a second after an observation."""
    first = eng.step([StepRequest(eng.root(), p) for p in prompts], GREEDY)
    second = eng.step([StepRequest(r.end, [r.tokens[-1], *obs]) for r in first], GREEDY)
    return first + second


def _reference_logprobs(
    model: torch.nn.Module, context: list[int], tokens: list[int], temperature: float
) -> list[float]:
    """log softmax(logits / T) of each token, from one plain forward pass."""
    with torch.no_grad():
        logits = model(torch.tensor([context + tokens])).logits[0].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return [logp[len(context) + j - 1, t].item() for j, t in enumerate(tokens)]


@pytest.mark.slow
def test_greedy_steps_equal_hf(engine: Engine, agent: Agent) -> None:
    prompts, obs = _prompts(agent), _observation(agent)
    ref = _two_turns(
        HFEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer)), prompts, obs
    )
    got = _two_turns(engine, prompts, obs)
    for r, g in zip(ref, got, strict=True):
        assert g.tokens == r.tokens
        assert g.finish == r.finish
        assert g.logprobs == pytest.approx(r.logprobs, abs=1e-3)
        assert g.end.context_tokens() == r.end.context_tokens()
        assert g.fork.context_tokens() == r.fork.context_tokens()
    assert any(r.finish == "stop" for r in ref)  # the step-end tags were hit


@pytest.mark.parametrize("kind", KINDS)
def test_greedy_steps_equal_hf_with_tags_of_several_tokens(kind: str, split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    """Tags spelled '</', 'answer', '>': a backend that stops at single ids goes on after a
    '>' that completes no tag and still ends where ``HFEngine`` does; going on, it reads the
    step's own start from its cache again, which does not count as reused context."""
    model = tiny_qwen2(len(split_tokenizer), hidden=64, layers=2, heads=2, seed=3)
    texts = ["<think>I should search</think><search>capital", "<answer>Par", "x"]
    prompts = [split_tokenizer(t)["input_ids"] for t in texts]
    params = SamplingParams(greedy=True, max_new_tokens=30)
    ref = HFEngine(model, split_tokenizer, StepStopper(split_tokenizer))
    eng = make_engine(kind, model, split_tokenizer)
    want = ref.step([StepRequest(ref.root(), p) for p in prompts], params)
    got = eng.step([StepRequest(eng.root(), p) for p in prompts], params)
    assert [g.tokens for g in got] == [w.tokens for w in want]
    assert [g.finish for g in got] == [w.finish for w in want]
    # a second step on a context long enough for whole cache blocks (vLLM's are 32 tokens)
    obs = split_tokenizer(" <information>" + "o " * 80 + "</information>")["input_ids"]
    steps = [StepRequest(r.end, [r.tokens[-1], *obs]) for r in got]
    again, again_ref = eng.step(steps, params), ref.step(steps, params)
    assert [g.tokens for g in again] == [w.tokens for w in again_ref]
    for req, res in zip(steps, again, strict=True):
        assert 0 <= res.reused <= req.context.length + len(req.pending)
    assert any(res.reused > 0 for res in again)


def test_sampled_logprobs_are_the_trainers_at_the_sampling_temperature(
    engine: Engine, agent: Agent
) -> None:
    """Log-probs of the distribution sampled from, softmax(logits / T), in the engine and in the
    trainer's ``token_logprobs``; at T = 0.7 they differ from the model's own by far more than
    the tolerance, so returning softmax(logits) log-probs fails here."""
    t = 0.7
    prompts = _prompts(agent)
    params = SamplingParams(temperature=t, max_new_tokens=30)
    gen = torch.Generator(device=engine.device).manual_seed(0)
    results = engine.step([StepRequest(engine.root(), p) for p in prompts], params, gen)
    for p, r in zip(prompts, results, strict=True):
        ref = _reference_logprobs(agent.model, p, r.tokens, t)
        assert r.logprobs == pytest.approx(ref, abs=1e-3)
        ids = torch.tensor([p + r.tokens])
        with torch.no_grad():
            trainer = token_logprobs(agent.model, ids, None, temperature=t)[0][0, len(p) - 1 :]
        assert trainer.tolist() == pytest.approx(r.logprobs, abs=1e-3)
        raw = _reference_logprobs(agent.model, p, r.tokens, 1.0)
        assert max(abs(a - b) for a, b in zip(raw, r.logprobs, strict=True)) > 1e-2


def test_seeded_steps_repeat(engine: Engine, agent: Agent) -> None:
    prompts = _prompts(agent) * 2  # the same context twice: several samples of one node
    params = SamplingParams(temperature=1.5, max_new_tokens=30)
    runs = []
    for _ in range(2):
        gen = torch.Generator(device=engine.device).manual_seed(7)
        runs.append(
            [
                r.tokens
                for r in engine.step([StepRequest(engine.root(), p) for p in prompts], params, gen)
            ]
        )
    assert runs[0] == runs[1]


@pytest.mark.parametrize("shape", [TreeShape(2, 2, 1), TreeShape(4)])
def test_forest_shape_accounting_and_cache_reuse(
    engine: Engine, agent: Agent, shape: TreeShape
) -> None:
    prompts = _prompts(agent)
    params = SamplingParams(max_new_tokens=40)
    tool = WordTool()
    tally = _Tally(engine)
    ro = sample_forest(tally, agent.protocol, tool, prompts, shape, params, LIMITS, seed=3)  # type: ignore[arg-type]
    # a step reads from the cache at most the context it starts from
    assert tally.pairs and all(0 <= reused <= needed for needed, reused in tally.pairs)
    f = ro.forest
    assert f.n_trees == len(prompts) * shape.m
    for tree in range(f.n_trees):
        assert len(f.leaves(tree)) == shape.leaves_per_tree
    spend = ro.spend.total()
    assert spend.leaves == f.n_trees * shape.leaves_per_tree
    assert spend.generated == sum(len(s.action_ids) for s in ro.steps)
    assert spend.processed > 0 and spend.generated > 0
    assert spend.tool_calls == sum(s.searched for s in ro.steps)
    assert all(len(s.action_logprobs) == len(s.action_ids) for s in ro.steps)
    # every step but the first turn of the initial chains reads its context from the cache
    first_turn = len(prompts) * shape.m
    assert all(s.reused > 0 for s in ro.steps[first_turn:])
    assert len(ro.steps) > first_turn
    again = sample_forest(engine, agent.protocol, tool, prompts, shape, params, LIMITS, seed=3)
    assert [s.action_ids for s in again.steps] == [s.action_ids for s in ro.steps]


def test_weight_push_changes_outputs_as_loading_into_hf(engine: Engine, agent: Agent) -> None:
    prompts, obs = _prompts(agent), _observation(agent)
    moved = copy.deepcopy(agent.model)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(0)
        for p in moved.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    before = [r.tokens for r in _two_turns(engine, prompts, obs)]
    saved = {k: v.clone() for k, v in agent.model.state_dict().items()}
    # HFEngine shares its model's weights: push into one on a copy of the agent
    hf = HFEngine(copy.deepcopy(agent.model), agent.tokenizer, StepStopper(agent.tokenizer))
    hf.update_weights(moved.state_dict())
    want = _two_turns(hf, prompts, obs)
    try:
        engine.update_weights(moved)
        got = _two_turns(engine, prompts, obs)
    finally:  # an HFEngine here computes with the agent's own model: load its weights back
        engine.update_weights(saved)
    assert [g.tokens for g in got] == [w.tokens for w in want]
    for g, w in zip(got, want, strict=True):
        assert g.logprobs == pytest.approx(w.logprobs, abs=1e-3)
    assert [w.tokens for w in want] != before  # the push changed what is generated
    assert [r.tokens for r in _two_turns(engine, prompts, obs)] == before  # and back
    assert np.isfinite([x for g in got for x in g.logprobs]).all()


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_rl_step_leaves_the_engine_on_the_updated_policy(kind: str, agent: Agent) -> None:
    """After ``rl_step`` the engine generates what the updated policy generates."""
    policy = copy.deepcopy(agent.model)
    eng = make_engine(kind, policy, agent.tokenizer)
    _one_step(policy, eng, agent, lr=1e-2)
    prompts, obs = _prompts(agent), _observation(agent)
    hf = HFEngine(policy, agent.tokenizer, StepStopper(agent.tokenizer))
    want, got = _two_turns(hf, prompts, obs), _two_turns(eng, prompts, obs)
    assert [g.tokens for g in got] == [w.tokens for w in want]
    assert not torch.equal(policy.lm_head.weight, agent.model.lm_head.weight)


@pytest.mark.parametrize("kind", KINDS)
def test_lora_policy_is_served_merged_and_pushed_after_each_update(kind: str, agent: Agent) -> None:
    """A LoRA policy: the engine generates what peft's model generates, before and after an
    update that moved only the adapters (vLLM gets the merged weights, ``state_dict_of``)."""
    policy = prepare_policy(copy.deepcopy(agent.model), ModelConfig(lora_rank=4), seed=0)
    with torch.no_grad():  # B starts at zero: give the adapters a delta from the start
        gen = torch.Generator().manual_seed(1)
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    eng = make_engine(kind, policy, agent.tokenizer)
    prompts, obs = _prompts(agent), _observation(agent)
    base_model = HFEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer))
    base = [r.tokens for r in _two_turns(base_model, prompts, obs)]
    for updated in (False, True):
        if updated:
            _one_step(policy, eng, agent, lr=5e-2)
        hf = HFEngine(policy, agent.tokenizer, StepStopper(agent.tokenizer))
        want, got = _two_turns(hf, prompts, obs), _two_turns(eng, prompts, obs)
        assert [g.tokens for g in got] == [w.tokens for w in want]
        for g, w in zip(got, want, strict=True):
            assert g.logprobs == pytest.approx(w.logprobs, abs=1e-3)
    assert [w.tokens for w in want] != base  # the adapters changed what is generated


def _one_step(policy: torch.nn.Module, eng: Engine, agent: Agent, lr: float) -> None:
    """One RL step that moves trainable parameters (and pushes the weights into ``eng``)."""
    before = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}
    people = PEOPLE[:2]
    batch = Batch([agent.prompt(p) for p in people], [[FACTS[p]] for p in people], people)
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=lr)
    sampling = SamplingParams(temperature=0.8, max_new_tokens=40)
    rollouts = Rollouts(LocalRollout(eng, agent.protocol, WordTool()), agent.protocol, sampling,
                        LIMITS)  # fmt: skip
    optim = OptimConfig(lr=lr, mini_batch_prompts=2, micro_batch_tokens=1500)
    settings = StepSettings(AlgorithmConfig(m=2, kl_coef=0.0), optim)
    rl_step(Learning(policy, None, opt), rollouts, batch, settings, seed=0)
    moved = [
        n for n, p in policy.named_parameters() if n in before and not torch.equal(p, before[n])
    ]
    assert moved  # trainable parameters only (with LoRA: adapters), and some of them moved


@pytest.mark.parametrize("kind", KINDS)
def test_evaluation_with_each_engine_gives_the_same_report(kind: str, agent: Agent) -> None:
    """``eval.evaluate(engine=kind)`` (``treegrpo eval --engine``) answers as the hf engine,
    searching with BM25 (bm25s imports numba where it is installed, as in the vLLM
    environment: vLLM must start beside it)."""
    items = [EvalItem(f"Where was {p} born?", [FACTS[p]]) for p in PEOPLE[:4]]
    tool = BM25Retriever(CORPUS)
    reports = [
        evaluate(agent.model, agent.tokenizer, tool, items, AGENT, engine=k) for k in ("hf", kind)
    ]
    want, got = ([(r["response"], r["em"]) for r in rep["rows"]] for rep in reports)
    assert got == want and all(response for response, _ in got)
