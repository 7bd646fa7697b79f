"""Runs, checkpoints and exact resume with the tiny trained agent."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from transformers import AutoModelForCausalLM, AutoTokenizer

from agent_fixtures import FACTS, PEOPLE, WordTool
from treegrpo import cli
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.train import checkpoint as ckpt_module
from treegrpo.train import trainer as trainer_module
from treegrpo.train.checkpoint import latest_checkpoint
from treegrpo.train.config import AlgorithmConfig, OptimConfig, RunConfig
from treegrpo.train.task import TrainItem, TrainSettings, TrainTask
from treegrpo.train.trainer import train

ITEMS = [TrainItem(f"Where was {p} born", (c,), f"toy-{p}") for p, c in FACTS.items()]
ALGO = AlgorithmConfig(kl_coef=0.001)
OPTIM = OptimConfig(lr=1e-3, mini_batch_prompts=2, micro_batch_tokens=2000)
SAMPLING = SamplingParams(max_new_tokens=40)
LIMITS = AgentLimits(max_turns=2, max_context=1024)


def load(path: Path) -> tuple[Any, Any]:
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def _train(
    start: Path, out: Path, steps: int, resume: bool = False, overwrite: bool = False
) -> Path:
    run = RunConfig(
        out_dir=str(out),
        steps=steps,
        prompts_per_step=4,
        seed=3,
        save_every=1,
        resume=resume,
        overwrite=overwrite,
    )
    task = TrainTask(start, load, WordTool(), ITEMS, SAMPLING, LIMITS, max_obs_tokens=120)
    return train(task, TrainSettings(ALGO, OPTIM, run))


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    ckpt = latest_checkpoint(run_dir)
    assert ckpt is not None
    model = AutoModelForCausalLM.from_pretrained(ckpt / "model")  # plain transformers
    return {k: v.clone() for k, v in model.state_dict().items()}


@pytest.mark.slow
def test_resume_equals_no_interruption(model_dir: Path, tmp_path: Path) -> None:
    straight = _train(model_dir, tmp_path / "straight", steps=2)
    _train(model_dir, tmp_path / "resumed", steps=1)
    resumed = _train(model_dir, tmp_path / "resumed", steps=2, resume=True)
    a, b = _weights(straight), _weights(resumed)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    lines = [json.loads(x) for x in (straight / "metrics.jsonl").read_text().splitlines()]
    again = [json.loads(x) for x in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in again] == [1, 2]
    assert lines[1]["loss/pg_loss"] == again[1]["loss/pg_loss"]
    # the per-prompt ledger: one line per step, cut and rewritten on resume like metrics.jsonl
    ledger = [json.loads(x) for x in (straight / "ledger.jsonl").read_text().splitlines()]
    assert ledger == [json.loads(x) for x in (resumed / "ledger.jsonl").read_text().splitlines()]
    assert [row["step"] for row in ledger] == [1, 2]
    for row, m in zip(ledger, lines, strict=True):
        assert len(row["uid"]) == 4 and all(u.startswith("toy-") for u in row["uid"])
        # per prompt, the step's totals: the metrics line's per-prompt means times 4 prompts
        assert sum(row["generated"]) == pytest.approx(4 * m["spend/generated_per_prompt"])
        assert sum(row["tool_calls"]) == pytest.approx(4 * m["spend/tool_calls_per_prompt"])
        assert sum(row["leaves"]) == m["agent/leaves"]  # every leaf kept (K = all)
        silent = sum(not s for s in row["signal"]) / 4
        assert silent == pytest.approx(m["adv/uniform_prompts"])
        tree = ALGO.shape()
        assert row["expansions"] == [tree.m * tree.n * tree.l] * 4
    start = AutoModelForCausalLM.from_pretrained(model_dir).state_dict()
    assert any(not torch.equal(start[k], a[k]) for k in a)  # training moved the weights
    assert (straight / "config.json").exists() and (straight / "tb").is_dir()
    # the first step's forests are kept (forests_every=10) and `treegrpo view` draws them
    kept = json.loads((straight / "forests" / "step-000001.json").read_text())
    assert kept["step"] == 1 and len(kept["prompts"]) == 4
    assert sorted((straight / "forests").iterdir()) == [straight / "forests" / "step-000001.json"]
    cli.main(["view", str(straight)])
    page = (straight / "view" / "step-000001.html").read_text()
    assert kept["prompts"][0]["question"] in page and "reward" in page


@pytest.mark.slow
def test_killed_save_leaves_the_previous_checkpoint_usable(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    _train(model_dir, out, steps=1)
    good = latest_checkpoint(out)
    assert good is not None and good.name == "step-000001"

    def crash(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt("killed while saving")

    monkeypatch.setattr(ckpt_module, "_fsync_tree", crash)  # dies after writing files
    with pytest.raises(KeyboardInterrupt):
        _train(model_dir, out, steps=2, resume=True)
    monkeypatch.undo()
    assert (out / "checkpoints" / "step-000002.tmp").exists()
    assert latest_checkpoint(out) == good  # the half-written one is ignored
    resumed = _train(model_dir, out, steps=2, resume=True)
    final = latest_checkpoint(resumed)
    assert final is not None and final.name == "step-000002"
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2]  # the crashed attempt's step-2 line was replaced, not duplicated
    ledger = [json.loads(x)["step"] for x in (out / "ledger.jsonl").read_text().splitlines()]
    assert ledger == [1, 2]  # and its ledger line too
    assert not (out / "checkpoints" / "step-000002.tmp").exists()
    events = EventAccumulator(str(out / "tb"))  # TensorBoard shows each step once too
    events.Reload()
    assert [e.step for e in events.Scalars("train/lr")] == [1, 2]


@pytest.mark.slow
def test_a_fresh_run_never_mixes_with_a_previous_one(
    model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "run"
    _train(model_dir, out, steps=2)
    with pytest.raises(ValueError, match="holds a previous run"):
        _train(model_dir, out, steps=1)
    assert latest_checkpoint(out).name == "step-000002"  # type: ignore[union-attr]  # untouched
    _train(model_dir, out, steps=1, overwrite=True)
    final = latest_checkpoint(out)
    assert final is not None and final.name == "step-000001"  # not the old run's step 2
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1]
    # killed before its first checkpoint: resume starts over, says so, and logs each step once
    (out / "checkpoints" / "step-000001").rename(out / "checkpoints" / "step-000001.tmp")
    with caplog.at_level(logging.WARNING, logger="treegrpo.train.trainer"):
        _train(model_dir, out, steps=1, resume=True)
    assert any("holds no checkpoint" in r.message and str(out) in r.message for r in caplog.records)
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1]


@pytest.mark.slow
def test_a_mix_draws_the_prompts_from_the_weighted_files(model_dir: Path, tmp_path: Path) -> None:
    # half the questions are source 1; with weights (0, 1) every prompt comes from source 1
    items = [replace(it, source=i % 2) for i, it in enumerate(ITEMS)]
    run = RunConfig(out_dir=str(tmp_path / "run"), steps=1, prompts_per_step=4, seed=3)
    task = TrainTask(model_dir, load, WordTool(), items, SAMPLING, LIMITS, 120, mix=(0, 1))
    out = train(task, TrainSettings(ALGO, OPTIM, run))
    kept = json.loads((out / "forests" / "step-000001.json").read_text())
    asked = [p["question"] for p in kept["prompts"]]
    assert len(asked) == 4 and set(asked) <= {it.question for it in items if it.source == 1}
    assert json.loads((out / "config.json").read_text())["mix"] == [0, 1]


def test_people_cover_the_toy_world() -> None:
    assert len(ITEMS) == len(PEOPLE)


class _RunsCode:
    """A pickle that would create a directory when loaded (if loading could run code)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        import os

        return (os.makedirs, (str(self.marker),))


@pytest.mark.slow
def test_checkpoints_load_safely_and_a_damaged_newest_one_is_skipped(
    model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    straight = _train(model_dir, tmp_path / "straight", steps=2)
    out = tmp_path / "run"
    _train(model_dir, out, steps=2)
    newest = latest_checkpoint(out)
    assert newest is not None and newest.name == "step-000002"
    state = torch.load(newest / "trainer_state.pt", weights_only=True)  # tensors and plain values
    assert state["step"] == 2 and json.loads((newest / "meta.json").read_text())["healthy"]

    # a truncated weights file: found, the checkpoint before it used, with a warning
    weights = newest / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with caplog.at_level(logging.WARNING, logger="treegrpo"):
        assert latest_checkpoint(out).name == "step-000001"  # type: ignore[union-attr]
    assert "step-000002 is damaged (model/model.safetensors has" in caplog.text
    # a torn last line in metrics.jsonl, as a kill while logging leaves it
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "reward/me')
    resumed = _train(model_dir, out, steps=2, resume=True)
    assert (out / "checkpoints" / "step-000002.damaged").is_dir()  # set aside, not deleted
    a, b = _weights(straight), _weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)  # as if nothing had happened
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [
        1,
        2,
    ]

    # no meta.json: a save that did not finish
    (latest_checkpoint(out) / "meta.json").unlink()  # type: ignore[operator]
    assert latest_checkpoint(out).name == "step-000001"  # type: ignore[union-attr]

    # trainer state that would run code when unpickled is refused, and nothing runs
    marker = tmp_path / "code-ran"
    torch.save({"step": _RunsCode(marker)}, tmp_path / "trainer_state.pt")
    with pytest.raises(ValueError, match="could run code"):
        ckpt_module.load_trainer_state(tmp_path)
    assert not marker.exists()


def test_a_checkpoint_without_safetensors_weights_is_not_resumed(tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoints" / "step-000001"
    (ckpt / "model").mkdir(parents=True)
    (ckpt / "model" / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(ValueError, match="holds no safetensors weights"):
        trainer_module._check_resumable(ckpt, lora=False)
