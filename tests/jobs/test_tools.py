"""The data job's tools from its settings: Search-R1's retriever by default; a web agent's
toolbox (web search, visit, find, calculate) working end to end against the offline website
over real HTTP; an MCP server's tools by configuration alone; and the settings that cannot work
refused with what to write instead."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest

from tests.live import LiveServer
from treegrpo.jobs.data import check_data, make_tool
from treegrpo.jobs.presets import DataConfig
from treegrpo.jobs.tools import mcp_servers
from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.retrieval.corpus import make_contents, write_corpus
from treegrpo.tools.registry import PastCall, Toolbox
from treegrpo.train.config import ConfigValueError
from treegrpo.website.corpus import WebArticle
from treegrpo.website.site import Site, create_site_app

ARTICLES = [
    WebArticle(
        "Ada Lovelace",
        "Ada Lovelace was an English mathematician.\nShe was born in London in 1815.",
    ),
    WebArticle("London", "London is the capital of England.\nIt stands on the River Thames."),
    WebArticle(
        "Charles Babbage", "Charles Babbage designed the Analytical Engine with Ada Lovelace."
    ),
]
BASE = {"model": "smollm2", "train_files": ("wiki:train",)}


def test_search_alone_is_search_r1s_retriever(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    write_corpus(corpus, [Passage("0", make_contents("Ada", "Ada was born in London."))])
    tool = make_tool(DataConfig(**BASE, corpus=str(corpus)))  # type: ignore[arg-type]
    assert isinstance(tool, BM25Retriever)
    box = make_tool(DataConfig(**BASE, corpus=str(corpus), tools=("search", "calculate")))  # type: ignore[arg-type]
    assert isinstance(box, Toolbox) and box.names == ("search", "calculate")
    (o,) = box.run("calculate", [("6 * 7", ())])
    assert o.text == "42"


@pytest.mark.slow
def test_a_web_agents_tools_work_against_the_offline_website(tmp_path: Path) -> None:
    site = Site(ARTICLES, cache_dir=tmp_path)
    with LiveServer(create_site_app(site)) as live:
        data = DataConfig(**BASE, tools=("search", "visit", "find"), search_url=live.url)  # type: ignore[arg-type]
        assert check_data(data) == []
        box = make_tool(data)
        assert isinstance(box, Toolbox) and box.names == ("search", "visit", "find")
        (hits,) = box.run("search", [("Ada Lovelace mathematician", ())])
        assert hits.status == "ok" and hits.text.startswith("[1] Ada Lovelace\n")
        assert f"{live.url}/wiki/Ada_Lovelace" in hits.text
        assert "1815" not in hits.text  # the snippet is the first sentence only
        history = (PastCall("search", "Ada Lovelace mathematician", hits.result),)
        (page,) = box.run("visit", [("1 | year of birth", history)])
        assert page.status == "ok" and "born in London in 1815" in page.text
        history += (PastCall("visit", page.argument, page.result),)
        (found,) = box.run("find", [("London", history)])
        assert found.status == "ok" and "1815" in found.text
        (missing,) = box.run("visit", [(f"{live.url}/wiki/Atlantis", ())])
        assert missing.status == "error" and "404" in missing.text
        copy = pickle.loads(pickle.dumps(box))  # as a Ray rollout worker receives it
        assert copy.names == box.names
        assert copy.run("search", [("Ada Lovelace mathematician", ())])[0].text == hits.text
        assert copy.run("visit", [("1 | year of birth", history[:1])])[0].text == page.text


@pytest.mark.slow
def test_an_mcp_servers_tools_come_by_configuration_alone(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    write_corpus(corpus, [Passage("0", make_contents("Ada", "Ada was born in London."))])
    command = f"{sys.executable} -m treegrpo.tools.mcp.server --corpus {corpus}"
    data = DataConfig(**BASE, corpus=str(corpus), mcp_servers=(command,))  # type: ignore[arg-type]
    box = make_tool(data)
    assert isinstance(box, Toolbox)
    with box:  # the toolbox owns the MCP connection: closing it ends the server
        assert box.names == ("search", "wiki_search", "wiki_page")
        (o,) = box.run("wiki_search", [('{"query": "Ada born"}', ())])
        assert o.status == "ok" and "London" in o.text
        connections = {id(t.connection): t.connection for t in box if hasattr(t, "connection")}
        assert len(connections) == 1 and not any(c.closed for c in connections.values())
    assert all(c.closed for c in connections.values())


def test_mcp_servers_are_urls_or_command_lines() -> None:
    http, stdio = mcp_servers(("http://127.0.0.1:8001/mcp", "python -m srv --corpus 'a b.jsonl'"))
    assert (http.url, http.command) == ("http://127.0.0.1:8001/mcp", None)
    assert (stdio.command, stdio.args) == ("python", ("-m", "srv", "--corpus", "a b.jsonl"))


def test_tool_settings_that_cannot_work_are_refused() -> None:
    with pytest.raises(ConfigValueError, match="tools must each be one of"):
        DataConfig(tools=("search", "browse"))
    with pytest.raises(ConfigValueError, match="each tool once"):
        DataConfig(tools=("search", "search"))
    problems = check_data(DataConfig(**BASE, tools=("search", "visit"), corpus="wiki:corpus"))  # type: ignore[arg-type]
    assert any("visit and find open web pages" in p for p in problems)
    problems = check_data(DataConfig(**BASE, search_url="http://x", corpus="wiki:corpus"))  # type: ignore[arg-type]
    assert any("no tool searches passages" in p for p in problems)
    problems = check_data(DataConfig(**BASE, tools=("search", "find"), search_url="http://x"))  # type: ignore[arg-type]
    assert any("find reads the page last visited" in p for p in problems)
    assert check_data(DataConfig(**BASE, search_url="http://x")) == []  # type: ignore[arg-type]
