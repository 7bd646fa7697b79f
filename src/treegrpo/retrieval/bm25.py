"""BM25 retrieval over a Search-R1 corpus with an on-disk index cache: ``bm25s`` builds the
index, a sparse (documents × terms) matrix of precomputed BM25 weights; our ``top_documents``
scores rather than ``bm25s.BM25.retrieve``: it merges posting lists with ``bincount`` (bm25s uses
``np.add.at``, several times slower), selects the top-k among matched documents only, and orders
ties deterministically: about 0.3 ms per query over 100k passages on one core, 5× faster. Its
settings (Pyserini's): docs/retrieval.md, "BM25".
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import bm25s
import numpy as np

from treegrpo.files import cache_entry, cached_dir
from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.corpus import corpus_passages
from treegrpo.retrieval.tokenizer import StemmerChoice, Tokenizer

log = logging.getLogger(__name__)

Method = Literal["lucene", "robertson", "atire"]


class BM25Retriever:
    """Lexical retriever (docs/retrieval.md, "BM25"): ``search(queries, topk)`` → ranked ``Passage``
    lists with BM25 scores. corpus: a jsonl corpus path or the passages; k1, b: term-frequency
    saturation, length normalization; method: bm25s's variant ("lucene": Lucene's and Pyserini's);
    stemmer: "auto" (PyStemmer's English Snowball where installed), "none" or "english" (required);
    stopwords: drop NLTK's English ones; cache_dir: the index cache's root (default
    ``default_cache_root()``; the index in ``<cache_dir>/bm25/<key>``, key = hash of the corpus and
    every setting); use_cache: False builds in memory and writes nothing."""

    def __init__(
        self,
        corpus: str | Path | Sequence[Passage],
        *,
        k1: float = 0.9,
        b: float = 0.4,
        method: Method = "lucene",
        stemmer: StemmerChoice = "auto",
        stopwords: bool = True,
        cache_dir: str | Path | None = None,
        use_cache: bool = True,
    ) -> None:
        self.tokenizer = Tokenizer(stemmer=stemmer, stopwords=stopwords)
        passages, digest = corpus_passages(corpus, "BM25")
        self.ids = [p.id for p in passages]
        self.contents = [p.contents for p in passages]
        self._params = {"k1": k1, "b": b, "method": method}
        meta = {
            "corpus_sha256": digest,
            "bm25s": bm25s.__version__,
            **self._params,
            **self.tokenizer.settings,
        }
        self.cache_path: Path | None = None
        self.loaded_from_cache = False
        if use_cache:
            self.cache_path = cache_entry(cache_dir, "bm25", **meta)
            self.loaded_from_cache = cached_dir(self.cache_path, self._build_and_save, meta)
            self._model = bm25s.BM25.load(str(self.cache_path), mmap=False, show_progress=False)
            if self._model.scores["num_docs"] != len(passages):
                raise RuntimeError(f"BM25 cache {self.cache_path} does not match the corpus")
        else:
            self._model = self._build()
        if self._model.method not in ("lucene", "robertson", "atire"):
            raise ValueError(f"unsupported BM25 method {self._model.method!r}")
        self._vocab: dict[str, int] = self._model.vocab_dict
        log.info("BM25 over %d passages (cache: %s)", len(self), self.cache_path)

    def __len__(self) -> int:
        return len(self.ids)

    def _build(self) -> Any:
        vocab: dict[str, int] = {}
        doc_ids = self.tokenizer.to_ids(self.contents, vocab, grow=True)
        model = bm25s.BM25(**self._params)
        model.index((doc_ids, vocab), create_empty_token=False, show_progress=False)
        return model

    def _build_and_save(self, directory: Path) -> None:
        self._build().save(str(directory), show_progress=False)

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        """Per query, up to ``topk`` positive-score passages, best first (ties in corpus order)."""
        if topk < 1:
            raise ValueError(f"topk must be >= 1, got {topk}")
        s = self._model.scores
        matrix = (s["indptr"], s["indices"], s["data"], s["num_docs"])
        out: list[list[Passage]] = []
        for terms in self.tokenizer.to_ids(queries, self._vocab):
            docs, vals = top_documents(*matrix, terms, topk)
            hits = zip(docs.tolist(), vals.tolist(), strict=True)
            out.append([Passage(self.ids[d], self.contents[d], v) for d, v in hits])
        return out


def top_documents(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    n_docs: int,
    terms: list[int],
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` (documents, scores) of one query from a CSC (documents × terms) weight matrix: a
    document scores the sum of its weights over the query's terms (a repeated term counts again, as
    in bm25s), merged sparsely or densely (docs/retrieval.md, "BM25"). Positive scores only; ties by
    document index."""
    if not terms:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    docs: np.ndarray  # (n,) document indices
    vals: np.ndarray  # (n,) their scores
    spans = [(indptr[i], indptr[i + 1]) for i in terms]
    if len(spans) == 1:  # a posting list holds each document once
        (lo, hi) = spans[0]
        docs, vals = indices[lo:hi].astype(np.int64), data[lo:hi].astype(np.float64)
    else:
        docs = np.concatenate([indices[lo:hi] for lo, hi in spans]).astype(np.int64)
        weights = np.concatenate([data[lo:hi] for lo, hi in spans]).astype(np.float64)
        if len(docs) * 16 < n_docs:
            docs, inverse = np.unique(docs, return_inverse=True)
            vals = np.bincount(inverse, weights=weights)
        else:
            dense = np.bincount(docs, weights=weights, minlength=n_docs)
            if n_docs > k:
                kth = dense[np.argpartition(-dense, k - 1)[k - 1]]
                docs = np.flatnonzero(dense >= kth)
            else:
                docs = np.arange(n_docs)
            vals = dense[docs]
    keep = vals > 0
    docs, vals = docs[keep], vals[keep]
    if len(vals) > k:  # keep the k best and everything tied with the k-th, then order
        kth = -np.partition(-vals, k - 1)[k - 1]
        docs, vals = docs[vals >= kth], vals[vals >= kth]
    order = np.lexsort((docs, -vals))[:k]
    return docs[order], vals[order]
