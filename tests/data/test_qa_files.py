"""Search-R1 parquet and FlashRAG jsonl as users have them: `treegrpo prepare` round trip,
Search-R1's exact layout (answers as list or numpy array), several files mixed without merging
groups, and `treegrpo eval --data file.parquet`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.data.qa_files import (
    SEARCH_R1_TEMPLATE,
    flashrag_row,
    searchr1_row,
    write_jsonl,
    write_parquet,
)
from treegrpo import cli
from treegrpo.agent.prompt import format_question, instruction_text
from treegrpo.core.groups import dense_ids
from treegrpo.data.errors import DataError
from treegrpo.data.flashrag import default_source
from treegrpo.data.load import load_questions
from treegrpo.data.searchr1 import normalize_answers, question_from_prompt, searchr1_question
from treegrpo.jobs.data import eval_inputs
from treegrpo.jobs.presets import DataConfig

NQ = [
    flashrag_row(0, "who wrote hamlet", ["Shakespeare", "William Shakespeare"]),
    flashrag_row(1, "capital of france?", ["Paris"], metadata={"hops": 1}),
]
HOTPOT = [
    flashrag_row(0, "which river flows through the city where X was born", ["Seine"]),
    flashrag_row(1, "  spaced question  ", ["a", "b", "c"], metadata={"hops": 2, "type": "x"}),
    flashrag_row(2, "own source row", ["y"], data_source="mine"),
]


def test_prepare_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nq = write_jsonl(tmp_path / "nq" / "test.jsonl", NQ, blank_after=0)  # FlashRAG's layout
    hotpot = write_jsonl(tmp_path / "hotpot_dev.jsonl", HOTPOT)
    out = tmp_path / "out" / "mixed.parquet"
    cli.main(["prepare", "--input", str(nq), str(hotpot), "--out", str(out), "--split", "test"])
    assert "wrote 5 questions (nq: 2, hotpot_dev: 2, mine: 1)" in capsys.readouterr().out
    assert [p.name for p in out.parent.iterdir()] == ["mixed.parquet"]  # no temporary left

    table = pq.read_table(out)
    assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    first = table.to_pylist()[0]
    assert first["prompt"] == [{"role": "user", "content": instruction_text("who wrote hamlet")}]
    assert first["ability"] == "fact-reasoning"
    assert first["reward_model"] == {
        "style": "rule",
        "ground_truth": {"target": ["Shakespeare", "William Shakespeare"]},
    }
    assert first["extra_info"] == {"split": "test", "index": 0, "hops": None}
    indexes = [(r["data_source"], r["extra_info"]["index"]) for r in table.to_pylist()]
    assert indexes == [("nq", 0), ("nq", 1), ("hotpot_dev", 0), ("hotpot_dev", 1), ("mine", 0)]

    back = load_questions(out)
    originals = [*NQ, *HOTPOT]
    assert [q.question for q in back] == [format_question(r["question"]) for r in originals]
    assert [q.golds for q in back] == [tuple(r["golden_answers"]) for r in originals]
    assert [q.source for q in back] == ["nq", "nq", "hotpot_dev", "hotpot_dev", "mine"]
    assert [q.hops for q in back] == [0, 1, 0, 2, 0]
    assert [q.uid for q in back] == ["nq-0", "nq-1", "hotpot_dev-0", "hotpot_dev-1", "mine-0"]
    assert all(q.prompt == instruction_text(q.question) for q in back)  # our prompt, exactly


def test_prepare_keeps_the_question_kind(tmp_path: Path) -> None:
    rows = [
        flashrag_row(0, "capital of peru", ["Lima"], metadata={"hops": 1, "kind": "capital"}),
        flashrag_row(1, "who wrote hamlet", ["Shakespeare"]),
    ]
    src = write_jsonl(tmp_path / "qa.jsonl", rows)
    out = tmp_path / "qa.parquet"
    cli.main(["prepare", "--input", str(src), "--out", str(out), "--split", "test"])
    extras = [r["extra_info"] for r in pq.read_table(out).to_pylist()]
    assert [e["kind"] for e in extras] == ["capital", None]
    assert [q.kind for q in load_questions(out)] == ["capital", ""]
    assert [q.kind for q in load_questions(src)] == ["capital", ""]  # as the FlashRAG file


def test_prepare_sources_flag_and_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", NQ)
    b = write_jsonl(tmp_path / "b.jsonl", NQ)  # the same ids: only distinct sources keep them apart
    out = tmp_path / "ab.parquet"
    cli.main(["prepare", "--input", str(a), str(b), "--source", "nq", "tqa", "--out", str(out)])
    assert "(nq: 2, tqa: 2)" in capsys.readouterr().out
    questions = load_questions(out)
    assert [q.source for q in questions] == ["nq", "nq", "tqa", "tqa"]
    assert {q.uid for q in questions} == {"nq-0", "nq-1", "tqa-0", "tqa-1"}
    assert pq.read_table(out).to_pylist()[0]["extra_info"]["split"] == "train"  # the default

    cases = [
        (["--input", str(a), str(b), "--source", "nq"], "1 --source values for 2 --input files"),
        (["--input", str(a), str(a)], f"{a}:1: row 0: field 'id': duplicate uid 'a-test_0'"),
        (["--input", str(tmp_path / "none.jsonl")], "No such file"),
    ]
    for args, message in cases:
        with pytest.raises(SystemExit) as err:
            cli.main(["prepare", *args, "--out", str(tmp_path / "x.parquet")])
        assert message in str(err.value), args
    assert not (tmp_path / "x.parquet").exists()


def test_search_r1_layout_with_answers_as_list_or_numpy_array(tmp_path: Path) -> None:
    rows = [
        searchr1_row("nq", 0, "who wrote hamlet?", ["Shakespeare", "W. Shakespeare"]),
        searchr1_row("nq", 1, "capital of france?", ["Paris"]),
    ]
    as_list = write_parquet(tmp_path / "list.parquet", rows)
    # pandas keeps list cells as numpy arrays; its parquet writer stores them as lists again
    frame = pd.DataFrame(rows)
    frame["reward_model"] = [
        {
            "style": "rule",
            "ground_truth": {
                "target": np.array(r["reward_model"]["ground_truth"]["target"], dtype=object)
            },
        }
        for r in rows
    ]
    as_array = tmp_path / "array.parquet"
    frame.to_parquet(as_array)
    for path in (as_list, as_array):
        questions = load_questions(path)
        assert [q.question for q in questions] == ["who wrote hamlet?", "capital of france?"]
        assert questions[0].golds == ("Shakespeare", "W. Shakespeare")
        assert [q.uid for q in questions] == ["nq-0", "nq-1"] and questions[1].index == 1
        assert questions[0].prompt == SEARCH_R1_TEMPLATE.format(question="who wrote hamlet?")
        assert questions[0].hops == 0  # unknown

    # rows as pandas gives them: lists are numpy arrays, indexes numpy integers
    records = pq.read_table(as_list).to_pandas().to_dict("records")
    assert isinstance(records[0]["reward_model"]["ground_truth"]["target"], np.ndarray)
    q = searchr1_question(records[0], as_list, 0)
    assert q.golds == ("Shakespeare", "W. Shakespeare") and q.index == 0 and q.uid == "nq-0"


def test_normalize_answers() -> None:
    assert normalize_answers("Paris") == ("Paris",)
    assert normalize_answers(["a", "b"]) == ("a", "b")
    assert normalize_answers(("a",)) == ("a",)
    assert normalize_answers(np.array(["a", "b"])) == ("a", "b")
    assert normalize_answers(np.array(["a"], dtype=object)) == ("a",)
    for bad in ([], np.array([]), [1, 2], None, {"target": ["a"]}):
        with pytest.raises(ValueError):
            normalize_answers(bad)


def test_question_from_prompt() -> None:
    assert question_from_prompt(SEARCH_R1_TEMPLATE.format(question="who?")) == "who?"
    assert question_from_prompt(instruction_text("who wrote hamlet")) == "who wrote hamlet?"
    assert question_from_prompt("  just a question?\n") == "just a question?"  # no marker
    few_shot = "Question: 1+1?\nAnswer: 2\nQuestion: who wrote hamlet?\n"
    assert question_from_prompt(few_shot) == "who wrote hamlet?"  # the last marker
    assert question_from_prompt("SubQuestion: x") == "SubQuestion: x"  # not a marker
    assert question_from_prompt("Question:\n  two\nlines \n") == "two\nlines"


def test_mixed_sources_with_colliding_indexes_stay_apart(tmp_path: Path) -> None:
    nq = write_parquet(
        tmp_path / "nq.parquet", [searchr1_row("nq", i, f"n{i}", ["a"]) for i in range(3)]
    )
    hp = write_parquet(
        tmp_path / "hp.parquet", [searchr1_row("hotpotqa", i, f"h{i}", ["b"]) for i in range(3)]
    )
    tqa = write_jsonl(tmp_path / "triviaqa" / "test.jsonl", NQ)
    nq_jsonl = write_jsonl(tmp_path / "nq" / "test.jsonl", NQ)  # same ids "test_0", "test_1"
    questions = load_questions([nq, hp, tqa, nq_jsonl])
    uids = [q.uid for q in questions]
    assert uids[:6] == ["nq-0", "nq-1", "nq-2", "hotpotqa-0", "hotpotqa-1", "hotpotqa-2"]
    assert uids[6:] == ["triviaqa-test_0", "triviaqa-test_1", "nq-test_0", "nq-test_1"]
    groups = dense_ids(uids)  # (B,) as the RL step builds them
    assert len(set(groups.tolist())) == len(questions) == 10
    # grouping by the authors' row index would have merged them
    assert len(set(dense_ids([q.index for q in questions]).tolist())) == 5

    # one source in two files with overlapping indexes: refused, not merged
    nq2 = write_parquet(tmp_path / "nq2.parquet", [searchr1_row("nq", 2, "other", ["c"])])
    with pytest.raises(DataError) as err:
        load_questions([nq, nq2])
    message = str(err.value)
    assert message.startswith(f"{nq2}: row 0: field 'extra_info.index': duplicate uid 'nq-2'")
    assert f"{nq} row 2" in message
    # ...unless each file gets its own source
    apart = load_questions([nq, nq2], sources=[None, "nq-extra"])
    assert apart[-1].uid == "nq-extra-2" and apart[0].source == "nq"
    with pytest.raises(ValueError, match="non-empty string"):
        load_questions([nq], sources=[""])
    with pytest.raises(ValueError, match="1 sources for 2 files"):
        load_questions([nq, nq2], sources=["a"])


def test_default_source() -> None:
    assert default_source("data/nq_test.jsonl") == "nq_test"
    assert default_source("FlashRAG_datasets/hotpotqa/dev.jsonl") == "hotpotqa"
    assert default_source("test.jsonl") == "test"


def test_eval_reads_parquet(tmp_path: Path) -> None:
    rows = [searchr1_row("nq", i, f"q{i}", [f"a{i}"]) for i in range(3)]
    data = write_parquet(tmp_path / "nq_test.parquet", rows)
    items, _ = eval_inputs(str(data), DataConfig(retriever_url="http://127.0.0.1:9/retrieve"), 2)
    assert [(it.question, it.golds, it.source) for it in items] == [
        ("q0", ["a0"], "nq"),
        ("q1", ["a1"], "nq"),
    ]
