"""RemoteRetriever: Search-R1 responses with and without scores, retries, clear errors.

The fake servers are stdlib ``http.server`` on loopback, scripted per test; a batch with a
refused query goes to ``treegrpo``'s own server.
"""

from __future__ import annotations

import json
import pickle
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.live import LiveServer, free_port
from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.retrieval.http_client import RemoteRetriever, RetrieverError
from treegrpo.retrieval.protocol import ProtocolError, decode_response, encode_hits
from treegrpo.retrieval.server import create_app

Reply = tuple[int, bytes]


@contextmanager
def scripted_server(
    respond: Callable[[dict[str, Any], int], Reply],
) -> Iterator[list[dict[str, Any]]]:
    """Serve POSTs with ``respond(request_json, call_number)``; yields the received bodies."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.append({"path": self.path, **body})
            status, payload = respond(body, len(received))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        received.append({"url": f"http://127.0.0.1:{httpd.server_address[1]}"})
        yield received
    finally:
        httpd.shutdown()
        httpd.server_close()


def ok(queries: list[str], scores: bool = True) -> bytes:
    hits = [[Passage(f"{q}-{i}", f'"{q}"\ntext {i}', 1.0 - i / 10) for i in range(2)]
            for q in queries]  # fmt: skip
    return json.dumps({"result": [encode_hits(h, scores) for h in hits]}).encode()


def test_retries_5xx_then_succeeds() -> None:
    def respond(body: dict[str, Any], n: int) -> Reply:
        return (503, b"warming up") if n <= 2 else (200, ok(body["queries"]))

    with scripted_server(respond) as received:
        url = received.pop(0)["url"]
        remote = RemoteRetriever(f"{url}/retrieve", retries=3, backoff=0.01)
        [hits] = remote.search(["q"], topk=2)
    assert [h.id for h in hits] == ["q-0", "q-1"] and hits[0].score == pytest.approx(1.0)
    assert len(received) == 3  # two failures, one success
    assert received[-1] == {"path": "/retrieve", "queries": ["q"], "topk": 2, "return_scores": True}


def test_a_rate_limited_request_is_retried() -> None:
    def respond(body: dict[str, Any], n: int) -> Reply:
        return (429, b"slow down") if n == 1 else (200, ok(body["queries"]))

    with scripted_server(respond) as received:
        url = received.pop(0)["url"]
        [hits] = RemoteRetriever(url, retries=2, backoff=0.01).search(["q"], topk=2)
    assert [h.id for h in hits] == ["q-0", "q-1"] and len(received) == 2


def test_gives_up_after_retries_with_url_status_and_body() -> None:
    with scripted_server(lambda body, n: (500, b'{"detail": "index is corrupt"}')) as received:
        url = received.pop(0)["url"]
        with pytest.raises(RetrieverError) as info:
            RemoteRetriever(url, retries=2, backoff=0.0).search(["q"])
    message = str(info.value)
    assert f"{url}/retrieve" in message and "3 attempts" in message
    assert "HTTP 500" in message and "index is corrupt" in message
    assert len(received) == 3


def test_client_error_is_not_retried() -> None:
    with scripted_server(lambda body, n: (422, b'{"detail": "topk must be >= 1"}')) as received:
        url = received.pop(0)["url"]
        with pytest.raises(RetrieverError, match=r"HTTP 422: .*topk must be >= 1"):
            RemoteRetriever(url, retries=5, backoff=0.0).search(["q"])
    assert len(received) == 1


def test_connection_refused_is_retried_then_reported() -> None:
    url = f"http://127.0.0.1:{free_port()}/retrieve"  # nothing listens there
    with pytest.raises(RetrieverError, match=r"failed after 3 attempts; last: ConnectError"):
        RemoteRetriever(url, retries=2, backoff=0.01, timeout=2).search(["q"])


def test_accepts_servers_that_answer_without_scores() -> None:
    with scripted_server(lambda body, n: (200, ok(body["queries"], scores=False))) as received:
        url = received.pop(0)["url"]
        result = RemoteRetriever(url).search(["a", "b"], topk=2)
    assert [[h.id for h in hits] for hits in result] == [["a-0", "a-1"], ["b-0", "b-1"]]
    assert all(h.score is None for hits in result for h in hits)
    assert result[0][0].title == '"a"' and result[0][0].text == "text 0"


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (b"not json", "invalid JSON"),
        (b'{"results": []}', "'result' key"),
        (b'{"result": [[]]}', "1 lists for 2 queries"),
        (b'{"result": [[], {"id": "x"}]}', r"result\[1\] must be a list"),
        (b'{"result": [[], [{"id": "x"}]]}', r"result\[1\]\[0\]: document has no string"),
        (b'{"result": [[], [{"document": {"id": "x", "contents": "c"}, "score": "high"}]]}',
         "'score' must be a number"),
    ],
)  # fmt: skip
def test_malformed_response_is_a_clear_error(payload: bytes, match: str) -> None:
    with scripted_server(lambda body, n: (200, payload)) as received:
        url = received.pop(0)["url"]
        with pytest.raises(RetrieverError, match=match) as info:
            RemoteRetriever(url, retries=0).search(["a", "b"])
    assert url in str(info.value)
    assert len(received) == 1  # a malformed body is not retried


def test_decode_is_lenient_on_harmless_differences() -> None:
    payload = {"result": [[{"id": 7, "contents": '"T"\nx', "title": "extra field"}],
                          [{"document": {"contents": "no id"}, "score": 2}]]}  # fmt: skip
    [[a], [b]] = decode_response(payload, 2)
    assert a == Passage("7", '"T"\nx') and b == Passage("", "no id", 2.0)
    with pytest.raises(ProtocolError):
        decode_response({"result": [[{"document": {"contents": "c"}, "score": True}]]}, 1)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="http"):
        RemoteRetriever("ftp://example.org/retrieve")
    with pytest.raises(ValueError):
        RemoteRetriever("http://127.0.0.1:1", retries=-1)
    remote = RemoteRetriever("http://127.0.0.1:1")
    assert remote.url == "http://127.0.0.1:1/retrieve"
    assert remote.search([], 3) == []  # no request for an empty batch
    with pytest.raises(ValueError, match="topk"):
        remote.search(["q"], 0)


# --- a batch where the server refuses some queries ------------------------------------------------


@pytest.fixture(scope="module")
def short_queries_server(passages: list[Passage]) -> Iterator[LiveServer]:
    """``treegrpo``'s server over BM25 that refuses queries over 64 characters (a 422)."""
    app = create_app(BM25Retriever(passages, use_cache=False), max_query_chars=64)
    with LiveServer(app) as server:
        yield server


def test_a_refused_query_fails_alone(
    short_queries_server: LiveServer, passages: list[Passage]
) -> None:
    queries = ["honey bees and flowers", "Tokyo capital", "x" * 65, "first humans on the Moon"]
    remote = RemoteRetriever(short_queries_server.url, retries=0)
    with remote, pytest.raises(RetrieverError) as info:
        remote.search(queries, topk=2)
    results = info.value.results
    assert results is not None and [hits is None for hits in results] == [0, 0, 1, 0]
    good = [queries[i] for i in (0, 1, 3)]
    local = BM25Retriever(passages, use_cache=False).search(good, topk=2)
    assert [results[i] for i in (0, 1, 3)] == local
    message = str(info.value)
    assert "1 of 4 searches failed" in message and "search 2:" in message
    assert "HTTP 422" in message and "65 characters long" in message


def test_only_request_errors_split_the_batch() -> None:
    with scripted_server(lambda body, n: (404, b'{"detail": "Not Found"}')) as received:
        url = received.pop(0)["url"]
        with pytest.raises(RetrieverError, match="HTTP 404") as info:
            RemoteRetriever(url, retries=0).search(["a", "b", "c"])
    assert info.value.results is None and len(received) == 1  # a wrong URL: asked once


def test_a_batch_refused_throughout_fails_every_search() -> None:
    with scripted_server(lambda body, n: (422, b'{"detail": "no"}')) as received:
        url = received.pop(0)["url"]
        with pytest.raises(RetrieverError, match="4 of 4 searches failed") as info:
            RemoteRetriever(url, retries=0).search(["a", "b", "c", "d"])
    assert info.value.results is None  # nothing answered: the whole call failed
    assert [len(r["queries"]) for r in received] == [4, 2, 1, 1, 2, 1, 1]


def test_halves_of_a_split_batch_are_retried() -> None:
    def respond(body: dict[str, Any], n: int) -> Reply:
        if "bad" in body["queries"]:
            return 422, b'{"detail": "bad query"}'
        return (503, b"busy") if n == 2 else (200, ok(body["queries"]))

    with scripted_server(respond) as received:
        url = received.pop(0)["url"]
        with pytest.raises(RetrieverError) as info:
            RemoteRetriever(url, retries=1, backoff=0.0).search(["good", "bad"], topk=2)
    assert [r["queries"] for r in received] == [["good", "bad"], ["good"], ["good"], ["bad"]]
    results = info.value.results
    assert results is not None and results[1] is None
    assert [h.id for h in results[0] or []] == ["good-0", "good-1"]


def test_partial_results_survive_pickling() -> None:  # Ray carries the error between processes
    error = RetrieverError("1 of 2 searches failed", [[Passage("0", "c")], None])
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error) and copy.results == [[Passage("0", "c")], None]
