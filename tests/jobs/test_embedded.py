"""Tier 3: the README's main job (`treegrpo train`: warm start, held-out eval, Tree-GRPO, eval,
report) end to end on a reduced setting: a tiny warm start, two RL steps, a few questions."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from agent_fixtures import TINY_WARM
from treegrpo.eval.evaluate import collapse_warning
from treegrpo.jobs.embedded import rl_and_eval_worlds, run_embedded
from treegrpo.jobs.presets import DEFAULT_ALGO, DEFAULT_EMBEDDED, DEFAULT_OPTIM, DEFAULT_RUN
from treegrpo.train.checkpoint import latest_checkpoint
from treegrpo.train.task import TrainSettings
from treegrpo.viz.report import with_held_out
from treegrpo.warmstart.tiny import CIRCUIT_PARAMS, warm_start


@pytest.mark.slow
def test_the_default_job_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TREEGRPO_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    assert DEFAULT_RUN.eval_every == 5  # the default job draws held-out EM every 5 steps
    run = replace(
        DEFAULT_RUN, out_dir=str(out), steps=2, prompts_per_step=2, save_every=1, eval_every=1
    )
    world = replace(DEFAULT_EMBEDDED, eval_questions=6, max_new_tokens=16)
    # two prompts of a barely trained agent often score alike on every leaf, and the default
    # leaves such prompts out of the update: train on all here, so RL visibly moves the policy
    algo = replace(DEFAULT_ALGO, skip_uniform_prompts=False)
    settings = TrainSettings(algo, DEFAULT_OPTIM, run)
    summary = run_embedded(settings, world, warm=TINY_WARM, progress=False)
    for name in ("report.md", "summary.json", "learning_curve.png", "eval-before.md"):
        assert (out / name).is_file(), name
    report = (out / "report.html").read_text()  # with the kept trees of step 1 linked
    assert 'href="view/step-000001.html"' in report and (out / "view/step-000001.html").is_file()
    assert 'href="view/eval-after.html"' in report and (out / "view/eval-after.html").is_file()
    assert summary["before"]["overall"]["n"] == summary["after"]["overall"]["n"] == 6
    assert summary["collapse"] == collapse_warning(summary["before"], summary["after"])
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    # held-out EM at step 1 (periodic) and at 2 (the final checkpoint's, evaluated once, after)
    assert "eval/em" in metrics[0] and "eval/em" not in metrics[1]
    curve = [(r["step"], r["eval/em"]) for r in with_held_out(out) if "eval/em" in r]
    assert sorted(step for step, _ in curve) == [0, 1, 2]
    assert dict(curve)[2] == summary["after"]["overall"]["em"]
    assert "misses after" in (out / "report.md").read_text()

    # RL moved the policy but not the warm start's copying circuits (kept fixed on purpose).
    start = AutoModelForCausalLM.from_pretrained(warm_start(TINY_WARM, progress=False))
    ckpt = latest_checkpoint(out)
    assert ckpt is not None
    final = AutoModelForCausalLM.from_pretrained(ckpt / "model")
    before, after = dict(start.named_parameters()), dict(final.named_parameters())
    moved = {n for n in before if not torch.equal(before[n], after[n])}
    assert moved and not any(n.startswith(CIRCUIT_PARAMS) for n in moved)

    # a second run into the same directory is refused before it writes anything there
    report = (out / "eval-before.json").stat().st_mtime_ns  # rewritten = a newer time
    with pytest.raises(ValueError, match="holds a previous run"):
        settings = TrainSettings(DEFAULT_ALGO, DEFAULT_OPTIM, run)
        run_embedded(settings, world, warm=TINY_WARM, progress=False)
    assert (out / "eval-before.json").stat().st_mtime_ns == report


def test_rl_trains_on_one_world_and_is_evaluated_on_another() -> None:
    train, held_out = rl_and_eval_worlds(DEFAULT_EMBEDDED)
    assert (train.seed, held_out.seed) == (0, 1)
    assert train.passages != held_out.passages
    assert not {q.uid for q in train.questions} & {q.uid for q in held_out.questions}
