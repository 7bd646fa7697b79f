"""A setting no run can use stops `treegrpo train` at once with one line that names its flag (or
its config file and key) and exit status 2, like a bad flag, never with a traceback from deep
inside a run; and `--config` is read once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from treegrpo import cli
from treegrpo.core.budget import TreeShape
from treegrpo.jobs.presets import DataConfig, EmbeddedConfig
from treegrpo.train.config import (
    AlgorithmConfig,
    ConfigValueError,
    HealthConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
)

DATA = [
    "--data.train-files",
    "wiki:train",
    "--data.model",
    "smollm2",
    "--data.corpus",
    "wiki:corpus",
]


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--algo.m", "0"], "--algo.m: must be >= 1 (got 0)"),
        (["--algo.k", "9"], "--algo.k: must be at most the 1 + n·l = 7 leaves (got 9)"),
        (["--algo.clip-eps", "1.5"], "--algo.clip-eps: must be in (0, 1) (got 1.5)"),
        (["--algo.dual-clip", "0.5"], "--algo.dual-clip: must be > 1 (got 0.5)"),
        (
            ["--algo.expansion-budget", "difficulty", "--algo.expansion-budget-cap", "1"],
            "--algo.expansion-budget-cap: must be >= n = ",  # n of the default preset
        ),
        (["--algo.algo", "chain", "--algo.advantage-mode", "intra"], "--algo.advantage-mode: "),
        (["--algo.l", "0"], "--algo.l: leaves one leaf per tree"),
        (["--optim.lr", "0"], "--optim.lr: must be > 0 (got 0.0)"),
        (["--optim.betas", "0.9", "1.5"], "--optim.betas: must each be in [0, 1) (got (0.9, 1.5))"),
        (["--optim.micro-batch-tokens", "0"], "--optim.micro-batch-tokens: must be >= 1 (got 0)"),
        (["--run.prompts-per-step", "0"], "--run.prompts-per-step: must be >= 1 (got 0)"),
        (["--run.save-every", "0"], "--run.save-every: must be >= 1 (got 0)"),
        (["--run.seed", "-1"], "--run.seed: must be >= 0 (got -1)"),
        (["--model.lora-rank", "-1"], "--model.lora-rank: must be >= 0 (got -1)"),
        (["--model.lora-dropout", "1"], "--model.lora-dropout: must be in [0, 1) (got 1.0)"),
        (["--model.device", "gpu"], "--model.device: must be auto, cpu, cuda, cuda:N, mps, "),
        (["--world.people", "500"], "--world.people: must be in [6, 160] (got 500)"),
        (["--world.temperature", "0"], "--world.temperature: must be > 0 (got 0.0)"),
        ([*DATA, "--data.top-p", "0"], "--data.top-p: must be in (0, 1] (got 0.0)"),
        ([*DATA, "--data.max-turns", "-1"], "--data.max-turns: must be >= 0 (got -1)"),
        (["--health.patience", "0"], "--health.patience: must be >= 1 (got 0)"),
        (["--cluster.train-ranks", "-1"], "--cluster.train-ranks: must be >= 0 (got -1)"),
        (["--cluster.cpus-per-worker", "-0.5"], "--cluster.cpus-per-worker: must be >= 0"),
        (["--health.max-failed-searches", "2"], "--health.max-failed-searches: must be in [0, 1]"),
    ],
)
def test_a_bad_flag_value_stops_with_one_line_naming_the_flag(
    flags: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as err:
        cli.main(["train", "--dry-run", *flags])
    assert err.value.code == 2
    out = capsys.readouterr()
    assert out.out == ""  # stopped before the dry run printed anything
    assert out.err.startswith(f"treegrpo train: {line}") and out.err.count("\n") == 1


def test_the_script_answers_a_bad_value_without_a_traceback(tmp_path: Path) -> None:
    # --dry-run: should the check ever go, this test fails at once instead of training
    args = ["train", "--dry-run", "--run.out-dir", str(tmp_path / "run"), "--algo.m", "0"]
    done = subprocess.run(
        [sys.executable, "-m", "treegrpo.cli", *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2
    assert done.stderr == "treegrpo train: --algo.m: must be >= 1 (got 0)\n"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("algo: {m: 0}\n", "section 'algo': m must be >= 1 (got 0)"),
        ("optim: {lr: -1.0e-4}\n", "section 'optim': lr must be > 0 (got -0.0001)"),
        ("world: {people: 3}\n", "section 'world': people must be in [6, 160] (got 3)"),
        ("health: {window: 0}\n", "section 'health': window must be >= 1 (got 0)"),
    ],
)
def test_a_bad_value_in_a_config_file_names_the_file_and_the_key(
    text: str, line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SystemExit) as err:
        cli.main(["train", "--config", str(path), "--dry-run"])
    assert err.value.code == 2
    assert capsys.readouterr().err == f"treegrpo train: {path}: {line}\n"


def test_a_flag_that_makes_the_file_bad_is_the_one_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text("algo: {algo: chain, m: 4, n: 0, l: 0}\n")
    with pytest.raises(SystemExit) as err:
        cli.main(["train", "--config", str(path), "--dry-run", "--algo.algo", "tree"])
    assert err.value.code == 2
    assert capsys.readouterr().err.startswith("treegrpo train: --algo.l: leaves one leaf per tree")


def test_the_config_file_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(
        f"run: {{out_dir: {tmp_path / 'run'}}}\n"
        "data: {model: smollm2, train_files: ['wiki:train'], corpus: 'wiki:corpus'}\n"
    )
    reads: list[Path] = []
    read_text = Path.read_text

    def counted(self: Path, *args: Any, **kwargs: Any) -> str:
        reads.append(self)
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted)
    cli.main(["train", "--config", str(path), "--dry-run"])
    assert capsys.readouterr().out.startswith("# treegrpo train --dry-run: the data job")
    assert [p for p in reads if p.name == "run.yaml"] == [path]


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: AlgorithmConfig(n=-1), "n"),
        (lambda: AlgorithmConfig(algo="tree", n=0, l=1), "n"),
        (lambda: AlgorithmConfig(format_score=1.0), "format_score"),
        (lambda: AlgorithmConfig(algo="tre"), "algo"),  # type: ignore[arg-type]
        (lambda: OptimConfig(ppo_epochs=0), "ppo_epochs"),
        (lambda: OptimConfig(grad_clip=float("nan")), "grad_clip"),
        (lambda: RunConfig(out_dir=""), "out_dir"),
        (lambda: RunConfig(keep_checkpoints=0), "keep_checkpoints"),
        (lambda: ModelConfig(engine="vlm"), "engine"),  # type: ignore[arg-type]
        (lambda: HealthConfig(entropy_min=2.0, entropy_max=1.0), "entropy_max"),
        (lambda: EmbeddedConfig(max_context=0), "max_context"),
        (lambda: DataConfig(retriever="bm52"), "retriever"),  # type: ignore[arg-type]
        (lambda: DataConfig(eval_questions=0), "eval_questions"),
    ],
)
def test_library_callers_get_the_field_named_too(make: Any, field: str) -> None:
    with pytest.raises(ConfigValueError) as err:
        make()
    assert err.value.field == field and str(err.value).startswith(f"{field} ")


def test_a_tree_without_expansions_and_inter_credit_samples_chains() -> None:
    algo = AlgorithmConfig(algo="tree", l=0, advantage_mode="inter")  # allowed: chain GRPO
    assert algo.shape() == TreeShape(2)
