"""The engine against plain forward passes of the same real (tiny) transformers model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from treegrpo.agent.stops import StepStopper
from treegrpo.engine.hf import HFEngine, StepRequest
from treegrpo.engine.sampling import SamplingParams, nucleus, sample, stream_uniforms
from treegrpo.engine.segments import Segment
from treegrpo.models.tiny import tiny_qwen2

GREEDY = SamplingParams(greedy=True, max_new_tokens=12)
# The tests that take the ``model`` fixture run once per device: on CPU always, on CUDA too
# where a GPU is present (`pytest tests/engine -k cuda` on a GPU machine).
DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


@pytest.fixture(scope="module", params=DEVICES)
def model(request, split_tokenizer):  # type: ignore[no-untyped-def]
    return tiny_qwen2(len(split_tokenizer), hidden=64, layers=2, seed=1).to(request.param)


def _ids(model, tokens: list[int]) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """(1, T) ids on the model's device."""
    return torch.tensor([tokens], device=model.device)


def _reference_logprobs(model, context: list[int], tokens: list[int]) -> list[float]:  # type: ignore[no-untyped-def]
    full = _ids(model, context + tokens)
    with torch.no_grad():
        logp = torch.log_softmax(model(full).logits[0].float(), dim=-1)
    return [logp[len(context) + j - 1, t].item() for j, t in enumerate(tokens)]


def _prompts(tok) -> list[list[int]]:  # type: ignore[no-untyped-def]
    texts = ["capital of France", "<think>I should", "x", "Paris is the capital of France."]
    return [tok(t)["input_ids"] for t in texts]


@pytest.mark.parametrize("reuse", [True, False])
def test_logprobs_match_a_fresh_forward_over_two_turns(model, split_tokenizer, reuse) -> None:  # type: ignore[no-untyped-def]
    eng = HFEngine(model, split_tokenizer, StepStopper(split_tokenizer), reuse_cache=reuse)
    prompts = _prompts(split_tokenizer)
    gen = torch.Generator(device=model.device).manual_seed(0)
    sampling = SamplingParams(max_new_tokens=9)
    first = eng.step([StepRequest(eng.root(), p) for p in prompts], sampling, gen)
    obs = split_tokenizer(" <information>obs</information>")["input_ids"]
    second = eng.step([StepRequest(r.end, [r.tokens[-1], *obs]) for r in first], sampling, gen)
    for p, r1, r2 in zip(prompts, first, second, strict=True):
        assert r1.end.context_tokens() == p + r1.tokens[:-1]
        assert r1.fork.context_tokens() == p[:-1]
        ref1 = _reference_logprobs(model, p, r1.tokens)
        assert r1.logprobs == pytest.approx(ref1, abs=1e-4)
        ctx = p + r1.tokens + obs
        assert r2.end.context_tokens() == ctx + r2.tokens[:-1]
        assert r2.logprobs == pytest.approx(_reference_logprobs(model, ctx, r2.tokens), abs=1e-4)


def test_cached_kv_equals_a_fresh_forward(model, split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    eng = HFEngine(model, split_tokenizer)
    p = _prompts(split_tokenizer)[3]
    (r,) = eng.step([StepRequest(eng.root(), p)], GREEDY)
    ctx = r.end.context_tokens()
    with torch.no_grad():
        out = model(_ids(model, ctx), use_cache=True)
    layers = out.past_key_values.layers
    fresh = torch.stack([torch.stack([la.keys[0], la.values[0]]) for la in layers])
    cached = torch.cat(r.end.kv_parts(), dim=3)  # the path's segments make the context's KV
    assert cached.shape == fresh.shape
    torch.testing.assert_close(cached, fresh, atol=1e-5, rtol=1e-4)


def test_cache_on_and_off_give_identical_greedy_steps(model, split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    outs = []
    for reuse in (True, False):
        eng = HFEngine(model, split_tokenizer, StepStopper(split_tokenizer), reuse_cache=reuse)
        first = eng.step([StepRequest(eng.root(), p) for p in _prompts(split_tokenizer)], GREEDY)
        # fork every sequence twice from its prompt and continue once from its end
        reqs = [
            StepRequest(r.fork, [p[-1]])
            for r, p in zip(first, _prompts(split_tokenizer), strict=True)
        ]
        reqs += [StepRequest(r.end, [r.tokens[-1], 5, 6, 7]) for r in first]
        outs.append([r.tokens for r in first] + [r.tokens for r in eng.step(reqs, GREEDY)])
    assert outs[0] == outs[1]
    # greedy forks from the prompt reproduce the first step exactly
    assert outs[0][4:8] == outs[0][:4]


def test_rows_leave_the_batch_when_their_step_ends(model, split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    eng = HFEngine(model, split_tokenizer)
    p = _prompts(split_tokenizer)[0]
    reqs = [StepRequest(eng.root(), p, max_new_tokens=n) for n in (1, 4, 10)]
    res = eng.step(reqs, GREEDY)
    assert [len(r.tokens) for r in res] == [1, 4, 10]
    assert [r.finish for r in res] == ["length"] * 3
    # each row pays its prefill plus one decode position per token it fed, nothing after it left
    assert [r.processed for r in res] == [len(p), len(p) + 3, len(p) + 9]
    # no room: an empty step
    (empty,) = eng.step([StepRequest(eng.root(), p, max_new_tokens=0)], GREEDY)
    assert empty.tokens == [] and empty.finish == "length" and empty.processed == 0


def test_stops_on_eos_and_on_tags(model, split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    p = _prompts(split_tokenizer)[1]
    (probe,) = HFEngine(model, split_tokenizer).step([StepRequest(Segment(None, []), p)], GREEDY)
    third = probe.tokens[2]
    eng = HFEngine(model, split_tokenizer, eos_ids=[third])
    (r,) = eng.step([StepRequest(eng.root(), p)], GREEDY)
    assert r.finish == "eos" and r.tokens == probe.tokens[: probe.tokens.index(third) + 1]

    class StopAfterTwo:
        def hit(self, tokens):  # type: ignore[no-untyped-def]
            return len(tokens) == 2

    (r,) = HFEngine(model, split_tokenizer, StopAfterTwo(), eos_ids=[]).step(
        [StepRequest(Segment(None, []), p)], GREEDY
    )
    assert r.finish == "stop" and r.tokens == probe.tokens[:2]


def test_prefill_shares_a_prompt_and_chunks_by_length(model, split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    eng = HFEngine(model, split_tokenizer, pad_waste=0.05)
    prompts = _prompts(split_tokenizer)
    segs, cost = eng.prefill([eng.root()] * len(prompts), prompts)
    # different lengths go to different chunks: each row costs exactly its own tokens
    assert cost == [len(p) for p in prompts]
    assert [s.context_tokens() for s in segs] == prompts
    with pytest.raises(ValueError, match="no pending token"):
        eng.step([StepRequest(segs[0], [])], GREEDY)


def test_sampling_is_seeded_and_respects_top_k() -> None:
    logits = torch.randn(64, 50)
    a, lp = sample(logits, SamplingParams(top_k=3), torch.Generator().manual_seed(1))
    b, _ = sample(logits, SamplingParams(top_k=3), torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    top3 = logits.topk(3, dim=-1).indices
    assert (top3 == a[:, None]).any(dim=-1).all()
    torch.testing.assert_close(lp, torch.log_softmax(logits, -1).gather(-1, a[:, None])[:, 0])
    # top_p so small that only the best token survives == greedy
    c, _ = sample(logits, SamplingParams(top_p=1e-6), torch.Generator().manual_seed(2))
    assert torch.equal(c, logits.argmax(-1))
    with pytest.raises(ValueError):
        SamplingParams(temperature=0)


def _nucleus_by_full_sort(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """Reference top-p: sort every row, drop a token once the mass before it reaches top_p."""
    out = torch.full_like(scores, float("-inf"))
    for i, row in enumerate(scores):
        probs = torch.softmax(row.double(), dim=-1)
        order = torch.argsort(probs, descending=True)
        mass = 0.0
        for j in order.tolist():
            if mass >= top_p:
                break
            out[i, j] = row[j]
            mass += float(probs[j])
    return out


@pytest.mark.parametrize("k", [1024, 8])
def test_nucleus_keeps_the_same_tokens_as_sorting_every_row(k: int) -> None:
    """Peaked rows (nucleus among the k best) and flat rows (it is not, so the batch sorts in
    full): the kept tokens and their scores are those of the full-sort reference."""
    torch.manual_seed(0)
    peaked = torch.randn(6, 3000) * 4.0
    flat = torch.randn(2, 3000) * 0.1  # 95% of the mass needs far more than 8 tokens
    for scores in (peaked, torch.cat([peaked, flat])):
        for top_p in (0.5, 0.9, 0.95):
            got = nucleus(scores, top_p, k=k)
            want = _nucleus_by_full_sort(scores, top_p)
            assert torch.equal(torch.isinf(got), torch.isinf(want)), (k, top_p)
            assert torch.equal(got[~torch.isinf(got)], want[~torch.isinf(want)])
    assert (~torch.isinf(nucleus(flat, 0.95, k=8))).sum(-1).min() > 8  # the fallback ran


def test_sampled_frequencies_match_the_distribution() -> None:
    # one row of 6 tokens with known probabilities (one of them 0), drawn 40,000 times
    probs = torch.tensor([0.5, 0.25, 0.0, 0.15, 0.07, 0.03])
    logits = torch.log(probs).repeat(40_000, 1)  # (B, V), -inf where p = 0
    tokens, lp = sample(logits, SamplingParams(), torch.Generator().manual_seed(0))
    freq = torch.bincount(tokens, minlength=6).float() / len(tokens)
    assert freq[2] == 0  # probability 0 is never drawn
    # within 4 binomial standard errors of each probability
    se = (probs * (1 - probs) / len(tokens)).sqrt()
    assert ((freq - probs).abs() <= 4 * se + 1e-9).all(), freq
    torch.testing.assert_close(lp, torch.log(probs)[tokens])
    # temperature 0.5 squares the odds: p_i² / Σ p_j²
    hot, _ = sample(logits, SamplingParams(temperature=0.5), torch.Generator().manual_seed(1))
    want = probs**2 / (probs**2).sum()
    freq = torch.bincount(hot, minlength=6).float() / len(hot)
    assert ((freq - want).abs() <= 4 * (want * (1 - want) / len(hot)).sqrt() + 1e-9).all()


def test_prefill_computes_a_shared_start_once(model, split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    start = list(range(5, 25))  # 20 tokens every prompt begins with
    prompts = [[*start, 30 + i, 40 + i] for i in range(3)] + [start, [7, 8, 9]]
    eng = HFEngine(model, split_tokenizer, min_shared_prefix=16)
    segs, cost = eng.prefill([eng.root()] * len(prompts), prompts)
    assert [s.context_tokens() for s in segs] == prompts
    # the first four share one segment for the start; the last shares nothing
    shared = segs[3]
    assert shared.tokens == start and all(s.parent is shared for s in segs[:3])
    assert segs[4].parent is not None and segs[4].parent.tokens == []
    # the start is paid once, split over the four rows that share it
    assert sum(cost[:4]) == len(start) + 3 * 2 and cost[4] == 3
    for p, s in zip(prompts, segs, strict=True):
        with torch.no_grad():
            out = model(_ids(model, p), use_cache=True)
        fresh = torch.stack(
            [torch.stack([la.keys[0], la.values[0]]) for la in out.past_key_values.layers]
        )
        torch.testing.assert_close(torch.cat(s.kv_parts(), dim=3), fresh, atol=1e-5, rtol=1e-4)
    # two templates that agree on a few tokens: each template's start is still shared (radix)
    other = [*start[:16], *range(60, 80)]
    more = [[*start, 50], [*start, 51], [*other, 52], [*other, 53]]
    segs, cost = eng.prefill([eng.root()] * len(more), more)
    assert [s.context_tokens() for s in segs] == more
    both = segs[0].parent  # the 16 tokens every prompt starts with
    assert both is not None and both.tokens == start[:16] and segs[1].parent is both
    # the second template's next 20 tokens are shared again; the first's next 4 are too few
    assert segs[2].parent is segs[3].parent and segs[2].parent.parent is both
    assert segs[2].parent.tokens == other[16:]
    assert sum(cost) == 16 + 2 * 5 + 20 + 2 * 1
    # too short to share, or sharing off: every row pays its own tokens
    for min_shared in (21, 0):
        eng = HFEngine(model, split_tokenizer, min_shared_prefix=min_shared)
        segs, cost = eng.prefill([eng.root()] * len(prompts), prompts)
        assert cost[:3] == [22] * 3 and cost[4] == 3  # (the 20-token row pads to 22)
        assert all(s.parent is not None and s.parent.tokens == [] for s in segs)


def test_stream_uniforms_are_uniform_and_depend_on_seed_and_counter_only() -> None:
    seeds = np.repeat(np.arange(200), 200)  # 200 streams × 200 draws
    counters = np.tile(np.arange(200), 200)
    u = stream_uniforms(seeds.tolist(), counters.tolist())
    assert u.shape == (40_000,) and (u >= 0).all() and (u < 1).all()
    # a uniform histogram over 10 bins: each within 5 binomial standard errors of 4,000
    hist = np.bincount((u * 10).astype(int), minlength=10)
    assert (np.abs(hist - 4000) <= 5 * np.sqrt(40_000 * 0.1 * 0.9)).all(), hist
    assert len(np.unique(u)) == len(u)  # no two (seed, counter) pairs collide here
    # the same (seed, counter) gives the same number in any batch, at any position
    again = stream_uniforms([int(seeds[123]), 5, int(seeds[77])], [int(counters[123]), 0, 77])
    assert again[0] == u[123] and again[2] == u[77]
    # draws made from them follow the distribution (one stream per row)
    probs = torch.tensor([0.5, 0.25, 0.0, 0.15, 0.07, 0.03])
    logits = torch.log(probs).repeat(40_000, 1)
    tokens, _ = sample(logits, SamplingParams(), None, torch.from_numpy(u))
    freq = torch.bincount(tokens, minlength=6).float() / len(tokens)
    assert freq[2] == 0
    assert ((freq - probs).abs() <= 4 * (probs * (1 - probs) / len(tokens)).sqrt() + 1e-9).all()


def test_a_seeded_request_samples_the_same_tokens_in_any_batch(model, split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    eng = HFEngine(model, split_tokenizer, StepStopper(split_tokenizer))
    prompts = _prompts(split_tokenizer)
    params = SamplingParams(temperature=1.5, max_new_tokens=12)  # hot: many different tokens

    def run(pairs: list[tuple[int, int | None]]) -> list[list[int]]:  # (prompt, seed) per request
        out = eng.step([StepRequest(eng.root(), prompts[i], seed=s) for i, s in pairs], params)
        return [r.tokens for r in out]

    batch = run([(i, 10 + i) for i in range(4)])
    assert run([(2, 12)]) == [batch[2]] and run([(0, 10)]) == [batch[0]]  # alone
    assert run([(3, 99), (1, 11)])[1] == batch[1]  # beside another request, in another place
    assert run([(i, 50 + i) for i in range(4)]) != batch  # other seeds, other tokens
    with pytest.raises(ValueError, match="every request of a step a seed, or none"):
        run([(0, 1), (1, None)])
