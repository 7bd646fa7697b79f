"""Training health (``train.health``): the rules on made-up metrics, then each alarm provoked in
real runs of the tiny agent: a KL bound and a reward collapse (both from too large a learning
rate) that stop the run, an entropy band that warns, and a rollback to the last healthy
checkpoint with a smaller learning rate."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch

from agent_fixtures import FACTS, WordTool
from treegrpo import cli
from treegrpo.engine.sampling import SamplingParams
from treegrpo.models.load import load_model
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.train import health as health_module
from treegrpo.train import trainer as trainer_module
from treegrpo.train.config import AlgorithmConfig, HealthConfig, OptimConfig, RunConfig
from treegrpo.train.health import HealthMonitor, Rollback, TrainingUnhealthy
from treegrpo.train.task import TrainItem, TrainSettings, TrainTask
from treegrpo.train.trainer import train


def metrics(reward: float = 0.5, kl: float = 0.01, entropy: float = 0.2, updates: int = 1):
    return {
        "reward/mean": reward,
        "loss/kl": kl,
        "loss/entropy": entropy,
        "train/updates": float(updates),
        "train/prompts_updated": float(updates),
    }


def test_kl_over_its_bound_raises_the_alarm_after_patience_steps() -> None:
    mon = HealthMonitor(HealthConfig(kl_max=0.5, patience=2, reward_collapse=None))
    assert mon.check(1, metrics(kl=0.9)) == ["KL to the reference 0.9 > kl_max 0.5"]
    assert mon.streak == 1 and not mon.alarm and not mon.healthy
    assert mon.check(2, metrics(kl=0.7)) and mon.alarm and mon.streak_start == 1
    assert mon.check(3, metrics(kl=0.1)) == [] and not mon.alarm and mon.healthy
    # a step without an update has no KL to judge
    assert mon.check(4, metrics(kl=9.0, updates=0)) == []


def test_entropy_band_both_ways() -> None:
    mon = HealthMonitor(HealthConfig(entropy_min=0.05, entropy_max=2.0, kl_max=None))
    assert mon.check(1, metrics(entropy=0.01)) == ["entropy 0.01 < entropy_min 0.05"]
    assert mon.check(2, metrics(entropy=3.0)) == ["entropy 3 > entropy_max 2"]
    assert mon.check(3, metrics(entropy=0.5)) == []


def test_reward_collapse_against_the_best_rolling_mean() -> None:
    cfg = HealthConfig(window=3, reward_collapse=0.25, kl_max=None, patience=2)
    mon = HealthMonitor(cfg)
    rewards = [0.2, 0.6, 0.8, 0.8, 0.7, 0.3, 0.0, 0.0, 0.0]
    found = [mon.check(i + 1, metrics(reward=r)) for i, r in enumerate(rewards)]
    # best mean 0.767 (steps 2-4); the mean drops below 0.25 x that at step 8 (0.1)
    assert [bool(f) for f in found] == [False] * 7 + [True, True]
    assert "reward collapsed: mean of the last 3 steps 0.100" in found[7][0]
    assert mon.alarm and mon.streak_start == 8
    # a run that never learned has nothing to collapse from
    flat = HealthMonitor(cfg)
    assert not any(flat.check(i + 1, metrics(reward=0.0)) for i in range(6))
    # the monitor after a resume is the one before it
    logged = [{"step": i + 1, **metrics(reward=r)} for i, r in enumerate(rewards)]
    again = HealthMonitor.replay(cfg, logged)
    assert (again.best, again.streak, again.streak_start) == (mon.best, mon.streak, 8)


@pytest.mark.parametrize(
    "bad",
    [
        {"patience": 0},
        {"max_failed_searches": 1.5},
        {"rollback_lr_scale": 0.0},
        {"reward_collapse": 1.0},
    ],
)
def test_bad_health_settings_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        HealthConfig(**bad)


ITEMS = [TrainItem(f"Where was {p} born", (c,), f"toy-{p}") for p, c in FACTS.items()]


def _train(start: Path, out: Path, steps: int, health: HealthConfig, lr: float = 1e-3) -> Path:
    run = RunConfig(out_dir=str(out), steps=steps, prompts_per_step=4, seed=3, save_every=1)
    task = TrainTask(start, load_model, WordTool(), ITEMS, SamplingParams(max_new_tokens=40),
                     AgentLimits(max_turns=2, max_context=1024), max_obs_tokens=120)  # fmt: skip
    optim = OptimConfig(lr=lr, mini_batch_prompts=2, micro_batch_tokens=2000)
    return train(task, TrainSettings(AlgorithmConfig(kl_coef=0.001), optim, run, health=health))


def _steps(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_policy_driven_off_its_reference_stops_the_run(model_dir: Path, tmp_path: Path) -> None:
    # a learning rate 300 times too large drives the policy away from the reference at once
    health = HealthConfig(action="stop", kl_max=0.05, patience=2)
    with pytest.raises(TrainingUnhealthy, match="2 unhealthy steps in a row since step 1"):
        _train(model_dir, tmp_path / "run", steps=4, health=health, lr=0.3)
    steps = _steps(tmp_path / "run")
    assert [m["step"] for m in steps] == [1, 2]  # stopped at the alarm
    assert [m["health/alarm"] for m in steps] == [0.0, 1.0]
    assert all(m["loss/kl"] > 0.05 for m in steps)


@pytest.mark.slow
def test_a_reward_collapse_stops_the_run_and_names_the_healthy_checkpoint(
    model_dir: Path, tmp_path: Path
) -> None:
    # too large a learning rate (0.05) wrecks the agent: its reward falls from 0.35 to 0 at once
    health = HealthConfig(
        action="stop", kl_max=None, kl_drift=None, reward_collapse=0.25, window=1, patience=2
    )
    with pytest.raises(TrainingUnhealthy, match=r"since step 2.*checkpoint is .*step-000001"):
        _train(model_dir, tmp_path / "run", steps=5, health=health, lr=0.05)
    rewards = [m["reward/mean"] for m in _steps(tmp_path / "run")]
    assert len(rewards) == 3 and rewards[0] > 0 and rewards[1:] == [0.0, 0.0]


@pytest.mark.slow
def test_an_entropy_alarm_warns_and_the_run_goes_on(
    model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    health = HealthConfig(entropy_min=50.0, patience=2)  # no policy has that much: always low
    with caplog.at_level(logging.WARNING, logger="treegrpo"):
        _train(model_dir, tmp_path / "run", steps=3, health=health)
    steps = _steps(tmp_path / "run")
    assert [m["health/alarm"] for m in steps if m["train/updates"]] == [0.0, 1.0, 1.0][: len(steps)]
    assert sum("health alarm" in r.message for r in caplog.records) == 1  # once per streak
    assert "entropy" in caplog.text and "< entropy_min 50" in caplog.text


@pytest.mark.slow
def test_rollback_resumes_from_the_last_healthy_checkpoint_with_a_smaller_learning_rate(
    model_dir: Path, files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # steps 3 and 4 are judged unhealthy the first time they run (a stand-in for a collapse)
    pending = {3, 4}
    real = HealthMonitor.problems

    def problems(self: HealthMonitor, m: Any) -> list[str]:
        step = len(self.rewards) + 1
        found = real(self, m)
        if step in pending:
            pending.discard(step)
            found.append("made-up problem")
        return found

    monkeypatch.setattr(health_module.HealthMonitor, "problems", problems)
    out = tmp_path / "run"
    args = ["train", "--data.model", str(model_dir), "--data.corpus", str(files["corpus"])]
    args += ["--data.train-files", str(files["train"]), "--data.max-turns", "2"]
    args += ["--data.max-new-tokens", "40", "--data.max-obs-tokens", "120"]
    args += ["--data.max-context", "1024", "--run.out-dir", str(out), "--run.steps", "5"]
    args += ["--run.prompts-per-step", "2", "--run.save-every", "1", "--optim.lr", "1e-3"]
    args += ["--optim.mini-batch-prompts", "2", "--optim.micro-batch-tokens", "2000"]
    args += ["--model.device", "cpu", "--health.action", "rollback", "--health.patience", "2"]
    cli.main(args)

    record = json.loads((out / "health.json").read_text())
    assert record == {"lr_scale": 0.5, "rollbacks": [{"at_step": 4, "to": "step-000002"}]}
    steps = _steps(out)
    assert [m["step"] for m in steps] == [1, 2, 3, 4, 5]  # steps 3-4 redone, logged once
    assert [m["train/lr"] for m in steps] == [1e-3, 1e-3, 5e-4, 5e-4, 5e-4]
    assert (out / "checkpoints" / "step-000003.rolled-back").is_dir()  # kept for a look
    final = torch.load(out / "checkpoints" / "step-000005" / "trainer_state.pt", weights_only=True)
    assert final["extra"]["lr_scale"] == 0.5
    assert final["scheduler"]["base_lrs"] == [5e-4]


DATA = Path(__file__).parent / "data"


def _recorded(name: str) -> list[dict[str, Any]]:
    """A recorded run's step metrics (the keys the health rules read): ``collapse.jsonl`` is
    the embedded job's chain GRPO ≈8, seed 5, from a oneDNN-built warm start (held-out EM 25 →
    41, valid format 0.95 → 0.44); ``healthy.jsonl`` the same from the MKL-built one (→ 92.5)."""
    return [json.loads(x) for x in (DATA / name).read_text().splitlines()]


def test_the_recorded_format_collapse_is_caught_and_the_healthy_run_is_not() -> None:
    collapse = HealthMonitor(HealthConfig())
    found, alarms = {}, []
    for m in _recorded("collapse.jsonl"):
        found[m["step"]] = collapse.check(m["step"], m)
        alarms += [m["step"]] * collapse.alarm
    first = min(step for step, f in found.items() if f)
    assert first == 8 and "format collapsing" in found[8][0]  # rolling share 0.73 vs best 0.86
    assert alarms[0] == 10  # patience 3: ten steps before the run's end, where EM was 41
    healthy = HealthMonitor(HealthConfig())
    assert not any(healthy.check(m["step"], m) for m in _recorded("healthy.jsonl"))
    # the hard KL bound alone never saw it: the collapse's KL stayed below 0.35
    old = HealthMonitor(HealthConfig(format_drop=None, kl_drift=None))
    assert not any(old.check(m["step"], m) for m in _recorded("collapse.jsonl"))


def test_kl_drift_is_judged_on_the_rolling_mean_of_updates() -> None:
    mon = HealthMonitor(HealthConfig(kl_drift=0.1, window=3, format_drop=None, kl_max=None))
    kls = [0.05, 0.2, 0.2, 0.2]  # means of the last 3: -, -, 0.15, 0.2
    found = [mon.check(i + 1, metrics(kl=k)) for i, k in enumerate(kls)]
    assert [bool(f) for f in found] == [False, False, True, True]
    assert "KL drifting: mean of the last 3 updates 0.15 > kl_drift 0.1" in found[2][0]
    mon.check(5, metrics(kl=5.0, updates=0))  # no update: its KL is not read
    assert mon.kls == kls


def _replay_collapse(
    model_dir: Path, out: Path, monkeypatch: pytest.MonkeyPatch, health: HealthConfig
) -> Path:
    """The trainer's loop on the tiny agent, each step's metrics the recorded collapse's (the
    RL step replaced), checkpoints every step: what the health actions do with a collapse."""
    recorded = _recorded("collapse.jsonl")

    def step(*args: Any, seed: int, **kwargs: Any) -> dict[str, float]:
        return {k: v for k, v in recorded[seed].items() if k != "step"} | {
            "agent/tool_calls_per_leaf": 1.0,
            "adv/uniform_prompts": 0.5,
            "time/step_s": 0.0,
        }  # run.seed 0: the seed is the step's index

    monkeypatch.setattr(trainer_module, "rl_step", step)
    run = RunConfig(out_dir=str(out), steps=len(recorded), prompts_per_step=2, save_every=1)
    task = TrainTask(model_dir, load_model, WordTool(), ITEMS, SamplingParams(max_new_tokens=40),
                     AgentLimits(max_turns=2, max_context=1024))  # fmt: skip
    return train(task, TrainSettings(AlgorithmConfig(), OptimConfig(lr=1e-3), run, health=health))


def test_the_recorded_collapse_warns_stops_or_rolls_back(
    model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="treegrpo"):
        _replay_collapse(model_dir, tmp_path / "warn", monkeypatch, HealthConfig(action="warn"))
    alarms = [m["step"] for m in _steps(tmp_path / "warn") if m["health/alarm"]]
    assert alarms and alarms[0] == 10  # problems from step 8, patience 3
    assert "format collapsing" in caplog.text and "health alarm" in caplog.text
    with pytest.raises(TrainingUnhealthy, match=r"since step 8.*checkpoint is .*step-000007"):
        _replay_collapse(model_dir, tmp_path / "stop", monkeypatch, HealthConfig(action="stop"))
    assert [m["step"] for m in _steps(tmp_path / "stop")][-1] == 10
    with pytest.raises(Rollback, match="step-000007") as rolled:
        _replay_collapse(model_dir, tmp_path / "back", monkeypatch, HealthConfig(action="rollback"))
    assert rolled.value.checkpoint.endswith("step-000007")
    record = json.loads((tmp_path / "back" / "health.json").read_text())
    assert record["lr_scale"] == 0.5 and record["rollbacks"][0]["to"] == "step-000007"
