"""A ``SearchTool`` that calls any Search-R1 compatible ``/retrieve`` server over HTTP.

Works against Search-R1's own retrieval server, verl's and SkyRL's, and ``treegrpo serve``.
Transient failures (connection refused or reset, timeouts, HTTP 5xx) are retried with
exponential backoff, because a trainer should survive a retriever restart; anything else (4xx,
a body that is not the Search-R1 shape) fails at once with the URL, the status and the start of
the body, because retrying cannot fix it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import httpx

from treegrpo.tools.base import Passage, SearchFailed
from treegrpo.tools.protocol import ProtocolError, decode_response

log = logging.getLogger(__name__)


class RetrieverError(SearchFailed):
    """The retriever server could not be reached or answered with an error."""


def _excerpt(text: str, n: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n] + "…"


class RemoteRetriever:
    """Search through a remote ``POST /retrieve`` endpoint.

    Args:
        url: The endpoint, e.g. ``http://127.0.0.1:8000/retrieve``; a bare
            ``http://host:port`` gets ``/retrieve`` appended.
        timeout: Seconds per attempt (connect and read).
        retries: Extra attempts after the first on connection errors, timeouts and 5xx.
        backoff: First wait in seconds; doubles after each failed attempt.
    """

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

    def __enter__(self) -> RemoteRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _post(self, payload: dict[str, Any]) -> httpx.Response:
        """POST with retries; returns a non-5xx response or raises ``RetrieverError``."""
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                delay = self.backoff * 2 ** (attempt - 1)
                log.warning(
                    "retriever %s: %s; retry %d in %.1f s", self.url, problem, attempt, delay
                )
                time.sleep(delay)
            try:
                response = self._client.post(self.url, json=payload)
            except httpx.TransportError as exc:  # refused, reset, timed out, ...
                problem = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code < 500:
                return response
            problem = f"HTTP {response.status_code}: {_excerpt(response.text)}"
        raise RetrieverError(
            f"retriever {self.url} failed after {self.retries + 1} attempts; last: {problem}"
        )

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        """One request for the whole batch; one passage list per query, best first."""
        if topk < 1:
            raise ValueError(f"topk must be >= 1, got {topk}")
        if not queries:
            return []
        response = self._post({"queries": queries, "topk": topk, "return_scores": True})
        if response.status_code != 200:
            raise RetrieverError(
                f"retriever {self.url} answered HTTP {response.status_code}: "
                f"{_excerpt(response.text)}"
            )
        try:
            return decode_response(response.json(), len(queries))
        except ValueError as exc:  # bad JSON (json.JSONDecodeError) or ProtocolError
            kind = "malformed response" if isinstance(exc, ProtocolError) else "invalid JSON"
            raise RetrieverError(
                f"retriever {self.url}: {kind}: {exc}; body: {_excerpt(response.text)}"
            ) from exc
