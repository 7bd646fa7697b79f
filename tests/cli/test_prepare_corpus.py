"""`treegrpo prepare-corpus wiki --questions-dir`: the corpus and every built-in question set
(``jobs.data.BUILTIN_QUESTIONS``) as FlashRAG jsonl that reads back as the set itself (uids,
hop counts, kinds), on the six hand-written articles of the lead-question tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.data.test_lead_questions import ARTICLES
from treegrpo import cli
from treegrpo.data import web_questions, wiki
from treegrpo.data.lead_questions import splits
from treegrpo.data.load import load_questions
from treegrpo.eval.evaluate import EvalItem
from treegrpo.jobs.data import BUILTIN_QUESTIONS, WEB_KIND_SETS


@pytest.fixture
def small_corpus(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The offline corpus is ``ARTICLES``; every train article is a validation one too, so no
    set is empty."""
    monkeypatch.setattr(wiki, "load_articles", lambda: ARTICLES)
    monkeypatch.setattr(splits, "load_articles", lambda: ARTICLES)
    monkeypatch.setattr(splits, "VAL_SHARE", 1)
    # the web questions too: they are built from the reading questions' split
    caches = (
        wiki._all_questions,
        splits._cached_split,
        splits.all_built,
        splits._plans,
        splits.all_wh,
        web_questions.all_web_questions,
    )
    for cache in caches:
        cache.cache_clear()
    yield
    for cache in caches:
        cache.cache_clear()


def test_every_built_in_question_set_is_written(
    small_corpus: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache, out = tmp_path / "cache", tmp_path / "questions"
    cli.main(["prepare-corpus", "wiki", f"--cache-dir={cache}", f"--questions-dir={out}"])
    assert capsys.readouterr().out.strip() == str(cache / "corpora" / wiki.CORPUS_NAME)
    sets = [name for name in BUILTIN_QUESTIONS if name not in WEB_KIND_SETS]  # parts of wiki-web
    files = {name: out / f"{name.replace(':', '-')}.jsonl" for name in sets}
    assert sorted(p.name for p in out.iterdir()) == sorted(f.name for f in files.values())
    assert files["wiki:test"].name == "wiki-test.jsonl"
    for name in sets:
        built = BUILTIN_QUESTIONS[name]()
        back = load_questions(files[name])
        assert built and [q.uid for q in back] == [q.uid for q in built], name
        assert [EvalItem.of(q) for q in back] == [EvalItem.of(q) for q in built], name
    kinds = {q.kind for q in load_questions(files["wiki-qa2:test"])}
    assert kinds and all("+" in k for k in kinds)  # two-hop kinds: "<first>+<second>"
