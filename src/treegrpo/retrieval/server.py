"""A Search-R1 compatible retriever server for any ``SearchTool``: ``POST /retrieve`` and ``GET
/health``, which Search-R1, verl and SkyRL clients use unchanged (docs/algorithm.md §6). Limits,
micro-batching and behaviour at the edges: docs/retrieval.md, "Serving a corpus".
"""

from __future__ import annotations

import codecs
import logging
from collections.abc import Callable, Sized
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
import orjson
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from treegrpo.retrieval.base import Passage, SearchTool
from treegrpo.retrieval.batcher import MicroBatcher
from treegrpo.retrieval.protocol import encode_hits

log = logging.getLogger(__name__)

MAX_QUERIES = 8192
"""Default most queries per request (Search-R1 sends a turn's 2,560 searches in one request)."""
MAX_QUERY_CHARS = 8192
"""Default longest query in characters (a whole 500-token step is ~2,000): bounds one search."""
MAX_BODY_BYTES = 8 * 2**20
"""Default largest body, 8 MiB (a typical Search-R1 batch is ~200 KB). Parsing the worst body of
this size (millions of tiny array items) peaks near 300 MB: this bounds what a request allocates."""
MAX_RESPONSE_BYTES = 64 * 2**20
"""Default largest response, 64 MiB (8,192 queries × topk 10 of 100-word passages), so that one
request cannot make the server build gigabytes."""
OFFLOAD_BYTES = 64 * 2**10
"""Bodies larger than this are parsed in a worker thread: the worst 8 MiB body takes ~0.3 s, which
would stall every other request; a smaller one parses faster than the hop to a thread."""
OFFLOAD_HITS = 256
"""Responses of more hits (~200 KB of Wikipedia passages) are encoded in a worker thread too."""

T = TypeVar("T")


class RetrieveRequest(BaseModel):
    """Body of ``POST /retrieve`` (Search-R1's ``QueryRequest``), validated strictly; unknown
    fields are ignored, as Search-R1's own server does."""

    model_config = ConfigDict(strict=True)

    queries: list[str]
    """The search queries; one result list comes back for each, in order."""
    topk: int | None = Field(default=None, ge=1)
    """Passages per query; null means the server's default; clamped to ``max_topk``."""
    return_scores: bool = False
    """Wrap each hit as ``{"document": …, "score": s}`` instead of the bare document."""


def limited_request(max_queries: int, max_query_chars: int) -> type[RetrieveRequest]:
    """``RetrieveRequest`` with at most ``max_queries`` queries of ``max_query_chars`` each;
    pydantic checks the length first, so millions of items cost no error each."""
    query = Annotated[str, Field(max_length=max_query_chars)]
    return create_model(
        "RetrieveRequest",
        __base__=RetrieveRequest,
        __doc__=RetrieveRequest.__doc__,
        queries=(list[query], Field(max_length=max_queries)),
    )


def _utf8_error(body: bytes) -> str | None:
    """Why ``body`` is not UTF-8, or None when it is."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = body[exc.start : exc.end]
        return f"body is not valid UTF-8 JSON: {exc.reason} at byte {exc.start} ({bad!r})"
    return None


def request_error(exc: ValidationError, body: bytes) -> HTTPException | RequestValidationError:
    """The HTTP error for a body that failed validation: 413 for too many queries, else a 422 in
    FastAPI's shape without the ``input``/``ctx`` echo, which FastAPI cannot always encode (bytes
    that are not UTF-8 and NaN made it answer 500)."""
    errors = exc.errors(include_url=False)
    if any(e["type"] == "json_invalid" for e in errors) and (why := _utf8_error(body)):
        return RequestValidationError([{"type": "json_invalid", "loc": ("body",), "msg": why}])
    detail = []
    for e in errors:
        ctx = e.get("ctx", {})
        if e["type"] == "too_long" and e["loc"] == ("queries",):
            n = ctx.get("actual_length") or "more than"
            msg = (
                f"request has {n} queries, over the limit of {ctx['max_length']} per request; "
                "send smaller batches or raise the limit (treegrpo serve --max-queries)"
            )
            log.warning("refused a request: %s", msg)
            return HTTPException(413, msg)
        msg = e["msg"]
        if e["type"] == "string_too_long" and e["loc"][0] == "queries":
            msg = (
                f"query {e['loc'][1]} is {len(e['input'])} characters long, over the limit of "
                f"{ctx['max_length']} (treegrpo serve --max-query-chars)"
            )
            log.warning("refused a request: %s", msg)
        detail.append({"type": e["type"], "loc": ("body", *e["loc"]), "msg": msg})
    return RequestValidationError(detail)


def parse_request(body: bytes, model: type[RetrieveRequest] = RetrieveRequest) -> RetrieveRequest:
    """Validate a request body as JSON whatever its Content-Type (curl's ``-d`` sends a form type),
    with pydantic straight from the bytes (faster than ``json.loads`` then validate), a UTF-8 byte
    order mark skipped; errors as in ``request_error``."""
    try:
        return model.model_validate_json(body.removeprefix(codecs.BOM_UTF8))
    except ValidationError as exc:
        raise request_error(exc, body) from None


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, or a 413 as soon as it is known to be over ``limit`` bytes: a
    Content-Length over it before anything is read, a chunked body at the first chunk past it; the
    413 asks to close the connection, so the rest is not read either."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(f"{int(declared)} bytes (its Content-Length)", limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(f"at least {size} bytes (reading stopped there)", limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(size: str, limit: int) -> HTTPException:
    msg = (
        f"request body of {size} is over the limit of {limit} bytes; send smaller batches "
        "or raise the limit (treegrpo serve --max-body-bytes)"
    )
    log.warning("refused a request: %s", msg)
    return HTTPException(413, msg, headers={"Connection": "close"})


def response_body(results: list[list[Passage]], return_scores: bool, limit: int) -> bytes:
    """The ``/retrieve`` response's JSON, or a 413 when it would be over ``limit`` bytes; the
    passages' characters, a lower bound of the size, are checked before encoding."""
    least = sum(len(p.contents) + len(p.id) for hits in results for p in hits)
    if least > limit:
        raise _response_too_large(f"at least {least} bytes", results, limit)
    body = orjson.dumps({"result": [encode_hits(hits, return_scores) for hits in results]})
    if len(body) > limit:
        raise _response_too_large(f"{len(body)} bytes", results, limit)
    return body


def _response_too_large(size: str, results: list[list[Passage]], limit: int) -> HTTPException:
    k = max(map(len, results), default=0)
    msg = (
        f"the response would be {size} ({len(results)} queries, topk {k}), over the limit of "
        f"{limit} bytes; send fewer queries or a smaller topk, or raise the limit "
        "(treegrpo serve --max-response-bytes)"
    )
    log.warning("refused a request: %s", msg)
    return HTTPException(413, msg)


def create_app(
    retriever: SearchTool,
    *,
    max_topk: int = 100,
    max_batch: int = 64,
    batch_wait_ms: float = 1.0,
    default_topk: int = 3,
    max_queries: int = MAX_QUERIES,
    max_query_chars: int = MAX_QUERY_CHARS,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
) -> FastAPI:
    """The FastAPI app serving ``retriever`` (docs/retrieval.md, "Serving a corpus"). max_topk: the
    largest topk served, larger ones clamped (also to the corpus size where the retriever has a
    ``len``); max_batch, batch_wait_ms: the micro-batcher's (``retrieval.batcher``);
    default_topk: topk when a request leaves it out (3, as Search-R1); max_queries,
    max_query_chars, max_body_bytes, max_response_bytes: the limits of the constants of those names.

    Many arguments: the server's limits, one per flag of ``treegrpo serve``."""
    limits = {
        "max_queries": max_queries,
        "max_query_chars": max_query_chars,
        "max_body_bytes": max_body_bytes,
        "max_response_bytes": max_response_bytes,
    }
    for name, value in limits.items():
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    size = len(retriever) if isinstance(retriever, Sized) else None
    limit = max(1, min(max_topk, size) if size is not None else max_topk)
    batcher = MicroBatcher(retriever.search, max_batch=max_batch, max_wait_s=batch_wait_ms / 1e3)
    model = limited_request(max_queries, max_query_chars)
    # One thread at a time: large bodies are parsed one after another, as on the loop, which
    # bounds the memory that parsing takes (see MAX_BODY_BYTES).
    one_thread = anyio.CapacityLimiter(1)
    app = FastAPI(
        title="treegrpo retriever",
        description="Search-R1 compatible `/retrieve` endpoint.",
        lifespan=batcher.lifespan,
    )
    app.state.batcher = batcher
    body_schema = {"content": {"application/json": {"schema": model.model_json_schema()}}}

    @app.post("/retrieve", openapi_extra={"requestBody": {**body_schema, "required": True}})
    async def retrieve(raw: Request) -> Response:
        """Top-k passages for each query, in the Search-R1 response format."""
        body = await read_body(raw, max_body_bytes)
        big = len(body) > OFFLOAD_BYTES
        request = await _in_thread(big, one_thread, parse_request, body, model)
        k = min(request.topk if request.topk is not None else default_topk, limit)
        try:
            results = await batcher.search(request.queries, k)
        except Exception as exc:  # the retriever failed: say so, do not hang the client
            log.exception("search failed")
            detail = f"retriever failed: {type(exc).__name__}: {exc}"
            return JSONResponse({"detail": detail}, status_code=500)
        big = sum(map(len, results)) > OFFLOAD_HITS
        args = (results, request.return_scores, max_response_bytes)
        answer = await _in_thread(big, one_thread, response_body, *args)
        return Response(answer, media_type="application/json")

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Liveness, corpus size, limits and batching counters."""
        return {
            "status": "ok",
            "retriever": type(retriever).__name__,
            "passages": size,
            "max_topk": limit,
            **limits,
            "batches": batcher.batches,
            "queries": batcher.queries,
        }

    return app


async def _in_thread(
    big: bool, limiter: anyio.CapacityLimiter, fn: Callable[..., T], *args: Any
) -> T:
    """``fn(*args)``: when ``big`` in a worker thread taken under ``limiter``, else here."""
    if not big:
        return fn(*args)
    return await anyio.to_thread.run_sync(fn, *args, limiter=limiter)


def serve(
    app: FastAPI,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    access_log: bool = False,
) -> None:
    """Run ``app`` (``create_app``'s, or ``website.site.create_site_app``'s) with uvicorn until
    interrupted, loopback-only by default. The access log is off by default: at hundreds of
    requests per second it costs more than the search itself."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=access_log)
