"""Web clients that travel to other processes (Ray rollout workers) as their settings: an
``httpx.Client`` and a thread pool do not pickle, and should not (connections and threads belong
to one process), so a ``Reopens`` object pickles as the arguments it was made with, and the copy
a worker receives opens its own (and starts with an empty cache).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import httpx

from treegrpo.retrieval.base import Closes

R = TypeVar("R", bound="Reopens")


class Reopens(Closes):
    """Pickles as ``type(self)(*args, **kwargs)`` of its construction; holds an HTTP client and a
    thread pool until ``close``."""

    _made_with: tuple[tuple[Any, ...], dict[str, Any]]
    _client: httpx.Client
    _pool: ThreadPoolExecutor

    def __new__(cls: type[R], *args: Any, **kwargs: Any) -> R:
        self = super().__new__(cls)
        self._made_with = (args, kwargs)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        args, kwargs = self._made_with
        return (partial(type(self), *args, **kwargs), ())

    def close(self) -> None:
        """Stop the threads and close the connections."""
        self._pool.shutdown(wait=True)
        self._client.close()
