"""The kill harness of the reliability tests. `treegrpo train` (the data job on the tiny agent:
held-out evaluation, RL steps, checkpoints, evaluation of the final checkpoint) runs in a
subprocess of its own process group and is killed with SIGKILL at points drawn with a seed (a
phase of the run, which time it comes round, a delay into it), then resumed with
`--run.resume`, again and again; the final weights, the logged metrics and the held-out
evaluation must equal those of a run that was never interrupted.

The phases are read from the run's own log lines (``TREEGRPO_LOG=DEBUG`` adds each step's
sampling, update and checkpoint writes). A kill lands in its phase or just after it: the
harness records the last phase it saw before each kill.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file

from treegrpo.train.checkpoint import latest_checkpoint

PHASES = {
    "eval-before": "evaluating the starting model",
    "rollout": "sampling the forests",
    "update": "updating the policy",
    "checkpoint": "writing checkpoint",
    "eval-after": "evaluating the final checkpoint",
}
"""Phase → the log line that starts it."""


@dataclass(frozen=True)
class KillPoint:
    phase: str
    delay_s: float  # after the phase's first log line in the launch


def kill_points(n: int, seed: int) -> list[KillPoint]:
    """``n`` points in the order a run meets them: one in the evaluation of the starting
    model (which only the first launches do), then points in a step's rollout, update or
    checkpoint write (each at least once, the rest drawn), one in the evaluation of the final
    checkpoint (once the steps are done). A step kill is in the first step a launch runs, so
    each launch advances the run by at most one checkpoint and the run outlives the kills."""
    rng = random.Random(seed)
    inner = ["rollout", "update", "checkpoint"]
    inner += [rng.choice(inner) for _ in range(n - 2 - len(inner))]
    rng.shuffle(inner)
    return [
        KillPoint(p, rng.uniform(0, 0.05 if p.startswith("eval") else 0.15))
        for p in ["eval-before", *inner, "eval-after"]
    ]


def command(model_dir: Path, files: dict[str, Path], out: Path, steps: int) -> list[str]:
    args = [sys.executable, "-m", "treegrpo.cli", "train", "--data.model", str(model_dir)]
    args += ["--data.corpus", str(files["corpus"]), "--data.train-files", str(files["train"])]
    args += ["--data.eval-files", str(files["test"]), "--data.eval-questions", "3"]
    args += ["--data.max-turns", "2", "--data.max-new-tokens", "40"]
    args += ["--data.max-obs-tokens", "120", "--data.max-context", "1024"]
    args += ["--run.out-dir", str(out), "--run.steps", str(steps), "--run.prompts-per-step", "2"]
    args += ["--run.save-every", "1", "--optim.mini-batch-prompts", "1", "--run.seed", "5"]
    args += ["--optim.micro-batch-tokens", "2000", "--optim.lr", "1e-3", "--model.device", "cpu"]
    return [*args, "--algo.n", "2"]  # a (2,2,1) tree: 6 leaves per prompt keep each run short


def launch(args: list[str], env: dict[str, str], kill: KillPoint | None) -> tuple[int, str]:
    """Run ``args``; with ``kill``, SIGKILL its whole process group at that point. Returns the
    exit code (-9 when killed) and the last phase seen ("" when none)."""
    proc = subprocess.Popen(
        args,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the kill takes every child with it
    )
    assert proc.stdout is not None
    seen, last, lines = dict.fromkeys(PHASES, 0), "", []
    timer: threading.Timer | None = None
    for line in proc.stdout:
        lines.append(line)
        for phase, marker in PHASES.items():
            if marker in line:
                seen[phase] += 1
                last = phase
                hit = kill is not None and phase == kill.phase and seen[phase] == 1
                if hit and timer is None:
                    assert kill is not None
                    timer = threading.Timer(kill.delay_s, os.killpg, (proc.pid, signal.SIGKILL))
                    timer.start()
    code = proc.wait(timeout=600)
    if timer is not None:
        timer.join()
    if code not in (0, -signal.SIGKILL):
        raise AssertionError(f"the run failed with exit code {code}:\n{''.join(lines[-40:])}")
    return code, last


def outcome(
    out: Path, steps: int
) -> tuple[dict[str, torch.Tensor], list[dict[str, object]], object]:
    """A finished run's final weights, logged metrics (wall-clock fields dropped) and the
    held-out evaluation of its final checkpoint."""
    final = latest_checkpoint(out)
    assert final is not None and final.name == f"step-{steps:06d}"
    weights = load_file(final / "model" / "model.safetensors")
    metrics = [
        {k: v for k, v in json.loads(line).items() if k != "time" and not k.startswith("time/")}
        for line in (out / "metrics.jsonl").read_text().splitlines()
    ]
    return weights, metrics, json.loads((out / "eval-after.json").read_text())


def kill_and_resume(
    model_dir: Path, files: dict[str, Path], tmp_path: Path, n: int, seed: int
) -> None:
    env = {**os.environ, "TREEGRPO_LOG": "DEBUG", "PYTHONUNBUFFERED": "1"}
    # a launch killed in its first step's rollout, update or checkpoint write advances the run
    # by one checkpoint at most: with a step per kill point the run outlives every kill
    steps = n
    straight = tmp_path / "straight"
    assert launch(command(model_dir, files, straight, steps), env, None)[0] == 0
    out = tmp_path / "killed"
    landed: list[tuple[KillPoint, str]] = []
    for i, point in enumerate(kill_points(n, seed)):
        args = command(model_dir, files, out, steps) + (["--run.resume"] if i else [])
        code, last = launch(args, env, point)
        landed.append((point, last if code else "finished"))
    assert launch([*command(model_dir, files, out, steps), "--run.resume"], env, None)[0] == 0
    killed = [p for p, last in landed if last != "finished"]
    assert len(killed) >= n - 1, landed  # a kill late in a short phase may find the run done
    assert {p.phase for p in killed} == set(PHASES), landed

    (w_a, m_a, e_a), (w_b, m_b, e_b) = outcome(straight, steps), outcome(out, steps)
    assert w_a.keys() == w_b.keys()
    for k in w_a:
        assert torch.equal(w_a[k], w_b[k]), k
    assert [m["step"] for m in m_b] == list(range(1, steps + 1))
    assert m_a == m_b
    assert e_a == e_b
    assert not list((out / "checkpoints").glob("*.tmp"))  # no half-written save left over
    sys.stderr.write(f"kill points: {[(p.phase, last) for p, last in landed]}\n")
