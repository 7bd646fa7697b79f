"""`treegrpo train --config file.yaml --flag value`: flags win over the file, the file over the
preset, and the resolved settings land in the run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from treegrpo import cli
from treegrpo.train import embedded
from treegrpo.train.config import ModelConfig
from treegrpo.train.yaml_config import load_config


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace the training job by a recorder of what the CLI hands it."""
    seen: list[dict[str, Any]] = []

    def fake_run(algo: Any, optim: Any, run: Any, world: Any, model_cfg: Any) -> dict[str, Any]:
        seen.append({"algo": algo, "optim": optim, "run": run, "world": world, "model": model_cfg})
        return {"before": {}, "after": {}, "seconds": {"total": 0.0}}

    monkeypatch.setattr(embedded, "run_embedded", fake_run)
    monkeypatch.setattr(embedded, "before_after_table", lambda before, after: "")
    return seen


def test_flags_win_over_the_file_and_the_file_over_the_preset(
    tmp_path: Path, calls: list[dict[str, Any]]
) -> None:
    out = tmp_path / "run"
    path = tmp_path / "run.yaml"
    path.write_text(
        "algo: {algo: chain, m: 4}\n"
        "optim: {lr: 1.0e-5, mini_batch_prompts: 4}\n"
        f"run: {{out_dir: {out}, steps: 3}}\n"
        "model: {lora_rank: 8, grad_checkpointing: true}\n"
    )
    cli.main(["train", "--config", str(path), "--lr", "3e-4", "--steps", "5", "--m", "6"])
    (got,) = calls
    assert got["algo"].algo == "chain" and got["algo"].m == 6  # flag over file
    assert got["optim"].lr == 3e-4 and got["optim"].mini_batch_prompts == 4  # flag, file
    assert got["optim"].weight_decay == cli.DEFAULT_OPTIM.weight_decay  # preset (0.0, not 0.01)
    assert got["run"].out_dir == str(out) and got["run"].steps == 5
    assert got["world"] == cli.DEFAULT_EMBEDDED
    assert got["model"] == ModelConfig(lora_rank=8, grad_checkpointing=True)
    resolved = load_config(out / "config.yaml", cli.TRAIN_SECTIONS)
    assert resolved == {k: got[k] for k in cli.TRAIN_SECTIONS}


def test_without_a_file_the_preset_applies(tmp_path: Path, calls: list[dict[str, Any]]) -> None:
    cli.main(["train", f"--out-dir={tmp_path / 'r'}", "--lora-rank", "4"])
    (got,) = calls
    assert got["algo"] == cli.DEFAULT_ALGO and got["optim"] == cli.DEFAULT_OPTIM
    assert got["model"] == ModelConfig(lora_rank=4)


def test_a_bad_file_stops_with_its_name_and_key(
    tmp_path: Path, calls: list[dict[str, Any]]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("optim: {learning_rate: 0.1}\n")
    with pytest.raises(SystemExit) as err:
        cli.main(["train", f"--config={path}"])
    assert f"{path}: unknown key 'optim.learning_rate'" in str(err.value)
    assert calls == []
