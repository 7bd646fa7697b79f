"""The warm-start builder's mechanics on a tiny configuration: build once into an atomic cache
entry, load from the cache afterwards, a loadable Hugging Face model whose tokenizer keeps the
protocol tags whole, and demonstrations whose loss mask covers the model's actions only."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from treegrpo.agent.protocol import SearchProtocol
from treegrpo.agent.stops import StepStopper
from treegrpo.core.rewards import PROTOCOL_TAGS
from treegrpo.embedded.demos import Flaws
from treegrpo.engine.hf import HFEngine, StepRequest
from treegrpo.engine.sampling import SamplingParams
from treegrpo.warmstart import tiny as warmstart
from treegrpo.warmstart.tiny import WarmStartConfig, warm_start

TINY = WarmStartConfig(
    demo_worlds=1,
    hidden=32,
    layers=2,
    heads=2,
    n_demos=40,
    steps=3,
    warmup=1,
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    cache = tmp_path_factory.mktemp("cache")
    return cache, warm_start(TINY, cache_dir=cache, progress=False)


def test_built_once_then_loaded_from_the_cache(built, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    cache, path = built
    assert (path / "meta.json").is_file() and (path / "model.safetensors").is_file()
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp dirs left

    def boom(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("a cached warm start must not be rebuilt")

    monkeypatch.setattr(warmstart, "build", boom)
    assert warm_start(TINY, cache_dir=cache, progress=False) == path
    other = WarmStartConfig(**{**TINY.__dict__, "seed": 1})
    with pytest.raises(AssertionError, match="must not be rebuilt"):
        warm_start(other, cache_dir=cache, progress=False)  # a new setting is a new entry


def test_loads_with_plain_transformers_and_generates(built) -> None:  # type: ignore[no-untyped-def]
    _, path = built
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    for tag in PROTOCOL_TAGS:
        assert len(tok(tag, add_special_tokens=False)["input_ids"]) == 1, tag
    engine = HFEngine(model, tok, StepStopper(tok))
    (r,) = engine.step(
        [StepRequest(engine.root(), tok("Where?")["input_ids"])],
        SamplingParams(greedy=True, max_new_tokens=8),
    )
    assert 1 <= len(r.tokens) <= 8


def test_demonstrations_train_on_actions_only(built) -> None:  # type: ignore[no-untyped-def]
    from treegrpo.embedded.demos import build_demos
    from treegrpo.embedded.synthetic import train_eval_worlds
    from treegrpo.retrieval.bm25 import BM25Retriever

    _, path = built
    tok = AutoTokenizer.from_pretrained(path)
    protocol = SearchProtocol(tok, TINY.max_obs_tokens)
    world, _ = train_eval_worlds(0)
    tool = BM25Retriever(world.passages, use_cache=False)
    demos = build_demos([(world, tool)], protocol, replace(TINY, n_demos=20, topk=3))
    info_open = tok.convert_tokens_to_ids("<information>")
    for d in demos:
        assert len(d.ids) == len(d.mask)
        masked = [t for t, m in zip(d.ids, d.mask, strict=True) if m]
        assert masked and info_open not in masked  # observations never carry loss


def _demos(path: Path, flaws: Flaws, n: int = 80):  # type: ignore[no-untyped-def]
    from treegrpo.embedded.demos import build_demos
    from treegrpo.embedded.synthetic import train_eval_worlds
    from treegrpo.retrieval.bm25 import BM25Retriever

    tok = AutoTokenizer.from_pretrained(path)
    world, _ = train_eval_worlds(0)
    tool = BM25Retriever(world.passages, use_cache=False)
    protocol = SearchProtocol(tok, TINY.max_obs_tokens)
    cfg = replace(TINY, n_demos=n, flaws=flaws, seed=1, topk=3)
    return tok, build_demos([(world, tool)], protocol, cfg)


def _searches(tok, demo) -> int:  # type: ignore[no-untyped-def]
    search = tok.convert_tokens_to_ids("<search>")
    return sum(t == search for t, m in zip(demo.ids, demo.mask, strict=True) if m)


def test_flawless_demonstrations_search_every_hop_and_answer_right(built) -> None:  # type: ignore[no-untyped-def]
    tok, demos = _demos(built[1], Flaws(early=0.0, stop=0.0, vague=0.0))
    assert {d.hops for d in demos} == {1, 2, 3, 4}
    for d in demos:
        assert d.flaws == () and d.reward == 1.0 and _searches(tok, d) == d.hops


def test_stopping_answers_after_the_first_search_on_multi_hop_questions_only(built) -> None:  # type: ignore[no-untyped-def]
    tok, demos = _demos(built[1], Flaws(early=0.0, stop=1.0, vague=0.0))
    for d in demos:
        assert _searches(tok, d) == 1
        assert (d.reward == 1.0) == (d.hops == 1)  # a hop short is always wrong
        assert d.flaws == (() if d.hops == 1 else ("stop",))


def test_later_stops_answer_after_the_second_search(built) -> None:  # type: ignore[no-untyped-def]
    tok, demos = _demos(built[1], Flaws(early=0.0, stop=0.0, stop_later=1.0, vague=0.0))
    for d in demos:
        assert _searches(tok, d) == min(d.hops, 2)
        assert (d.reward == 1.0) == (d.hops <= 2)
        assert d.flaws == (() if d.hops <= 2 else ("stop",))


def test_vague_searches_go_astray_and_early_answers_do_not_search(built) -> None:  # type: ignore[no-untyped-def]
    tok, demos = _demos(built[1], Flaws(early=0.0, stop=0.0, vague=1.0))
    for d in demos:
        assert _searches(tok, d) == d.hops  # as many searches, with the wrong entity
        assert d.flaws == ("vague",) * (d.hops - 1)
    multi = [d for d in demos if d.hops > 1]
    assert sum(d.reward == 1.0 for d in multi) <= 0.1 * len(multi)
    tok, demos = _demos(built[1], Flaws(early=1.0, stop=0.0, vague=0.0), n=20)
    assert all(_searches(tok, d) == 0 and d.flaws == ("early",) for d in demos)


def test_flaw_probabilities_are_checked() -> None:
    with pytest.raises(ValueError, match="plus vague"):
        Flaws(stop=0.95, vague=0.1)
    with pytest.raises(ValueError, match="plus vague"):
        Flaws(stop=0.5, stop_later=0.95, vague=0.1)
    with pytest.raises(ValueError, match="must lie in"):
        Flaws(early=1.5)


def test_query_drills_train_on_the_third_and_later_queries_only(built) -> None:  # type: ignore[no-untyped-def]
    from treegrpo.embedded.demos import NO_LOSS, query_drills
    from treegrpo.embedded.synthetic import train_eval_worlds
    from treegrpo.retrieval.bm25 import BM25Retriever

    tok = AutoTokenizer.from_pretrained(built[1])
    world, _ = train_eval_worlds(0)
    tool = BM25Retriever(world.passages, use_cache=False)
    protocol = SearchProtocol(tok, TINY.max_obs_tokens)
    drills = query_drills([(world, tool)], protocol, replace(TINY, query_drills=12, topk=3))
    assert len(drills) == 12 and {d.hops for d in drills} == {3, 4}
    for d in drills:
        assert set(d.mask) == {NO_LOSS, 1} and d.reward == 1.0
        trained = tok.decode([t for t, m in zip(d.ids, d.mask, strict=True) if m == 1])
        text = tok.decode(d.ids[d.prompt_len :])
        queries = [q.split("</search>")[0] for q in text.split("<search>")[1:]]
        assert len(queries) == d.hops  # the oracle searched every hop
        assert trained.split() == " ".join(f"{q} </search>" for q in queries[2:]).split()


def test_query_drills_enter_the_cache_key_only_when_on() -> None:
    assert "query_drills" not in WarmStartConfig().key()
    assert WarmStartConfig(query_drills=300).key()["query_drills"] == 300
    with pytest.raises(ValueError, match="search world's warm start only"):
        warmstart._demonstrations(
            WarmStartConfig(web=True, query_drills=1, demo_worlds=1, n_demos=1),
            warmstart.train_search_tokenizer(1024, web=True),
        )
