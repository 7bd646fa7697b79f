"""The protocol warm start's mechanics on a tiny model: LoRA SFT on title demonstrations, merged
into a plain checkpoint, built once into the cache."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from tests.warmstart.test_title_demos import _tool
from treegrpo.data.types import Question
from treegrpo.models.tiny import tiny_qwen2
from treegrpo.warmstart import protocol as pw


def test_merged_checkpoint_built_once(tag_tokenizer, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    base = tmp_path / "base"
    tiny_qwen2(len(tag_tokenizer), hidden=32, layers=2, seed=0).save_pretrained(base)
    tag_tokenizer.save_pretrained(base)
    questions = [
        Question("t-0", "Which river flows through Vienna and Budapest?", ("Danube",), "wiki", 1),
        Question("t-1", "Which planet has a prominent ring system?", ("Saturn",), "wiki", 1),
    ]
    cfg = pw.ProtocolWarmStartConfig(n_demos=2, steps=3, warmup=1, lr=1e-2, max_batch_tokens=512)
    out = pw.protocol_warm_start(
        base, cfg, cache_dir=tmp_path / "cache", progress=False, questions=questions, tool=_tool()
    )
    assert not (out / "adapter_config.json").exists()  # merged: a plain transformers model
    tuned = AutoModelForCausalLM.from_pretrained(out).state_dict()
    start = AutoModelForCausalLM.from_pretrained(base).state_dict()
    assert tuned.keys() == start.keys()
    moved = {k for k in start if not torch.equal(start[k], tuned[k])}
    assert moved and all(any(t in k for t in pw.LORA_TARGETS) for k in moved)
    stats = (out / pw.STATS_FILE).read_text()
    assert '"demos": 2' in stats

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("rebuilt")

    monkeypatch.setattr(pw, "build", fail)
    again = pw.protocol_warm_start(
        base, cfg, cache_dir=tmp_path / "cache", progress=False, questions=questions, tool=_tool()
    )
    assert again == out
