"""MCP tools against real MCP server processes on this machine: the shipped wiki server over
stdio and streamable HTTP, and a test server (tests/tools/mcp_test_server.py) for concurrency,
timeouts and odd schemas. Every call goes through ``Toolbox.run``, as the rollout makes it."""

from __future__ import annotations

import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.live import free_port
from treegrpo.agent.prompt import ToolLine, instruction_text
from treegrpo.tools.mcp.client import McpServer, McpTools, mcp_tools
from treegrpo.tools.registry import Outcome, Toolbox

pytestmark = pytest.mark.slow  # every test talks to a server process

TEST_SERVER = str(Path(__file__).with_name("mcp_test_server.py"))


MCP_SERVERS = ("treegrpo.tools.mcp.server", "mcp_test_server")
"""What a server process's command line holds: our MCP server's module, or the test server."""


def server_processes() -> list[psutil.Process]:
    """This test process's MCP server children (stdio servers, or HTTP ones the test ran)."""
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            if any(n in part for n in MCP_SERVERS for part in child.cmdline()):
                out.append(child)
        except psutil.NoSuchProcess:
            pass
    return out


def pids() -> set[int]:
    return {p.pid for p in server_processes()}


def wiki_config(corpus: Path, cache: Path, **kwargs: object) -> McpServer:
    args = ("-m", "treegrpo.tools.mcp.server", "--corpus", str(corpus), "--cache-dir", str(cache))
    return McpServer("wiki", command=sys.executable, args=args, **kwargs)  # type: ignore[arg-type]


def run(box: Toolbox, tool: str, *texts: str) -> list[Outcome]:
    return box.run(tool, [(t, ()) for t in texts])


@pytest.fixture(scope="module")
def wiki_corpus(tmp_path_factory: pytest.TempPathFactory, passages: list) -> Path:  # type: ignore[type-arg]
    from treegrpo.retrieval.corpus import write_corpus

    path = tmp_path_factory.mktemp("mcp") / "corpus.jsonl"
    write_corpus(path, passages)
    return path


@pytest.fixture(scope="module")
def wiki(wiki_corpus: Path) -> Iterator[McpTools]:
    """The shipped server over the twenty test passages, over stdio, for the whole module."""
    with mcp_tools([wiki_config(wiki_corpus, wiki_corpus.parent / "cache")]) as tools:
        yield tools


@pytest.fixture(scope="module")
def box(wiki: McpTools) -> Toolbox:
    return Toolbox(wiki.tools)


def test_tools_as_the_registry_and_prompt_see_them(box: Toolbox) -> None:
    assert box.names == ("wiki_search", "wiki_page")
    search, page = box["wiki_search"], box["wiki_page"]
    assert search.usage == '{"query": str, "topk"?: int}'
    assert page.usage == '{"title": str}'
    assert search.description == (
        "Searches Wikipedia by keywords; returns the best passages with their titles."
    )
    prompt = instruction_text("q", [ToolLine(t.name, t.usage, t.description) for t in box])
    assert '<wiki_page> {"title": str} </wiki_page>: Returns the full text of the' in prompt


def test_calls_give_results_and_errors(box: Toolbox) -> None:
    ok, two, bare = run(
        box, "wiki_search", '{"query": "Eiffel tower Paris"}', '{"query": "water", "topk": 2}',
        "Marie Curie radioactivity",
    )  # fmt: skip
    assert ok.status == "ok" and ok.text.startswith('Doc 1(Title: "Eiffel Tower") The Eiffel')
    assert ok.argument == {"query": "Eiffel tower Paris"}
    assert two.status == "ok" and two.text.count("Doc ") == 2
    assert bare.status == "ok" and bare.argument == {"query": "Marie Curie radioactivity"}
    assert "Marie Curie" in bare.text
    page, missing = run(box, "wiki_page", '{"title": "Chess"}', '{"title": "Atlantis"}')
    assert page.status == "ok" and page.text.startswith("Chess is a board game")
    assert missing.status == "error"
    assert missing.text == "wiki_page: no article titled 'Atlantis'; search for it first"


def test_refused_arguments_never_reach_the_server(box: Toolbox) -> None:
    broken, low, wrong, absent = run(
        box, "wiki_search", '{"query": "Paris"', '{"query": "Paris", "topk": 0}',
        '{"query": 7}', '{"topic": "Paris"}',
    )  # fmt: skip
    assert all(o.status == "error" and o.argument is None for o in (broken, low, wrong, absent))
    assert broken.text.startswith("wiki_search: invalid JSON (Expecting")
    assert broken.text.endswith('write {"query": str, "topk"?: int}')
    assert low.text == 'wiki_search: argument "topk": 0 is less than the minimum of 1'
    assert wrong.text == "wiki_search: argument \"query\": 7 is not of type 'string'"
    assert absent.text == "wiki_search: 'query' is a required property"


def test_a_pickled_toolbox_opens_its_own_session(box: Toolbox) -> None:
    running = pids()
    copy = pickle.loads(pickle.dumps(box))  # what a Ray worker gets
    search, page = copy["wiki_search"], copy["wiki_page"]
    assert search.connection is page.connection is not box["wiki_search"].connection
    assert len(pids() - running) == 1
    assert copy.run("wiki_page", [("Coffee", ())])[0].text.startswith("Coffee is a brewed")
    search.connection.close()
    assert pids() == running


def test_the_cli_command_serves_over_stdio(wiki_corpus: Path) -> None:
    args = ("-m", "treegrpo.cli", "serve-mcp", "--corpus", str(wiki_corpus))
    cache = ("--cache-dir", str(wiki_corpus.parent / "cache"))
    config = McpServer("cli", command=sys.executable, args=args + cache)
    with mcp_tools([config]) as tools:
        [page] = run(Toolbox(tools.tools), "wiki_page", "Sahara")
    assert page.text.startswith("The Sahara is the largest hot desert")


@pytest.fixture(scope="module")
def test_tools() -> Iterator[McpTools]:
    config = McpServer("test", command=sys.executable, args=(TEST_SERVER,), timeout_s=1.0)
    with mcp_tools([config]) as tools:
        yield tools


def test_a_batch_is_sent_at_once(test_tools: McpTools) -> None:
    box = Toolbox(test_tools.tools)
    outcomes = run(box, "meet", *(f'{{"group": "a", "n": {6}}}' for _ in range(6)))
    assert [o.text for o in outcomes] == ["6 together"] * 6


def test_a_slow_call_fails_and_the_session_stays(test_tools: McpTools) -> None:
    box = Toolbox(test_tools.tools)
    [pid] = [p.pid for p in server_processes() if TEST_SERVER in p.cmdline()]
    slow, quick = run(box, "sleep", '{"seconds": 3}', '{"seconds": 0}')
    assert (slow.status, slow.text) == ("failed", "The sleep tool did not answer.")
    assert quick.status == "ok" and quick.text == "awake"
    assert run(box, "sleep", '{"seconds": 0}')[0].status == "ok"
    assert [p.pid for p in server_processes() if TEST_SERVER in p.cmdline()] == [pid]


def test_nested_schema_and_an_odd_name(test_tools: McpTools) -> None:
    box = Toolbox(test_tools.tools)
    weather = box["get_weather_now"]
    assert weather.usage == (
        '{"place": {"city": str, "country"?: str|null}, "units"?: "metric"|"imperial"}'
    )
    assert weather.description == "Current weather for a place."
    ok, bad = run(
        box, "get_weather_now", '{"place": {"city": "Oslo"}}', '{"place": {"city": "Oslo"}, '
        '"units": "kelvin"}',
    )  # fmt: skip
    assert ok.text == "sunny in Oslo (metric)"
    assert bad.text.startswith("get_weather_now: argument \"units\": 'kelvin' is not one of")


def test_a_killed_server_fails_its_calls_then_reconnects() -> None:
    config = McpServer("test", command=sys.executable, args=(TEST_SERVER,), timeout_s=20.0)
    running = pids()
    with mcp_tools([config]) as tools:
        box = Toolbox(tools.tools)
        [before] = [p for p in server_processes() if p.pid not in running]
        outcomes: list[Outcome] = []
        step = threading.Thread(
            target=lambda: outcomes.extend(run(box, "sleep", *['{"seconds": 15}'] * 3))
        )
        step.start()
        time.sleep(0.3)  # the calls are in flight (were they not, they would fail alike)
        before.kill()
        step.join(timeout=15)
        assert [o.status for o in outcomes] == ["failed"] * 3
        assert run(box, "sleep", '{"seconds": 0}')[0].text == "awake"
        [after] = pids() - running
        assert after != before.pid
    assert pids() == running


def test_close_leaves_no_process_and_configs_are_checked(wiki_corpus: Path) -> None:
    cache = wiki_corpus.parent / "cache"
    running = pids()
    tools = mcp_tools(
        [
            wiki_config(wiki_corpus, cache, prefix="wiki.", tools=("wiki_page",)),
            McpServer("test", command=sys.executable, args=(TEST_SERVER,), tools=("sleep",)),
        ]
    )
    assert [t.name for t in tools] == ["wiki.wiki_page", "sleep"]
    assert len(pids() - running) == 2
    tools.close()
    tools.close()
    assert pids() == running
    with pytest.raises(ValueError, match="either command"):
        McpServer("none")
    with pytest.raises(ValueError, match="no tool nope"):
        mcp_tools([McpServer("t", command=sys.executable, args=(TEST_SERVER,), tools=("nope",))])
    with pytest.raises(ValueError, match="give their servers a prefix"):
        mcp_tools([wiki_config(wiki_corpus, cache), wiki_config(wiki_corpus, cache)])
    with pytest.raises(ConnectionError, match=r"did not start: .*Connection closed"):
        mcp_tools([wiki_config(wiki_corpus.parent / "missing.jsonl", cache)])
    assert pids() == running


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, "the MCP server exited"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"no MCP server on port {port}")


def http_server(corpus: Path, port: int) -> subprocess.Popen[bytes]:
    args = ["--corpus", str(corpus), "--cache-dir", str(corpus.parent / "cache")]
    command = [sys.executable, "-m", "treegrpo.tools.mcp.server", *args]
    process = subprocess.Popen([*command, "--transport", "http", "--port", str(port)])
    wait_for_port(port, process)
    return process


def test_streamable_http(wiki_corpus: Path) -> None:
    port = free_port()
    process = http_server(wiki_corpus, port)
    try:
        config = McpServer("wiki", url=f"http://127.0.0.1:{port}/mcp", timeout_s=5.0)
        with mcp_tools([config]) as tools:
            box = Toolbox(tools.tools)
            assert box.names == ("wiki_search", "wiki_page")
            [hit] = run(box, "wiki_search", '{"query": "highest mountain", "topk": 1}')
            assert hit.text.startswith('Doc 1(Title: "Mount Everest")')
            process.kill()
            process.wait()
            assert [o.status for o in run(box, "wiki_page", "Chess", "Tokyo")] == ["failed"] * 2
            process = http_server(wiki_corpus, port)
            [page] = run(box, "wiki_page", "Tokyo")  # a bare title: one string argument
            assert page.status == "ok" and page.text.startswith("Tokyo is the capital")
    finally:
        process.kill()
        process.wait()
