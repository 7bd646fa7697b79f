"""A ``SearchTool`` that calls any Search-R1 compatible ``/retrieve`` server over HTTP
(Search-R1's own, verl's, SkyRL's, ``treegrpo serve``): transient failures are retried, a refused
batch is split (docs/retrieval.md, "In Python").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import httpx

from treegrpo.retrieval.base import Closes, Passage, SearchFailed
from treegrpo.retrieval.protocol import ProtocolError, decode_response

log = logging.getLogger(__name__)


SPLIT_STATUSES = frozenset({400, 413, 422})
"""Refusals that may concern only some queries of a batch (one over the server's query length,
too many queries, a response over its size limit); other 4xx (404: a wrong URL) concern every
query, and splitting would only multiply the requests."""


class RetrieverError(SearchFailed):
    """The retriever server could not be reached or answered with an error."""


def _excerpt(text: str, n: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n] + "…"


def send_retrying(
    send: Callable[[], httpx.Response],
    what: str,
    retries: int,
    backoff: float,
    error: Callable[[str], Exception],
) -> httpx.Response:
    """``send()``, again after a transport error, a 5xx or a 429, at most ``retries`` more times
    after ``backoff`` seconds, doubling; the first response of another status, or ``error`` naming
    ``what`` and the last problem once the attempts run out."""
    problem = ""
    for attempt in range(retries + 1):
        if attempt:
            delay = backoff * 2 ** (attempt - 1)
            log.warning("%s: %s; retry %d in %.1f s", what, problem, attempt, delay)
            time.sleep(delay)
        try:
            response = send()
        except httpx.TransportError as exc:
            problem = f"{type(exc).__name__}: {exc}"
            continue
        if response.status_code < 500 and response.status_code != 429:
            return response
        problem = f"HTTP {response.status_code}: {_excerpt(response.text)}"
    raise error(f"{what} failed after {retries + 1} attempts; last: {problem}")


class RemoteRetriever(Closes):
    """Search through a remote ``POST /retrieve`` endpoint (docs/retrieval.md, "In Python"). url:
    the endpoint (a bare ``http://host:port`` gets ``/retrieve``); timeout: seconds per attempt;
    retries: extra attempts after connection errors, timeouts, 5xx and 429; backoff: the first wait
    in seconds, doubled after each failed attempt."""

    def __init__(
        self, url: str, timeout: float = 30.0, retries: int = 3, backoff: float = 0.5
    ) -> None:
        if retries < 0 or backoff < 0 or timeout <= 0:
            raise ValueError("need retries >= 0, backoff >= 0, timeout > 0")
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https"):
            raise ValueError(f"retriever URL must be http(s)://…, got {url!r}")
        if parsed.path in ("", "/"):
            parsed = parsed.copy_with(path="/retrieve")
        self.url = str(parsed)
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self._client = httpx.Client(timeout=timeout)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        """One request for the whole batch; a passage list per query, best first. If the server
        refuses some queries alone, ``RetrieverError`` with the others' passages in ``results``."""
        if topk < 1:
            raise ValueError(f"topk must be >= 1, got {topk}")
        if not queries:
            return []
        answers = self._ask(queries, topk)
        results = [None if isinstance(a, str) else a for a in answers]
        failed = [i for i, a in enumerate(answers) if isinstance(a, str)]
        if not failed:
            return [a for a in results if a is not None]
        if len(answers) == 1:
            raise RetrieverError(str(answers[0]))
        message = f"{len(failed)} of {len(answers)} searches failed; "
        message += f"search {failed[0]}: {answers[failed[0]]}"
        raise RetrieverError(message, None if len(failed) == len(answers) else results)

    def _ask(self, queries: list[str], topk: int, depth: int = 0) -> list[list[Passage] | str]:
        """Each query's passages, or the refusal of that query alone; ``RetrieverError`` for what
        fails the batch (transport, 5xx after the retries, another 4xx, a bad answer)."""
        payload = {"queries": queries, "topk": topk, "return_scores": True}
        response = send_retrying(
            lambda: self._client.post(self.url, json=payload),
            f"retriever {self.url}",
            self.retries,
            self.backoff,
            RetrieverError,
        )
        status = response.status_code
        if status in SPLIT_STATUSES and len(queries) > 1:
            say = log.warning if depth == 0 else log.debug
            n, why = len(queries), f"HTTP {status}: {_excerpt(response.text, 120)}"
            say("retriever %s refused %d queries (%s); asking again in halves", self.url, n, why)
            halves = (queries[: n // 2], queries[n // 2 :])
            return [a for part in halves for a in self._ask(part, topk, depth + 1)]
        if status != 200:
            refusal = f"retriever {self.url} answered HTTP {status}: {_excerpt(response.text)}"
            if status in SPLIT_STATUSES:
                return [refusal]
            raise RetrieverError(refusal)
        try:
            return list(decode_response(response.json(), len(queries)))
        except ValueError as exc:  # bad JSON (json.JSONDecodeError) or ProtocolError
            kind = "malformed response" if isinstance(exc, ProtocolError) else "invalid JSON"
            raise RetrieverError(
                f"retriever {self.url}: {kind}: {exc}; body: {_excerpt(response.text)}"
            ) from exc
