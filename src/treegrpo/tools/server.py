"""A Search-R1 compatible retriever server: ``POST /retrieve`` and ``GET /health``.

Any ``SearchTool`` (BM25, dense, even a ``RemoteRetriever``) can be served; Search-R1, verl
and SkyRL clients work against it unchanged (ALGORITHM.md §6). Behaviour at the edges:

- ``queries: []`` answers ``{"result": []}`` (Search-R1 clients may send an empty batch).
- ``topk`` absent or null means ``default_topk``; ``topk < 1`` is a 422; a ``topk`` above
  ``max_topk`` or the corpus size is clamped to it (never an error: fewer hits come back).
- Wrong types (``queries`` a string, ``topk`` a string or a float, ...) are 422 with pydantic's
  message and the field's location; a body that is not JSON is also a 422 ("Invalid JSON: …").
  The body is read as JSON whatever the Content-Type header says.
- Concurrent requests are micro-batched (``treegrpo.tools.batcher``) into one search call.
- Responses are serialized with orjson, the one hot spot FastAPI's own encoder would add.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sized
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from treegrpo.tools.base import SearchTool
from treegrpo.tools.batcher import MicroBatcher
from treegrpo.tools.protocol import encode_hits

log = logging.getLogger(__name__)


class RetrieveRequest(BaseModel):
    """Body of ``POST /retrieve`` (Search-R1's ``QueryRequest``), validated strictly."""

    model_config = ConfigDict(strict=True)

    queries: list[str]
    """The search queries; one result list comes back for each, in order."""
    topk: int | None = Field(default=None, ge=1)
    """Passages per query; null means the server's default; clamped to ``max_topk``."""
    return_scores: bool = False
    """Wrap each hit as ``{"document": …, "score": s}`` instead of the bare document."""


def parse_request(body: bytes) -> RetrieveRequest:
    """Validate a request body as JSON whatever its Content-Type (curl's ``-d`` sends a form type).

    pydantic parses the bytes directly (faster than FastAPI's ``json.loads`` then validate);
    errors are raised as FastAPI's ``RequestValidationError`` so the 422 looks as usual, with
    locations under ``body``.
    """
    try:
        return RetrieveRequest.model_validate_json(body)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors, body=body) from None


def create_app(
    retriever: SearchTool,
    *,
    max_topk: int = 100,
    max_batch: int = 64,
    batch_wait_ms: float = 1.0,
    default_topk: int = 3,
) -> FastAPI:
    """The FastAPI app serving ``retriever``.

    Args:
        retriever: What answers the queries.
        max_topk: Largest topk served; larger requests are clamped (also to the corpus size
            when the retriever has a ``len``).
        max_batch: Most queries per ``retriever.search`` call (bigger requests are split).
        batch_wait_ms: How long an idle server waits for more requests to batch together.
        default_topk: topk when a request leaves it out (Search-R1's default is 3).
    """
    size = len(retriever) if isinstance(retriever, Sized) else None
    limit = max(1, min(max_topk, size) if size is not None else max_topk)
    batcher = MicroBatcher(retriever.search, max_batch=max_batch, max_wait_s=batch_wait_ms / 1e3)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await batcher.start()
        try:
            yield
        finally:
            await batcher.stop()

    app = FastAPI(
        title="treegrpo retriever",
        description="Search-R1 compatible `/retrieve` endpoint.",
        lifespan=lifespan,
    )
    app.state.batcher = batcher

    body_schema = {"content": {"application/json": {"schema": RetrieveRequest.model_json_schema()}}}

    @app.post("/retrieve", openapi_extra={"requestBody": {**body_schema, "required": True}})
    async def retrieve(raw: Request) -> Response:
        """Top-k passages for each query, in the Search-R1 response format."""
        request = parse_request(await raw.body())
        k = min(request.topk if request.topk is not None else default_topk, limit)
        try:
            results = await batcher.search(request.queries, k)
        except Exception as exc:  # the retriever failed: say so, do not hang the client
            log.exception("search failed")
            detail = f"retriever failed: {type(exc).__name__}: {exc}"
            return JSONResponse({"detail": detail}, status_code=500)
        body = {"result": [encode_hits(hits, request.return_scores) for hits in results]}
        return Response(orjson.dumps(body), media_type="application/json")

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Liveness, corpus size and batching counters."""
        return {
            "status": "ok",
            "retriever": type(retriever).__name__,
            "passages": size,
            "max_topk": limit,
            "batches": batcher.batches,
            "queries": batcher.queries,
        }

    return app


def serve(
    retriever: SearchTool,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    access_log: bool = False,
    **app_kwargs: Any,
) -> None:
    """Run the server with uvicorn until interrupted (loopback-only by default).

    The access log is off by default: at hundreds of requests per second it costs more than
    the search itself.
    """
    import uvicorn

    app = create_app(retriever, **app_kwargs)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=access_log)
