"""The `/retrieve` server against oversized and malformed requests, over a real loopback socket.

Every bad input gets a 4xx with a message that says what was wrong (never a 5xx, never a hang),
and the server answers correctly afterwards. The limits are small here so that tests stay fast;
the defaults are checked against what Search-R1 sends.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.live import LiveServer
from treegrpo import cli
from treegrpo.cli.options import ServeOptions
from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.retrieval.http_client import RemoteRetriever
from treegrpo.retrieval.server import (
    MAX_BODY_BYTES,
    MAX_QUERIES,
    MAX_QUERY_CHARS,
    MAX_RESPONSE_BYTES,
    create_app,
)

BODY, QUERIES, CHARS = 4096, 8, 64  # the limited server's limits
DEEP = b"[" * 10_000 + b"]" * 10_000
BIG = b'{"queries": ["' + b"x" * BODY + b'"]}'


@pytest.fixture(scope="module")
def limited(passages: list[Passage]) -> Iterator[LiveServer]:
    """BM25 over the twenty passages with small limits and ``max_topk=10``."""
    app = create_app(
        BM25Retriever(passages, use_cache=False),
        max_topk=10,
        max_queries=QUERIES,
        max_query_chars=CHARS,
        max_body_bytes=BODY,
    )
    with LiveServer(app) as server:
        yield server


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    """One keep-alive client for the module (a new one costs ~30 ms, mostly its TLS context)."""
    with httpx.Client(timeout=10) as client:
        yield client


def post(http: httpx.Client, server: LiveServer, body: bytes | Any) -> httpx.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return http.post(f"{server.url}/retrieve", content=data)


def detail(r: httpx.Response) -> str:
    """The response's message(s) as one string."""
    d = r.json()["detail"]
    return d if isinstance(d, str) else " | ".join(e["msg"] for e in d)


def assert_answers_correctly(http: httpx.Client, server: LiveServer) -> None:
    r = post(
        http,
        server,
        {"queries": ["Tokyo capital of Japan", "Marie Curie radioactivity"], "topk": 1},
    )
    assert r.status_code == 200
    assert [hits[0]["id"] for hits in r.json()["result"]] == ["10", "6"]


# --- limits -------------------------------------------------------------------------------------

TOO_MANY = json.dumps({"queries": ["q"] * (QUERIES + 1)}).encode()
TOO_LONG = json.dumps({"queries": ["ok", "x" * (CHARS + 1)]}).encode()
OVER_LIMITS: list[tuple[bytes, int, list[str]]] = [
    (BIG, 413, [f"{len(BIG)} bytes", f"limit of {BODY} bytes", "--max-body-bytes"]),
    (TOO_MANY, 413, ["9 queries", "limit of 8", "--max-queries"]),
    (b'{"queries": [' + b"1," * 1500 + b"1]}", 413, ["1501 queries", "--max-queries"]),
    (TOO_LONG, 422, ["query 1 is 65 characters", "limit of 64", "--max-query-chars"]),
]


@pytest.mark.parametrize(("body", "status", "parts"), OVER_LIMITS)
def test_over_a_limit_is_refused_naming_size_limit_and_flag(
    http: httpx.Client, limited: LiveServer, body: bytes, status: int, parts: list[str]
) -> None:
    r = post(http, limited, body)
    assert r.status_code == status
    for part in parts:
        assert part in detail(r)


def test_long_query_error_locates_the_query(http: httpx.Client, limited: LiveServer) -> None:
    [error] = post(http, limited, {"queries": ["ok", "ok", "x" * 100]}).json()["detail"]
    assert error["type"] == "string_too_long" and error["loc"] == ["body", "queries", 2]
    assert "input" not in error  # never echoed back


def test_limits_count_characters_not_bytes(http: httpx.Client, limited: LiveServer) -> None:
    r = post(
        http, limited, {"queries": ["東" * CHARS], "topk": 1}
    )  # 192 bytes of UTF-8, 64 characters
    assert r.status_code == 200 and len(r.json()["result"]) == 1


def test_limits_are_inclusive(http: httpx.Client, limited: LiveServer) -> None:
    r = post(http, limited, {"queries": ["tower"] * QUERIES, "topk": 1})
    assert r.status_code == 200 and len(r.json()["result"]) == QUERIES


def test_declared_length_over_limit_is_refused_without_reading_the_body(
    limited: LiveServer,
) -> None:
    with socket.create_connection(("127.0.0.1", limited.port), timeout=10) as sock:
        sock.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):  # the server closes the connection after its answer
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413") and b"connection: close" in head.lower()
    assert "10000000000 bytes (its Content-Length)" in json.loads(body)["detail"]


def test_chunked_body_over_limit_is_413(limited: LiveServer) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: httpx sends it chunked
        yield b'{"queries": ["'
        for _ in range(100):
            yield b"x" * 1000

    r = httpx.post(f"{limited.url}/retrieve", content=chunks(), timeout=10)
    assert r.status_code == 413
    assert "at least" in detail(r) and str(BODY) in detail(r) and "--max-body-bytes" in detail(r)


def test_limits_in_health(limited: LiveServer) -> None:
    health = httpx.get(f"{limited.url}/health", timeout=10).json()
    assert (health["max_queries"], health["max_query_chars"]) == (QUERIES, CHARS)
    assert health["max_body_bytes"] == BODY


def test_defaults_take_a_search_r1_batch(http: httpx.Client, bm25_server: LiveServer) -> None:
    # Search-R1 sends a turn's searches at once: train_batch_size 512 x n_agent 5.
    queries = [f"who designed the eiffel tower in paris number {i}" for i in range(2560)]
    r = post(http, bm25_server, {"queries": queries, "topk": 3, "return_scores": True})
    assert r.status_code == 200 and len(r.json()["result"]) == 2560
    assert httpx.get(f"{bm25_server.url}/health", timeout=10).json()["max_queries"] == MAX_QUERIES


def test_cli_defaults_match_the_server() -> None:
    defaults = ServeOptions(corpus=Path("corpus.jsonl"))
    assert defaults.max_queries == MAX_QUERIES
    assert defaults.max_query_chars == MAX_QUERY_CHARS
    assert defaults.max_body_bytes == MAX_BODY_BYTES
    assert defaults.max_response_bytes == MAX_RESPONSE_BYTES


@pytest.mark.slow  # imports treegrpo.cli.commands, which loads torch
def test_serve_flags_reach_the_server(
    corpus_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands = importlib.import_module(cli.COMMANDS)
    seen: dict[str, Any] = {}
    record = functools.wraps(commands.create_app)(lambda tool, **kw: seen.update(kw))
    monkeypatch.setattr(commands, "create_app", record)  # the same keyword-only limits
    monkeypatch.setattr(commands, "run_server", lambda app, *args: None)
    flags = ["--max-queries", "5", "--max-query-chars", "6", "--max-body-bytes", "7"]
    flags += ["--max-response-bytes", "8"]
    cli.main(["serve", "--corpus", str(corpus_file), "--cache-dir", str(tmp_path), *flags])
    limits = ("max_queries", "max_query_chars", "max_body_bytes", "max_response_bytes")
    assert tuple(seen[name] for name in limits) == (5, 6, 7, 8)


LIMITS = ["max_queries", "max_query_chars", "max_body_bytes", "max_response_bytes"]


@pytest.mark.parametrize("name", LIMITS)
def test_limits_below_one_are_refused(passages: list[Passage], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        create_app(BM25Retriever(passages[:2], use_cache=False), **{name: 0})


# --- response size ------------------------------------------------------------------------------

RESPONSE = 1500  # bytes: two queries' top 3 fit (~650 bytes each with scores), four do not


@pytest.fixture(scope="module")
def small_responses(passages: list[Passage]) -> Iterator[LiveServer]:
    """BM25 over the twenty passages whose responses may not pass ``RESPONSE`` bytes."""
    app = create_app(BM25Retriever(passages, use_cache=False), max_response_bytes=RESPONSE)
    with LiveServer(app) as server:
        yield server


QUERIES4 = [  # three hits each
    "tower river mountain wall",
    "capital desert music game",
    "bee river wall capital",
    "Moon game tower music",
]


def test_response_over_the_limit_is_413_naming_limit_and_flag(
    http: httpx.Client, small_responses: LiveServer
) -> None:
    r = post(http, small_responses, {"queries": QUERIES4, "topk": 3, "return_scores": True})
    assert r.status_code == 413
    for part in ("4 queries, topk 3", f"limit of {RESPONSE} bytes", "--max-response-bytes"):
        assert part in detail(r)
    r = post(http, small_responses, {"queries": QUERIES4[:1], "topk": 3, "return_scores": True})
    assert r.status_code == 200 and len(r.content) <= RESPONSE
    assert httpx.get(f"{small_responses.url}/health", timeout=10).json()["max_response_bytes"] == (
        RESPONSE
    )


def test_client_splits_a_batch_whose_response_is_too_large(
    small_responses: LiveServer, passages: list[Passage]
) -> None:
    with RemoteRetriever(small_responses.url, retries=0) as remote:
        found = remote.search(QUERIES4, topk=3)
    assert found == BM25Retriever(passages, use_cache=False).search(QUERIES4, topk=3)


# --- malformed bodies (default limits) ------------------------------------------------------------

MALFORMED: list[tuple[bytes, str]] = [
    (b"\xff\xfe", "not valid UTF-8 JSON"),
    (b'\xff\xfe{\x00"\x00', "not valid UTF-8 JSON"),  # UTF-16
    (b'{"queries": ["caf\xe9"]}', "invalid continuation byte at byte 17"),  # Latin-1
    (b"", "Invalid JSON"),
    (b'{"queries": ["a"]', "Invalid JSON"),
    (b'{"queries": ["a"]} trailing', "Invalid JSON"),
    (b'{"queries": ["a\\ud800"]}', "Invalid JSON"),  # a lone surrogate
    (DEEP, "recursion limit"),
    (b'{"queries": ' + DEEP + b"}", "recursion limit"),
    (b'{"queries": ["a"], "unknown": ' + DEEP + b"}", "recursion limit"),
    (b'{"queries": [null]}', "valid string"),
    (b'{"queries": ["a", {"text": "b"}]}', "valid string"),
    (b'{"queries": [["a"]]}', "valid string"),
    (b'{"queries": null}', "valid array"),
    (b'[{"queries": ["a"]}]', "should be an object"),
    (b"42", "should be an object"),
    (b"null", "should be an object"),
    (b'"queries"', "should be an object"),
    (b'{"queries": ["a"], "topk": NaN}', "valid integer"),
    (b'{"queries": ["a"], "topk": Infinity}', "valid integer"),
    (b'{"queries": ["a"], "topk": -Infinity}', "valid integer"),
    (b'{"queries": ["a"], "topk": 1e400}', "valid integer"),
    (b'{"queries": ["a"], "topk": 1' + b"0" * 5000 + b"}", "number out of range"),
    (b'{"queries": ["a"], "topk": -100000000000000000000}', "greater than or equal to 1"),
    (b'{"queries": ["a"], "return_scores": NaN}', "valid boolean"),
]


@pytest.mark.parametrize(("body", "message"), MALFORMED)
def test_malformed_body_is_422_with_message(
    http: httpx.Client, bm25_server: LiveServer, body: bytes, message: str
) -> None:
    r = post(http, bm25_server, body)
    assert r.status_code == 422, r.text
    assert message in detail(r)
    assert all("input" not in e for e in r.json()["detail"])


def test_large_bodies_get_the_same_errors(http: httpx.Client, bm25_server: LiveServer) -> None:
    # Parsed in a worker thread (over OFFLOAD_BYTES): its errors must come back just the same.
    r = post(http, bm25_server, {"queries": ["tower river"] * (MAX_QUERIES + 1)})
    assert r.status_code == 413 and f"{MAX_QUERIES + 1} queries" in detail(r)
    r = post(http, bm25_server, {"queries": ["tower river " * 100] * 100 + [None]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "queries", 100]


@pytest.mark.parametrize("topk", [10**18, 2**63, 10**30, 10**500])
def test_huge_topk_is_clamped(http: httpx.Client, bm25_server: LiveServer, topk: int) -> None:
    words = " ".join(["the tower river mountain wall game bee music capital desert"] * 3)
    r = post(http, bm25_server, f'{{"queries": ["{words}"], "topk": {topk}}}'.encode())
    assert r.status_code == 200 and len(r.json()["result"][0]) == 10  # max_topk=10


def test_unknown_fields_are_ignored(http: httpx.Client, bm25_server: LiveServer) -> None:
    body = b'{"queries": ["Tokyo capital"], "topk": 1, "request_id": 7, "meta": {"x": [NaN]}}'
    r = post(http, bm25_server, body)
    assert r.status_code == 200 and r.json()["result"][0][0]["id"] == "10"


def test_duplicate_key_keeps_the_last_value(http: httpx.Client, bm25_server: LiveServer) -> None:
    r = post(
        http, bm25_server, b'{"queries": ["Beethoven"], "queries": ["Tokyo capital"], "topk": 1}'
    )
    assert r.status_code == 200 and r.json()["result"][0][0]["id"] == "10"


def test_utf8_byte_order_mark_is_skipped(http: httpx.Client, bm25_server: LiveServer) -> None:
    r = post(http, bm25_server, b'\xef\xbb\xbf{"queries": ["Tokyo capital"], "topk": 1}')
    assert r.status_code == 200 and r.json()["result"][0][0]["id"] == "10"


def test_still_serving_after_the_barrage(
    http: httpx.Client, bm25_server: LiveServer, limited: LiveServer
) -> None:
    for body, _ in MALFORMED:
        assert post(http, bm25_server, body).status_code == 422
    for body, status, _ in OVER_LIMITS:
        assert post(http, limited, body).status_code == status
    assert_answers_correctly(http, bm25_server)
    assert_answers_correctly(http, limited)


# --- random input -------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
REQUESTS = st.fixed_dictionaries(
    {"queries": st.lists(st.text(max_size=80) | JSON, max_size=12)},
    optional={"topk": JSON | st.integers(), "return_scores": JSON, "extra": JSON},
)
BODIES = (
    st.binary(max_size=200)
    | JSON.map(lambda v: json.dumps(v).encode())
    | REQUESTS.map(lambda v: json.dumps(v).encode())
    | REQUESTS.map(lambda v: json.dumps(v).encode()[: len(json.dumps(v)) // 2])
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=BODIES)
def test_random_bodies_never_get_a_5xx(
    http: httpx.Client, limited: LiveServer, body: bytes
) -> None:
    r = post(http, limited, body)
    assert r.status_code < 500, (body, r.text)
    if r.status_code == 200:
        assert len(r.json()["result"]) == len(json.loads(body)["queries"])


def test_servers_listen_on_loopback_unless_told_otherwise() -> None:
    """`treegrpo serve` and the server function bind 127.0.0.1 by default: a retriever is not
    exposed to the network by accident."""

    from treegrpo.retrieval import server

    assert ServeOptions(corpus=Path("corpus.jsonl")).host == "127.0.0.1"
    assert inspect.signature(server.serve).parameters["host"].default == "127.0.0.1"
