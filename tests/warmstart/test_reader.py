"""The reader warm start's build on a tiny model and a few questions: the base model is loaded
once, probed closed-book and then tuned, and tuning the probed model gives what tuning a fresh
load of it gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from tests.warmstart.test_reader_demos import (
    CAPITAL,
    EMMA_AUTHOR,
    EMMA_PLAN,
    HIGHBURY,
    PERU,
    RESULTS,
    Tool,
    _single,
)
from treegrpo.data.types import Question
from treegrpo.models.tiny import tiny_qwen2
from treegrpo.warmstart import reader as rw
from treegrpo.warmstart.closed_book import closed_book
from treegrpo.warmstart.protocol import ProtocolWarmStartConfig, tune_and_save

SFT = ProtocolWarmStartConfig(n_demos=4, steps=2, warmup=1, lr=1e-2, max_batch_tokens=512)
TITLE = Question("t-0", "Which country has Nouakchott as its capital?", ("Mauritania",), "wiki", 1)


@pytest.fixture
def base(tag_tokenizer: Any, tmp_path: Path) -> Path:
    path = tmp_path / "base"
    tiny_qwen2(len(tag_tokenizer), hidden=32, layers=2, seed=0).save_pretrained(path)
    tag_tokenizer.save_pretrained(path)
    return path


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The model directories ``AutoModelForCausalLM.from_pretrained`` is called with."""
    calls: list[Any] = []
    load = AutoModelForCausalLM.from_pretrained

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return load(*args, **kwargs)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", spy)
    return calls


def test_the_base_model_is_loaded_once(
    base: Path, loads: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    single, two_hop = [CAPITAL, HIGHBURY, PERU], [EMMA_AUTHOR]
    monkeypatch.setattr(rw, "load_articles", lambda: ())
    monkeypatch.setattr(rw, "lead_questions", lambda split, hops: single if hops == 1 else two_hop)
    monkeypatch.setattr(rw, "wiki_questions", lambda split: [TITLE])
    corpora: list[str | None] = []
    monkeypatch.setattr(rw, "wiki_corpus", lambda split=None: corpora.append(split))
    monkeypatch.setattr(rw, "wh_questions", lambda split: [])
    monkeypatch.setattr(rw, "BM25Retriever", lambda corpus: Tool(RESULTS))
    monkeypatch.setattr(rw, "hop_plan", lambda uid: EMMA_PLAN if uid == EMMA_AUTHOR.uid else None)
    cfg = rw.ReaderWarmStartConfig(sft=SFT, probe=2)
    out = rw.reader_warm_start(base, cfg, cache_dir=tmp_path / "cache", progress=False)
    assert loads == [base]  # probed and tuned: one model
    assert corpora == ["train"]  # the demonstrations search the train split's articles only
    assert '"asked": 2' in (out / "protocol.json").read_text()
    tuned = AutoModelForCausalLM.from_pretrained(out).state_dict()
    start = AutoModelForCausalLM.from_pretrained(base).state_dict()
    assert any(not torch.equal(start[k], tuned[k]) for k in start)


def test_tuning_the_probed_model_gives_what_tuning_a_fresh_load_gives(
    base: Path, tag_tokenizer: Any, tmp_path: Path
) -> None:
    demos = [_single(tag_tokenizer, q)[0][0] for q in (CAPITAL, HIGHBURY)]
    probed = AutoModelForCausalLM.from_pretrained(base).eval()
    closed_book(probed, tag_tokenizer, [CAPITAL.question, PERU.question], max_new_tokens=8)
    reused, fresh = tmp_path / "reused", tmp_path / "fresh"
    tune_and_save(base, tag_tokenizer, demos, SFT, reused, progress=False, model=probed)
    tune_and_save(base, tag_tokenizer, demos, SFT, fresh, progress=False)
    a = AutoModelForCausalLM.from_pretrained(reused).state_dict()
    b = AutoModelForCausalLM.from_pretrained(fresh).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    for name in ("config.json", "generation_config.json"):
        assert (reused / name).read_text() == (fresh / name).read_text()
