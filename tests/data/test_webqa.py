"""Readers of public web-QA files (``data.webqa``) on small files in each shape as it ships,
``load_questions`` picking them by a file's first row, and bad rows named by file, row, line
and field."""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from treegrpo.data.errors import DataError
from treegrpo.data.load import load_questions
from treegrpo.data.webqa import (
    decrypt,
    read_browsecomp,
    read_gaia,
    read_simpleqa,
    read_webqa,
    read_webwalkerqa,
    webqa_reader,
)

WEBWALKER = [
    {
        "Question": "When is the paper deadline of the Industry Track?",
        "Answer": "March 21, 2025.",
        "Root_Url": "https://2025.example.org/",
        "Info": {
            "Hop": "single_source",
            "Domain": "Conference",
            "Language": "English",
            "Difficulty_Level": "Easy",
            "Source_Website": ["https://2025.example.org/calls/"],
            "Golden_Path": ["root->calls"],
        },
    },
    {
        "Question": "Where is the venue, and who chairs the program?",
        "Answer": "Brune-Kreisky-Platz 1; Ada Byron.",
        "Root_Url": "https://2025.example.org/",
        "Info": {"Hop": "multi_source", "Difficulty_Level": "Hard"},
    },
]
GAIA = [
    {
        "task_id": "c61d22de-5f6c",
        "Question": "How many studio albums did the band release before 2000?",
        "Level": 1,
        "Final answer": "3",
        "file_name": "",
        "Annotator Metadata": {"Steps": "1. search", "Number of steps": "1"},
    },
    {
        "task_id": "7bd855d8-463d",
        "Question": "What is the total in the attached spreadsheet?",
        "Level": 2,
        "Final answer": "89706.00",
        "file_name": "7bd855d8-463d.xlsx",
        "Annotator Metadata": {},
    },
    {
        "task_id": "e1fc63a2-da7a",
        "Question": "Which city hosted the first games?",
        "Level": "3",
        "Final answer": "?",
        "file_name": "",
    },
]
CANARY = "BENCHMARK DATA SHOULD NEVER APPEAR AS PLAIN TEXT ONLINE. canary GUID test:0000"


def encrypt(text: str, password: str) -> str:
    """simple-evals' BrowseComp cipher, the other way: XOR with the stretched SHA-256."""
    data = text.encode()
    digest = hashlib.sha256(password.encode()).digest()
    key = digest * (len(data) // len(digest) + 1)
    return base64.b64encode(bytes(a ^ b for a, b in zip(data, key, strict=False))).decode()


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_webwalkerqa(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "WebWalkerQA_dataset.jsonl", WEBWALKER)
    read = read_webwalkerqa(path)
    first, second = read.questions
    assert first.uid == "webwalkerqa-0" and first.source == "webwalkerqa"
    assert first.question == f"{WEBWALKER[0]['Question']}\nRoot URL: https://2025.example.org/"
    assert first.golds == ("March 21, 2025.",)
    assert (first.hops, first.kind, second.hops, second.kind) == (
        1,
        "single_source",
        2,
        "multi_source",
    )
    plain = read_webwalkerqa(path, with_root_url=False).questions[0]
    assert plain.question == WEBWALKER[0]["Question"]
    as_list = tmp_path / "webwalker.json"
    as_list.write_text(json.dumps(WEBWALKER))
    assert read_webqa(as_list).questions == read.questions  # a JSON list reads the same


def test_simpleqa_csv_as_it_ships(tmp_path: Path) -> None:
    meta = "{'topic': 'Science and technology', 'answer_type': 'Person', 'urls': ['https://x']}"
    path = write_csv(
        tmp_path / "simple_qa_test_set.csv",
        ["metadata", "problem", "answer"],
        [
            [meta, "Who received the IEEE Frank Rosenblatt Award in 2010?", "Michio Sugeno"],
            ["{'answer_type': 'Date'}", 'In which year was "X, Y" founded?', "1877"],
        ],
    )
    assert webqa_reader(path) == "simpleqa"
    a, b = read_simpleqa(path).questions
    assert (a.uid, a.golds, a.kind) == ("simpleqa-0", ("Michio Sugeno",), "Person")
    assert (b.question, b.kind) == ('In which year was "X, Y" founded?', "Date")
    rows = [{"problem": "Q?", "answer": "A", "metadata": {"answer_type": "Place"}}]
    jsonl = write_jsonl(tmp_path / "simpleqa.jsonl", rows)
    assert read_webqa(jsonl).questions[0].kind == "Place"


def test_gaia_skips_attachments_and_private_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_jsonl(tmp_path / "metadata.jsonl", GAIA)
    with caplog.at_level(logging.WARNING):
        read = read_gaia(path)
    (q,) = read.questions
    assert (q.uid, q.golds, q.kind, q.index) == (
        "gaia-c61d22de-5f6c",
        ("3",),
        "level-1",
        "c61d22de-5f6c",
    )
    assert read.skipped == {"needs an attached file": 1, "answer not public": 1}
    assert "skipped 1 needs an attached file, 1 answer not public" in caplog.text
    only_files = write_jsonl(tmp_path / "files.jsonl", GAIA[1:2])
    with pytest.raises(DataError, match=r"no questions \(skipped"):
        read_gaia(only_files)


def test_browsecomp_encrypted_and_decrypted(tmp_path: Path) -> None:
    problem, answer = "Which 1990s film features a talking dog and a lighthouse?", "Lighthouse Dog"
    assert decrypt(encrypt(problem, CANARY), CANARY) == problem
    encrypted = write_csv(
        tmp_path / "browse_comp_test_set.csv",
        ["problem", "answer", "problem_topic", "canary"],
        [[encrypt(problem, CANARY), encrypt(answer, CANARY), "TV shows & movies", CANARY]],
    )
    decrypted = write_jsonl(
        tmp_path / "browsecomp.jsonl",
        [{"problem": problem, "answer": answer, "problem_topic": "TV shows & movies"}],
    )
    for path in (encrypted, decrypted):
        assert webqa_reader(path) == "browsecomp"
        (q,) = read_browsecomp(path).questions
        assert (q.uid, q.question, q.golds, q.kind) == (
            "browsecomp-0",
            problem,
            (answer,),
            "TV shows & movies",
        )
    wrong = write_csv(
        tmp_path / "wrong.csv",
        ["problem", "answer", "canary"],
        [[encrypt(problem, CANARY), base64.b64encode(b"\xff\xfe").decode(), CANARY]],
    )
    with pytest.raises(DataError, match=r"wrong\.csv:2: row 0: field 'answer': does not decrypt"):
        read_browsecomp(wrong)


def test_load_questions_picks_the_reader(tmp_path: Path) -> None:
    walker = write_jsonl(tmp_path / "walker.jsonl", WEBWALKER)
    gaia = write_jsonl(tmp_path / "metadata.jsonl", GAIA)
    flash = write_jsonl(
        tmp_path / "nq.jsonl", [{"id": "1", "question": "q?", "golden_answers": ["a"]}]
    )
    questions = load_questions([walker, gaia, flash])
    assert [q.source for q in questions] == ["webwalkerqa", "webwalkerqa", "gaia", "nq"]
    renamed = load_questions([walker], sources=["walker-main"])
    assert renamed[0].uid == "walker-main-0"
    with pytest.raises(DataError, match="duplicate uid 'webwalkerqa-0'"):
        load_questions([walker, walker])


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ([WEBWALKER[0], {**WEBWALKER[0], "Answer": ""}], r":2: row 1: field 'Answer': empty"),
        ([WEBWALKER[0], {"Question": "q", "Root_Url": "u"}], r":2: row 1: field 'Answer': missing"),
        ([WEBWALKER[0], [1, 2]], r":2: row 1: expected a JSON object, got list"),
        ([WEBWALKER[0], {**WEBWALKER[0], "Info": [1]}], r"row 1: field 'Info': expected an object"),
        ([WEBWALKER[0], {**WEBWALKER[0], "Question": ["q"]}], r"field 'Question': expected a st"),
    ],
)
def test_bad_webwalker_rows(tmp_path: Path, rows: list[Any], match: str) -> None:
    with pytest.raises(DataError, match=match):
        read_webwalkerqa(write_jsonl(tmp_path / "bad.jsonl", rows))
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(WEBWALKER[0]) + "\n\n{not json\n")
    with pytest.raises(DataError, match=r"broken\.jsonl:3: row 1: unreadable JSON"):
        read_webwalkerqa(broken)


def test_bad_rows_in_other_shapes(tmp_path: Path) -> None:
    gaia = write_jsonl(tmp_path / "g.jsonl", [GAIA[0], {**GAIA[0], "Question": None}])
    with pytest.raises(DataError, match=r"g\.jsonl:2: row 1: field 'Question': expected a string"):
        read_gaia(gaia)
    simple = write_csv(tmp_path / "s.csv", ["metadata", "problem", "answer"], [["{", "q", "a"]])
    with pytest.raises(DataError, match=r"s\.csv:2: row 0: field 'metadata': expected an object"):
        read_simpleqa(simple)
    ragged = tmp_path / "r.csv"
    ragged.write_text("problem,answer\nq,a\nq,a,extra\n")
    with pytest.raises(DataError, match=r"r\.csv:3: row 1: more cells than the header"):
        read_simpleqa(ragged)
    not_list = tmp_path / "n.json"
    not_list.write_text('{"problem": "q"}')
    with pytest.raises(DataError, match="expected a JSON list of objects, got dict"):
        read_simpleqa(not_list)
    other = write_jsonl(tmp_path / "o.json", [])
    other.write_text('[{"x": 1}]')
    with pytest.raises(DataError, match="not a web-QA file"):
        read_webqa(other)
