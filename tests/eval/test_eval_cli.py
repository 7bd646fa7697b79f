"""`treegrpo eval` on the tiny agent: a FlashRAG jsonl dataset, a BM25 corpus, per-source and
per-hop numbers in eval.json; broken inputs stop with the file, line and field (every reader
error is tested in tests/data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_fixtures import CORPUS, FACTS, PEOPLE
from tests.live import LiveServer
from tests.web_fixtures import ARTICLES
from treegrpo import cli
from treegrpo.eval.run import synthetic_set
from treegrpo.jobs import data as data_job
from treegrpo.jobs.data import eval_inputs
from treegrpo.jobs.presets import DataConfig
from treegrpo.retrieval.corpus import write_corpus
from treegrpo.retrieval.http_client import RemoteRetriever
from treegrpo.website.site import Site, create_site_app


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TREEGRPO_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "corpus.jsonl"
    write_corpus(path, CORPUS)
    return path


def _rows(people: list[str]) -> list[dict[str, object]]:
    return [
        {
            "id": f"q{i}",
            "question": f"Where was {p} born",
            "golden_answers": [FACTS[p]],
            "data_source": "toy-a" if i % 2 else "toy-b",
            "metadata": {"hops": 1 + i % 2},
        }
        for i, p in enumerate(people)
    ]


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow
def test_eval_reports_per_source_and_per_hop(model_dir: Path, corpus: Path, tmp_path: Path) -> None:
    data = _write(tmp_path / "toy.jsonl", _rows(PEOPLE[:4]))
    out = tmp_path / "eval"
    args = ["eval", "--model", str(model_dir), "--data", str(data), "--corpus", str(corpus)]
    args += ["--out", str(out), "--max-turns", "2", "--max-new-tokens", "40"]
    args += ["--max-obs-tokens", "120", "--max-context", "1024", "--batch-size", "3"]
    cli.main(args)
    report = json.loads((out / "eval.json").read_text())
    assert set(report["by_source"]) == {"toy-a", "toy-b"}
    assert set(report["by_hops"]) == {"1", "2"}
    assert report["overall"]["n"] == 4 and len(report["rows"]) == 4
    for key in ("em", "f1", "valid_format", "tool_calls"):
        assert key in report["overall"]
    assert report["overall"]["valid_format"] > 0  # the tiny agent follows the protocol
    assert report["config"]["questions"] == 4 and report["config"]["max_turns"] == 2
    table = (out / "eval.md").read_text()
    assert "| source toy-a |" in table and "| 2-hop |" in table and "| overall | 4 |" in table


def test_limit_and_a_checkpoint_directory(model_dir: Path, corpus: Path, tmp_path: Path) -> None:
    step = tmp_path / "step-000001"
    step.mkdir()
    (step / "model").symlink_to(model_dir)  # a run checkpoint: step-N/model
    rows = [{k: v for k, v in r.items() if k != "data_source"} for r in _rows(PEOPLE[:4])]
    data = _write(tmp_path / "toy.jsonl", rows)
    out = tmp_path / "eval"
    args = ["eval", "--model", str(step), "--data", str(data), "--corpus", str(corpus)]
    args += ["--out", str(out), "--limit", "2", "--max-new-tokens", "30", "--max-turns", "1"]
    cli.main(args)
    report = json.loads((out / "eval.json").read_text())
    assert report["overall"]["n"] == 2 and set(report["by_source"]) == {"toy"}  # the file name


def test_the_cli_stops_with_the_message(model_dir: Path, corpus: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_rows(PEOPLE[:1])[0]) + "\n\n{oops\n")
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"not parquet")
    base = ["eval", "--model", str(model_dir), "--out", str(tmp_path / "o")]
    cases = [
        (["--data", str(bad), "--corpus", str(corpus)], f"{bad}:3: row 1: unreadable JSON"),
        (["--data", str(garbage), "--corpus", str(corpus)], f"{garbage}: unreadable parquet"),
        (["--data", str(tmp_path / "d.parquet"), "--corpus", str(corpus)], "parquet: no such"),
        (["--data", str(bad)], "--corpus / --retriever_url: give exactly one"),
        (["--data", "wiki-qa:tset", "--corpus", str(corpus)], "--data: wiki-qa:tset: unknown"),
        (
            ["--data", str(bad), "--tools", "search", "visit", "--corpus", str(corpus)],
            "--search_url",
        ),
        (["--data", str(bad), "--tools", "browse"], "tools must each be one of"),
        (["--data", str(bad), "--corpus", str(corpus), "--max-turns", "-1"], "max_turns must be"),
        (["--data", str(bad), "--corpus", str(corpus), "--limit", "0"], "--limit and --batch"),
        (["--data", "synthetic-eval", "--corpus", str(corpus)], "searches its own world"),
        (["--data", str(tmp_path / "n.jsonl"), "--corpus", str(corpus)], "n.jsonl: no such"),
    ]
    for extra, message in cases:
        with pytest.raises(SystemExit) as err:
            cli.main(base + extra)
        assert message in str(err.value), extra
    with pytest.raises(SystemExit, match="not a Hugging Face model directory"):
        cli.main(["eval", "--model", str(tmp_path), "--data", str(bad), "--corpus", str(corpus)])
    assert not (tmp_path / "o").exists()  # nothing is loaded or written on a bad input


def test_eval_sets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TREEGRPO_CACHE_DIR", str(tmp_path / "cache"))
    items, tool = synthetic_set(limit=5)  # the embedded job's held-out world
    assert len(items) == 5 and all(it.hops is not None and it.source for it in items)
    hits = tool.search([items[0].question], topk=3)[0]
    assert any(items[0].golds[0] in h.contents for h in hits)  # BM25 over the world's corpus
    data = _write(tmp_path / "toy.jsonl", _rows(PEOPLE[:2]))
    items, tool = eval_inputs(str(data), DataConfig(retriever_url="http://127.0.0.1:9/retrieve"))
    assert isinstance(tool, RemoteRetriever) and tool.url.endswith("/retrieve")
    assert [it.hops for it in items] == [1, 2]  # nothing is contacted until a search


@pytest.mark.slow
def test_eval_with_web_tools_on_a_live_site(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []  # a built-in model name is built (here: stands for the tiny agent)
    monkeypatch.setattr(data_job, "resolve_model", lambda name: built.append(name) or model_dir)
    rows = [
        {"id": "a", "question": "When was Ada Lovelace born", "golden_answers": ["1815"]},
        {"id": "b", "question": "Who designed the Analytical Engine", "golden_answers": ["Ada"]},
    ]
    data = _write(tmp_path / "web.jsonl", rows)
    out = tmp_path / "eval"
    with LiveServer(create_site_app(Site(ARTICLES, cache_dir=tmp_path))) as live:
        args = ["eval", "--model", "smollm2-web", "--data", str(data), "--out", str(out)]
        args += ["--tools", "search", "visit", "--search-url", live.url, "--visit-chars", "600"]
        args += ["--max-turns", "2", "--max-new-tokens", "24", "--max-context", "1024"]
        cli.main(args)
    assert built == ["smollm2-web"]
    report = json.loads((out / "eval.json").read_text())
    assert report["overall"]["n"] == 2 and report["config"]["model"] == str(model_dir)
    cfg = report["config"]
    assert cfg["tools"] == ["search", "visit"] and cfg["search_url"] == live.url
    assert cfg["visit_chars"] == 600 and cfg["corpus"] is None
    for row in report["rows"]:  # every row counts the calls of each offered tool
        assert {"calls/search", "calls/visit"} <= set(row)
