"""The Search-R1 ``/retrieve`` wire format, both directions (docs/retrieval.md, "The protocol"),
free of HTTP and pydantic. Decoding is lenient where real servers differ harmlessly (an integer
id, extra fields) and strict where a mistake would corrupt training (the number of lists, a
missing ``contents``).
"""

from __future__ import annotations

from typing import Any

from treegrpo.retrieval.base import Passage


class ProtocolError(ValueError):
    """A ``/retrieve`` response that does not have the Search-R1 shape."""


def encode_hits(passages: list[Passage], return_scores: bool) -> list[dict[str, Any]]:
    """One query's passages as response hits."""
    if return_scores:
        return [
            {"document": {"id": p.id, "contents": p.contents}, "score": p.score} for p in passages
        ]
    return [{"id": p.id, "contents": p.contents} for p in passages]


def decode_hit(hit: Any, where: str) -> Passage:
    """A hit with a score (``{"document": …, "score": s}``) or a bare document object."""
    scored = isinstance(hit, dict) and "document" in hit
    doc = hit["document"] if scored else hit
    if not isinstance(doc, dict):
        raise ProtocolError(f"{where}: expected a document object, got {type(doc).__name__}")
    contents = doc.get("contents")
    if not isinstance(contents, str):
        raise ProtocolError(f"{where}: document has no string 'contents' (keys: {sorted(doc)})")
    doc_id = doc.get("id", "")
    if not isinstance(doc_id, str | int):
        raise ProtocolError(f"{where}: document 'id' must be a string, got {doc_id!r:.40}")
    score = hit.get("score") if scored else None
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
        raise ProtocolError(f"{where}: 'score' must be a number, got {score!r:.40}")
    return Passage(str(doc_id), contents, None if score is None else float(score))


def decode_response(payload: Any, n_queries: int) -> list[list[Passage]]:
    """Validate a ``/retrieve`` JSON body and turn it into one passage list per query."""
    if not isinstance(payload, dict) or "result" not in payload:
        keys = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise ProtocolError(f"expected an object with a 'result' key, got {keys}")
    result = payload["result"]
    if not isinstance(result, list):
        raise ProtocolError(f"'result' must be a list, got {type(result).__name__}")
    if len(result) != n_queries:
        raise ProtocolError(f"'result' has {len(result)} lists for {n_queries} queries")
    out = []
    for i, hits in enumerate(result):
        if not isinstance(hits, list):
            raise ProtocolError(f"result[{i}] must be a list of hits, got {type(hits).__name__}")
        out.append([decode_hit(h, f"result[{i}][{j}]") for j, h in enumerate(hits)])
    return out
