"""`treegrpo train --config file.yaml --flag value`: flags win over the file, the file over the
preset, and the resolved settings land in the run directory; a data section or
`--data.train-files` runs the data-driven job instead of the embedded one; `--dry-run` prints the
resolved settings and stops."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from treegrpo import cli
from treegrpo.cli import commands
from treegrpo.jobs import data as datarun
from treegrpo.jobs import embedded, presets
from treegrpo.jobs.data import check_data
from treegrpo.jobs.presets import DataConfig
from treegrpo.train.config import ClusterConfig, ModelConfig
from treegrpo.train.task import TrainSettings
from treegrpo.train.yaml_config import apply_config, load_config

REPO = Path(__file__).parents[2]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace the training job by a recorder of what the CLI hands it."""
    seen: list[dict[str, Any]] = []

    def record(settings: TrainSettings, section: str, value: Any, cluster: Any) -> None:
        seen.append({"algo": settings.algo, "optim": settings.optim, "run": settings.run})
        seen[-1] |= {section: value, "model": settings.model}
        seen[-1] |= {"cluster": cluster} if cluster != ClusterConfig() else {}

    def fake_run(settings: TrainSettings, world: Any, cluster: Any) -> dict[str, Any]:
        record(settings, "world", world, cluster)
        return {"before": {}, "after": {}, "seconds": {"total": 0.0}}

    def fake_data(settings: TrainSettings, data: Any, inputs: Any, cluster: Any) -> dict[str, Any]:
        record(settings, "data", data, cluster)
        return {"before": None, "after": None, "seconds": {"total": 0.0}}

    monkeypatch.setattr(embedded, "run_embedded", fake_run)
    monkeypatch.setattr(embedded, "before_after_table", lambda before, after: "")
    monkeypatch.setattr(datarun, "run_data", fake_data)
    monkeypatch.setattr(datarun, "read_questions", lambda data: None)  # reads nothing
    nothing = SimpleNamespace(tool=None)  # prepared: no model, no tools to close
    monkeypatch.setattr(datarun, "prepare_inputs", lambda data, questions: nothing)
    monkeypatch.setattr(commands, "join_ray", lambda cluster: cluster)  # no Ray cluster here
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
    args = ["train", "--config", str(path), "--optim.lr", "3e-4", "--run.steps", "5"]
    cli.main([*args, "--algo.m", "6"])
    (got,) = calls
    assert got["algo"].algo == "chain" and got["algo"].m == 6  # flag over file
    assert got["optim"].lr == 3e-4 and got["optim"].mini_batch_prompts == 4  # flag, file
    assert got["optim"].weight_decay == presets.DEFAULT_OPTIM.weight_decay  # preset (0.0, not 0.01)
    assert got["run"].out_dir == str(out) and got["run"].steps == 5
    assert got["world"] == presets.DEFAULT_EMBEDDED
    assert got["model"] == ModelConfig(lora_rank=8, grad_checkpointing=True)
    resolved = load_config(out / "config.yaml", presets.TRAIN_SECTIONS)
    assert resolved == {**presets.TRAIN_SECTIONS, **got}  # data keeps its default: not written


def test_without_a_file_the_preset_applies(tmp_path: Path, calls: list[dict[str, Any]]) -> None:
    cli.main(["train", f"--run.out-dir={tmp_path / 'r'}", "--model.lora-rank", "4"])
    (got,) = calls
    assert got["algo"] == presets.DEFAULT_ALGO and got["optim"] == presets.DEFAULT_OPTIM
    assert got["model"] == ModelConfig(lora_rank=4)


def test_cluster_flags_reach_the_job_and_the_resolved_file(
    tmp_path: Path, calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r"
    args = ["--cluster.rollout-workers", "2", "--cluster.ray-address", "auto"]
    args += ["--cluster.train-ranks", "4", "--cluster.gpus-per-rank", "1"]
    cli.main(["train", f"--run.out-dir={out}", *args])
    (got,) = calls
    assert got["cluster"] == ClusterConfig(
        rollout_workers=2, ray_address="auto", train_ranks=4, gpus_per_rank=1.0
    )
    assert load_config(out / "config.yaml", presets.TRAIN_SECTIONS)["cluster"] == got["cluster"]
    with pytest.raises(SystemExit):
        cli.main(["train", f"--run.out-dir={tmp_path / 'x'}", "--cluster.train-ranks", "-1"])
    err = capsys.readouterr().err
    assert "treegrpo train: --cluster.train-ranks: must be >= 0 (got -1)" in err


def test_a_bad_file_stops_with_its_name_and_key(
    tmp_path: Path, calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("optim: {learning_rate: 0.1}\n")
    with pytest.raises(SystemExit) as err:
        cli.main(["train", f"--config={path}"])
    assert err.value.code == 2
    assert f"{path}: unknown key 'optim.learning_rate'" in capsys.readouterr().err
    assert calls == []


def test_a_data_section_runs_the_data_job(tmp_path: Path, calls: list[dict[str, Any]]) -> None:
    out = tmp_path / "run"
    train = tmp_path / "train.parquet"
    train.touch()  # only names are checked before prepare_inputs
    path = tmp_path / "run.yaml"
    path.write_text(
        f"run: {{out_dir: {out}, steps: 3}}\n"
        f"data: {{model: smollm2, train_files: [{train}], corpus: 'wiki:corpus', topk: 5}}\n"
    )
    cli.main(["train", "--config", str(path), "--data.topk", "4", "--data.max-turns", "2"])
    (got,) = calls
    assert "world" not in got  # the embedded job did not run
    assert got["data"] == DataConfig(
        model="smollm2", train_files=(str(train),), corpus="wiki:corpus", topk=4, max_turns=2
    )
    resolved = load_config(out / "config.yaml", presets.TRAIN_SECTIONS)
    assert resolved["data"] == got["data"] and resolved["run"].steps == 3
    assert "world:" not in (out / "config.yaml").read_text()  # the embedded job's section


def test_data_flags_run_the_data_job_and_every_section_takes_its_flags(
    tmp_path: Path, calls: list[dict[str, Any]]
) -> None:
    files = [tmp_path / "nq.parquet", tmp_path / "hotpotqa.jsonl"]
    for f in files:
        f.touch()
    args = ["train", "--data.train-files", *map(str, files), "--data.model", "smollm2"]
    args += ["--data.retriever-url", "http://127.0.0.1:8000/retrieve", "--model.lora-rank", "16"]
    args += ["--model.device", "cpu", f"--run.out-dir={tmp_path / 'r'}", "--optim.lr", "2e-5"]
    args += ["--algo.algo", "chain", "--algo.m", "4"]
    cli.main(args)
    (got,) = calls
    assert got["data"].train_files == tuple(map(str, files))
    assert got["data"].retriever_url == "http://127.0.0.1:8000/retrieve"
    assert got["model"] == ModelConfig(lora_rank=16, device="cpu")
    assert got["optim"].lr == 2e-5 and got["run"].out_dir == str(tmp_path / "r")
    assert got["algo"].algo == "chain" and got["algo"].m == 4


def test_world_settings_do_not_go_with_the_data_job(
    tmp_path: Path, calls: list[dict[str, Any]]
) -> None:
    args = ["train", "--data.train-files", "wiki:train", "--data.model", "smollm2"]
    args += ["--data.corpus", "wiki:corpus", "--world.world-seed", "3"]
    with pytest.raises(SystemExit, match="world section configures the embedded job"):
        cli.main(args)
    assert calls == []


def test_dry_run_resolves_the_real_preset_and_writes_nothing(
    tmp_path: Path, calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "real"
    preset = REPO / "configs" / "real-smollm2-wiki.yaml"
    args = ["train", "--config", str(preset), "--dry-run", "--run.steps", "0"]
    cli.main([*args, "--run.out-dir", str(out), "--run.prompts-per-step", "64"])
    printed = capsys.readouterr().out
    assert printed.startswith("# treegrpo train --dry-run: the data job")
    cfg = apply_config(yaml.safe_load(printed), presets.TRAIN_SECTIONS, "stdout")
    assert cfg == {**load_config(preset, presets.TRAIN_SECTIONS), "run": cfg["run"]}
    assert cfg["run"].steps == 0 and cfg["run"].prompts_per_step == 64
    data, model = cfg["data"], cfg["model"]
    assert data.model == "smollm2-protocol" and data.train_files == ("wiki:train",)
    assert data.eval_files == ("wiki:test",) and data.eval_questions == 100
    assert data.corpus == "wiki:corpus" and data.retriever == "bm25"
    assert (data.max_new_tokens, data.max_obs_tokens, data.max_context) == (96, 256, 2048)
    assert model.lora_rank == 16 and model.grad_checkpointing
    algo = cfg["algo"]
    assert (algo.m, algo.n, algo.l) == (2, 2, 1)
    assert calls == [] and not out.exists()


def test_the_hard_wiki_preset_differs_from_the_wiki_preset_in_its_questions_only() -> None:
    easy = load_config(REPO / "configs" / "real-smollm2-wiki.yaml", presets.TRAIN_SECTIONS)
    hard = load_config(REPO / "configs" / "real-smollm2-wiki-hard.yaml", presets.TRAIN_SECTIONS)
    assert hard["data"].train_files == ("wiki-hard:train",)
    assert hard["data"].eval_files == ("wiki-hard:test",)
    same = replace(hard["data"], train_files=("wiki:train",), eval_files=("wiki:test",))
    assert same == easy["data"]
    for section in ("algo", "optim", "model"):
        assert hard[section] == easy[section], section
    assert check_data(hard["data"]) == []


def test_dry_run_of_the_embedded_job_and_of_a_bad_data_setting(
    tmp_path: Path, calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    cli.main(["train", "--dry-run", f"--run.out-dir={tmp_path / 'x'}"])
    printed = capsys.readouterr().out
    assert "the embedded job" in printed and "world:" in printed and "data:" not in printed
    args = ["train", "--dry-run", "--data.train-files", "wiki:train", "--data.model", "smollm2"]
    with pytest.raises(SystemExit, match=r"data\.corpus: wiki:corps: unknown built-in set"):
        cli.main([*args, "--data.corpus", "wiki:corps"])
    assert calls == [] and not (tmp_path / "x").exists()


def test_the_paper_preset_is_a_data_job_that_wants_files(
    tmp_path: Path, calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    preset = str(REPO / "configs" / "searchr1-qa.yaml")
    with pytest.raises(SystemExit, match=r"data\.train_files: give at least one"):
        cli.main(["train", "--config", preset, "--dry-run"])  # its data section picks the job
    model = tmp_path / "qwen"
    model.mkdir()
    (model / "config.json").write_text("{}")
    train = tmp_path / "nq_hotpotqa_train.parquet"
    train.touch()
    args = ["train", "--config", preset, "--dry-run", "--data.train-files", str(train)]
    args += ["--data.model", str(model), "--data.retriever-url", "http://127.0.0.1:8000/retrieve"]
    cli.main([*args, "--model.device", "cuda"])
    cfg = apply_config(yaml.safe_load(capsys.readouterr().out), presets.TRAIN_SECTIONS, "stdout")
    assert cfg["optim"].lr == 1e-6 and cfg["optim"].mini_batch_prompts == 64
    assert cfg["run"].prompts_per_step == 512 and cfg["run"].steps == 180
    assert cfg["model"] == ModelConfig(device="cuda")
    assert cfg["data"] == DataConfig(
        model=str(model),
        train_files=(str(train),),
        retriever_url="http://127.0.0.1:8000/retrieve",
    )  # the file's data section restates the paper's defaults
    assert calls == []


def test_progress_lines_go_to_the_log_file_and_to_stdout_when_it_is_not_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(settings: TrainSettings, world: Any, cluster: Any) -> dict[str, Any]:
        logging.getLogger("treegrpo.train.trainer").info("step 1/2 reward 0.500")
        return {"before": {}, "after": {}, "seconds": {"total": 0.0}}

    monkeypatch.setattr(embedded, "run_embedded", run)
    monkeypatch.setattr(embedded, "before_after_table", lambda before, after: "")
    handlers = list(logging.getLogger("treegrpo").handlers)
    cli.main(["train", f"--run.out-dir={tmp_path / 'r'}"])
    assert "treegrpo.train.trainer: step 1/2 reward 0.500" in (tmp_path / "r/train.log").read_text()
    assert "step 1/2 reward 0.500" in capsys.readouterr().out  # captured stdout: not a terminal
    assert logging.getLogger("treegrpo").handlers == handlers  # detached after the command


def test_the_gpu_reading_preset_is_the_cpu_one_with_a_real_batch() -> None:
    cpu = load_config(REPO / "configs" / "real-smollm2-wiki-qa.yaml", presets.TRAIN_SECTIONS)
    gpu = load_config(REPO / "configs" / "real-smollm2-wiki-qa-gpu.yaml", presets.TRAIN_SECTIONS)
    assert cpu["data"].model == gpu["data"].model == "smollm2-reader"
    assert cpu["data"].train_files == gpu["data"].train_files
    assert cpu["data"].train_weights == gpu["data"].train_weights == (1, 1)  # half two-hop
    assert cpu["data"].eval_files == gpu["data"].eval_files
    assert gpu["data"].eval_questions is None  # every held-out question
    assert (gpu["data"].max_new_tokens, gpu["data"].max_context) == (500, 4096)
    assert cpu["algo"] == gpu["algo"]
    assert gpu["run"].prompts_per_step == 64 and gpu["model"].device == "cuda"
    assert cpu["optim"].lr == gpu["optim"].lr


@pytest.mark.parametrize("preset", sorted((REPO / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_preset_loads(preset: Path) -> None:
    cfg = load_config(preset, presets.TRAIN_SECTIONS)
    assert cfg["run"].steps > 0 and cfg["algo"].algo in ("tree", "chain")
