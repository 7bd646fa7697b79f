"""The `/retrieve` server over a real loopback socket: Search-R1 shapes, validation, batching."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.live import LiveServer
from treegrpo.retrieval import server as server_module
from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.retrieval.http_client import RemoteRetriever
from treegrpo.retrieval.server import create_app


def post(server: LiveServer, body: Any, **kwargs: Any) -> httpx.Response:
    if isinstance(body, bytes | str):
        kwargs["content"] = body
        kwargs.setdefault("headers", {"content-type": "application/json"})
    else:
        kwargs["json"] = body
    return httpx.post(f"{server.url}/retrieve", timeout=10, **kwargs)


def test_search_r1_response_with_scores(bm25_server: LiveServer, passages: list[Passage]) -> None:
    r = post(
        bm25_server,
        {
            "queries": ["Eiffel tower Paris, or China", "Shakespeare Hamlet or a composer"],
            "topk": 2,
            "return_scores": True,
        },
    )
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    result = r.json()["result"]
    assert len(result) == 2 and all(len(hits) == 2 for hits in result)
    top = result[0][0]
    assert set(top) == {"document", "score"} and set(top["document"]) == {"id", "contents"}
    assert top["document"] == {"id": "0", "contents": passages[0].contents}
    assert isinstance(top["score"], float) and top["score"] >= result[0][1]["score"] > 0
    assert result[1][0]["document"]["id"] == "17"


def test_search_r1_response_without_scores(bm25_server: LiveServer) -> None:
    for body in (
        {"queries": ["Amazon river Brazil"], "topk": 3, "return_scores": False},
        {"queries": ["Amazon river Brazil"], "topk": 3},
    ):
        r = post(bm25_server, body)
        assert r.status_code == 200
        [hits] = r.json()["result"]
        assert hits[0]["id"] == "5" and set(hits[0]) == {"id", "contents"}


def test_missing_or_null_topk_uses_default_three(bm25_server: LiveServer) -> None:
    for body in (
        {"queries": ["tower river mountain wall game bee"]},
        {"queries": ["tower river mountain wall game bee"], "topk": None},
    ):
        assert len(post(bm25_server, body).json()["result"][0]) == 3


def test_empty_query_list_answers_empty_result(bm25_server: LiveServer) -> None:
    r = post(bm25_server, {"queries": [], "topk": 3, "return_scores": True})
    assert r.status_code == 200 and r.json() == {"result": []}


def test_huge_topk_is_clamped(bm25_server: LiveServer) -> None:
    words = " ".join(["the tower river mountain wall game bee music capital desert"] * 3)
    r = post(bm25_server, {"queries": [words], "topk": 10**9})
    assert r.status_code == 200
    assert len(r.json()["result"][0]) == 10  # max_topk=10 in the fixture, 20 passages


def test_unicode_queries(bm25_server: LiveServer) -> None:
    r = post(
        bm25_server,
        {
            "queries": ["Zürich café — naïve 東京 🚲", "Tokyo capital"],
            "topk": 1,
            "return_scores": True,
        },
    )
    assert r.status_code == 200
    result = r.json()["result"]
    assert len(result) == 2 and result[1][0]["document"]["id"] == "10"


def test_bad_json_is_4xx_with_message(bm25_server: LiveServer) -> None:
    r = post(bm25_server, b'{"queries": ["a"], "topk": ')
    assert 400 <= r.status_code < 500
    assert "JSON" in r.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"queries": "just one string", "topk": 3}, "queries"),
        ({"queries": ["ok", 5], "topk": 3}, "queries"),
        ({"queries": ["ok"], "topk": "3"}, "topk"),
        ({"queries": ["ok"], "topk": 2.5}, "topk"),
        ({"queries": ["ok"], "return_scores": "yes"}, "return_scores"),
        ({"topk": 3}, "queries"),
        (["ok"], "body"),
    ],
)
def test_wrong_types_are_422_naming_the_field(
    bm25_server: LiveServer, body: Any, field: str
) -> None:
    r = post(bm25_server, body)
    assert r.status_code == 422
    locations = [e["loc"] for e in r.json()["detail"]]
    assert any(field in loc for loc in locations), locations


@pytest.mark.parametrize("topk", [0, -1])
def test_topk_below_one_is_422(bm25_server: LiveServer, topk: int) -> None:
    r = post(bm25_server, {"queries": ["x"], "topk": topk})
    assert r.status_code == 422
    [error] = r.json()["detail"]
    assert error["loc"] == ["body", "topk"] and "greater than or equal to 1" in error["msg"]


def test_health(bm25_server: LiveServer) -> None:
    r = httpx.get(f"{bm25_server.url}/health", timeout=10)
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok" and body["passages"] == 20 and body["max_topk"] == 10


def test_remote_retriever_against_our_server(
    bm25_server: LiveServer, passages: list[Passage]
) -> None:
    from treegrpo.retrieval.bm25 import BM25Retriever

    local = BM25Retriever(passages, use_cache=False)
    queries = ["honey bees and flowers", "first humans on the Moon", "zzzz"]
    for url in (bm25_server.url, f"{bm25_server.url}/retrieve"):
        with RemoteRetriever(url) as remote:
            assert remote.search(queries, topk=3) == local.search(queries, topk=3)
            assert remote.search([], topk=3) == []


def test_concurrent_requests_are_batched(passages: list[Passage]) -> None:
    from treegrpo.retrieval.bm25 import BM25Retriever

    bm25 = BM25Retriever(passages, use_cache=False)

    class Slow:  # requests pile up while a search runs, as under real load
        def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
            time.sleep(0.05)
            return bm25.search(queries, topk)

    app = create_app(Slow(), batch_wait_ms=5)
    with LiveServer(app) as server:
        answers: dict[int, str] = {}

        def ask(i: int) -> None:
            q = passages[i].contents.split("\n")[1]
            r = post(server, {"queries": [q], "topk": 1})
            answers[i] = r.json()["result"][0][0]["id"]

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        health = httpx.get(f"{server.url}/health", timeout=10).json()
    assert answers == {i: str(i) for i in range(16)}  # each passage finds itself
    assert health["queries"] == 16 and health["batches"] < 16


def test_retriever_failure_is_500_with_message() -> None:
    class Broken:
        def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
            raise OSError("index file vanished")

    with LiveServer(create_app(Broken())) as server:
        r = post(server, {"queries": ["x"]})
        assert r.status_code == 500 and "index file vanished" in r.json()["detail"]
        assert httpx.get(f"{server.url}/health", timeout=10).json()["passages"] is None


def test_body_is_json_whatever_the_content_type(bm25_server: LiveServer) -> None:
    body = b'{"queries": ["Tokyo capital of Japan"], "topk": 1}'  # as `curl -d` sends it
    r = post(bm25_server, body, headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200 and r.json()["result"][0][0]["id"] == "10"


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, "the request never reached the spied function"
        time.sleep(0.005)


def test_large_body_is_parsed_off_the_event_loop(
    passages: list[Passage], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a large body is parsed, the server still answers /health."""
    parse, health_answered = server_module.parse_request, threading.Event()
    on_loop: list[bool] = []

    def spy(body: bytes, model: Any) -> Any:
        on_loop.append(_on_event_loop())
        if not on_loop[-1]:  # on the loop, waiting would only block the /health below
            health_answered.wait(20)
        return parse(body, model)

    monkeypatch.setattr(server_module, "parse_request", spy)
    queries = [f"Tokyo capital {'of Japan ' * 80}{i}" for i in range(100)]
    big = {"queries": queries, "topk": 1}
    assert len(httpx.Request("POST", "http://x", json=big).content) > server_module.OFFLOAD_BYTES
    with LiveServer(create_app(BM25Retriever(passages, use_cache=False))) as server:
        answer: list[httpx.Response] = []
        request = threading.Thread(target=lambda: answer.append(post(server, big)))
        request.start()
        try:
            _wait_for(lambda: bool(on_loop))
            assert on_loop == [False]
            health = httpx.get(f"{server.url}/health", timeout=10)
            assert health.status_code == 200
        finally:
            health_answered.set()
            request.join()
        small = post(server, {"queries": ["Tokyo capital"], "topk": 1})
    assert answer[0].status_code == 200 and len(answer[0].json()["result"]) == 100
    assert small.status_code == 200 and on_loop == [False, True]  # a small body stays on it


def test_large_response_is_encoded_off_the_event_loop(
    passages: list[Passage], monkeypatch: pytest.MonkeyPatch
) -> None:
    encode, on_loop = server_module.response_body, []

    def spy(*args: Any) -> bytes:
        on_loop.append(_on_event_loop())
        return encode(*args)

    monkeypatch.setattr(server_module, "response_body", spy)
    n = server_module.OFFLOAD_HITS // 10 + 1  # queries of 10 hits each
    words = " ".join(["the tower river mountain wall game bee music capital desert"] * 3)
    with LiveServer(create_app(BM25Retriever(passages, use_cache=False))) as server:
        many = post(server, {"queries": [words] * n, "topk": 10})
        few = post(server, {"queries": [words], "topk": 10})
    assert many.status_code == 200 and len(many.json()["result"]) == n
    assert few.status_code == 200 and on_loop == [False, True]
