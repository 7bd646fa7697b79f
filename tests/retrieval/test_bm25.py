"""BM25 retrieval: right passage first, scores as bm25s computes them, and the index cache."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.bm25 import BM25Retriever, top_documents
from treegrpo.retrieval.corpus import write_corpus


@pytest.fixture(scope="module")
def bm25(passages: list[Passage]) -> BM25Retriever:
    return BM25Retriever(passages, use_cache=False)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Who designed the wrought-iron tower in Paris?", "0"),
        ("highest mountain in the Himalayas", "2"),
        ("which physicist researched radioactivity", "6"),
        ("first humans walking on the lunar surface", "8"),
        ("antibiotic discovered by Fleming", "19"),
    ],
)
def test_good_query_ranks_its_passage_first(bm25: BM25Retriever, query: str, expected: str) -> None:
    [hits] = bm25.search([query], topk=3)
    assert hits[0].id == expected
    scores = [h.score for h in hits]
    assert all(s is not None and s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)


def test_batch_answers_each_query_in_order(bm25: BM25Retriever) -> None:
    queries = ["Beethoven symphonies", "capital of Japan", "honey and beeswax"]
    assert [hits[0].id for hits in bm25.search(queries, topk=2)] == ["7", "10", "15"]
    assert bm25.search([], topk=3) == []


def test_scores_equal_bm25s_reference(bm25: BM25Retriever) -> None:
    for query in ["river flowing through Brazil", "board game with a king and a queen"]:
        [hits] = bm25.search([query], topk=20)
        reference = bm25._model.get_scores(bm25.tokenizer(query))  # bm25s's own scorer
        expected = np.sort(reference[reference > 0])[::-1]
        np.testing.assert_allclose([h.score for h in hits], expected, rtol=1e-5)
        for h in hits:
            assert h.score == pytest.approx(reference[int(h.id)], rel=1e-5)


def test_no_matching_term_gives_no_hits(bm25: BM25Retriever) -> None:
    assert bm25.search(["the and of is", "zzzqqq", "", "日本の首都"], topk=3) == [[], [], [], []]


def test_stemming_matches_inflections(bm25: BM25Retriever) -> None:
    pytest.importorskip("Stemmer")
    [hits] = bm25.search(["plant"], topk=1)  # the corpus says "plants"
    assert hits and hits[0].id == "1"


def test_topk_bounds(bm25: BM25Retriever) -> None:
    [hits] = bm25.search(["the tower of Paris"], topk=1000)
    assert 1 <= len(hits) <= len(bm25)
    with pytest.raises(ValueError, match="topk"):
        bm25.search(["x"], topk=0)


def test_empty_corpus_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty corpus"):
        BM25Retriever([], use_cache=False)


def test_cache_is_reused_and_a_changed_corpus_rebuilds(
    tmp_path: Path, passages: list[Passage], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, cache = tmp_path / "c.jsonl", tmp_path / "cache"
    write_corpus(path, passages)
    first = BM25Retriever(path, cache_dir=cache)
    assert not first.loaded_from_cache and first.cache_path is not None
    assert (first.cache_path / "meta.json").is_file()

    def no_build(self: BM25Retriever) -> None:
        raise AssertionError("index rebuilt although it was cached")

    with monkeypatch.context() as m:
        m.setattr(BM25Retriever, "_build", no_build)
        second = BM25Retriever(path, cache_dir=cache)
    assert second.loaded_from_cache and second.cache_path == first.cache_path
    query = ["tower in Paris designed by Eiffel", "genetic instructions double helix"]
    assert second.search(query, 5) == first.search(query, 5)

    write_corpus(path, [*passages, Passage("20", '"Eiffel"\nEiffel Eiffel tower tower Paris')])
    third = BM25Retriever(path, cache_dir=cache)
    assert not third.loaded_from_cache and third.cache_path != first.cache_path
    assert third.search(["Eiffel tower"], 1)[0][0].id == "20"

    other_settings = BM25Retriever(path, cache_dir=cache, k1=1.5, b=0.75)
    assert not other_settings.loaded_from_cache
    assert len(list(cache.glob("bm25/*"))) == 3


def test_interrupted_build_is_rebuilt(tmp_path: Path, passages: list[Passage]) -> None:
    first = BM25Retriever(passages, cache_dir=tmp_path)
    assert first.cache_path is not None
    (first.cache_path / "meta.json").unlink()  # as if the process died mid-build
    again = BM25Retriever(passages, cache_dir=tmp_path)
    assert not again.loaded_from_cache
    assert again.cache_path is not None and (again.cache_path / "meta.json").is_file()


def _brute_force(dense: np.ndarray, terms: list[int], k: int) -> tuple[list[int], list[float]]:
    scores = dense[:, terms].sum(axis=1) if terms else np.zeros(dense.shape[0])
    order = sorted((i for i in range(len(scores)) if scores[i] > 0), key=lambda i: (-scores[i], i))
    return order[:k], [float(scores[i]) for i in order[:k]]


@pytest.mark.parametrize("density", [0.002, 0.3])  # sparse merge path, dense bincount path
def test_top_documents_equals_brute_force_with_ties(density: float) -> None:
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    n_docs, n_terms = 2000, 40
    mask = rng.random((n_docs, n_terms)) < density
    dense = np.where(mask, rng.integers(1, 4, size=(n_docs, n_terms)).astype(np.float32), 0)
    m = sp.csc_matrix(dense)  # small integer weights: many exact ties
    for _ in range(50):
        terms = rng.integers(0, n_terms, size=int(rng.integers(0, 5))).tolist()
        k = int(rng.integers(1, 8))
        docs, vals = top_documents(m.indptr, m.indices, m.data, n_docs, terms, k)
        want_docs, want_vals = _brute_force(dense, terms, k)
        assert docs.tolist() == want_docs
        np.testing.assert_allclose(vals, want_vals)


def test_a_pickled_retriever_answers_the_same(bm25: BM25Retriever) -> None:
    """A retriever goes to other processes (a Ray retriever actor) by pickle; the stemmer, a C
    object, is made again there."""
    copy = pickle.loads(pickle.dumps(bm25))
    queries = ["Who designed the wrought-iron tower in Paris?", "researching radioactive decay"]
    assert copy.search(queries, 3) == bm25.search(queries, 3)
    assert copy.tokenizer.settings == bm25.tokenizer.settings
    assert copy.tokenizer("Researching") == bm25.tokenizer("Researching")
