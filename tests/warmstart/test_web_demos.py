"""Web demonstrations (``warmstart.web_demos``) through the real search and visit tools over a
small site served in-process: each kind calls the tools it should and answers right, the
flawed variants answer wrong, masks are 1 exactly on the agent's own steps, held-out articles
are refused; and on a few real ``wiki-web:train`` questions over the real site."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from dataclasses import replace
from itertools import groupby
from urllib.parse import unquote

import pytest

from tests.web_fixtures import ARTICLES, QUESTIONS, TITLES
from treegrpo.agent.protocol import ToolProtocol
from treegrpo.data import wiki
from treegrpo.data.web_questions import READ
from treegrpo.embedded.demos import Demo
from treegrpo.tools.registry import Toolbox
from treegrpo.warmstart import web_demos as wd
from treegrpo.website.corpus import slug_key
from treegrpo.website.local import LocalSite
from treegrpo.website.site import Site

MAX_OBS, MAX_CONTEXT = 2000, 8000  # a tiny tokenizer spends a token on every few characters
FORMAT_ONLY = 0.2  # the reward of a wrong answer in a valid format: EM 0
BY_UID = {w.question.uid.removeprefix("wiki-web-"): w for w in QUESTIONS}


@pytest.fixture(scope="module")
def site() -> Iterator[LocalSite]:
    running = LocalSite.start(Site(ARTICLES, use_cache=False))
    yield running
    running.close()


@pytest.fixture(scope="module")
def tools(site: LocalSite) -> Toolbox:
    return wd.site_toolbox(site, 3, 1200)


@pytest.fixture(scope="module")
def protocol(tag_tokenizer, tools: Toolbox) -> ToolProtocol:  # type: ignore[no-untyped-def]
    return ToolProtocol(tag_tokenizer, MAX_OBS, tools)


def _steps(protocol: ToolProtocol, demo: Demo) -> list[str]:
    """The agent's steps (the runs of mask 1), decoded."""
    runs = groupby(zip(demo.ids, demo.mask, strict=True), key=lambda p: p[1])
    return [protocol.decode([t for t, _ in run]) for m, run in runs if m == 1]


def _play(uid: str, variant: str, tools: Toolbox, protocol: ToolProtocol) -> Demo:
    w = BY_UID[uid]
    demo = wd.play(w, [TITLES[i] for i in w.touches], variant, tools, protocol, 4, MAX_CONTEXT)
    assert demo is not None, (uid, variant)
    return demo


def test_each_kind_calls_the_tools_it_should_and_answers_right(
    tools: Toolbox, protocol: ToolProtocol
) -> None:
    snippet = _steps(protocol, _play("in-snippet-0", "right", tools, protocol))
    assert (
        len(snippet) == 2
        and "<search> In which year was Ada Lovelace born? </search>" in snippet[0]
    )
    assert snippet[1] == (
        '<think> Result 1 (Ada Lovelace) says: "was an English mathematician born in 1815". '
        "</think><answer> 1815 </answer>"
    )
    visit = _steps(protocol, _play("in-snippet-0", "snippet-visit", tools, protocol))
    assert [s.split("</think>")[1].split(">")[0] for s in visit] == ["<search", "<visit", "<answer"]
    page = _steps(protocol, _play("in-page-2", "right", tools, protocol))
    assert page[1].endswith("<visit> 1 </visit>")  # the result that is Charles Babbage's page
    assert page[2].endswith('"He was born in 1791 in London". </think><answer> London </answer>')
    link = _steps(protocol, _play("link-1-2", "right", tools, protocol))
    assert len(link) == 4 and "(Analytical Engine)" in link[1] and link[1].endswith("</visit>")
    assert link[2].endswith("<visit> http://wiki.test/wiki/Charles_Babbage </visit>")
    assert link[3].endswith("<answer> 1791 </answer>")
    for uid in BY_UID:
        demo = _play(uid, "right", tools, protocol)
        assert demo.reward == 1.0 and demo.flaws == ()  # EM 1, valid format


def test_flawed_variants_answer_without_reading(tools: Toolbox, protocol: ToolProtocol) -> None:
    skip = _play("in-page-2", "skip", tools, protocol)
    steps = _steps(protocol, skip)
    assert len(steps) == 2 and steps[1].endswith("<answer> Charles Babbage </answer>")
    assert skip.flaws == ("skip",) and skip.reward == FORMAT_ONLY
    stop = _play("link-1-2", "stop", tools, protocol)
    steps = _steps(protocol, stop)
    assert len(steps) == 3 and steps[2].endswith("<answer> Charles Babbage </answer>")
    assert stop.flaws == ("stop",) and stop.reward == FORMAT_ONLY


def test_masks_are_one_exactly_on_the_agents_steps(tools: Toolbox, protocol: ToolProtocol) -> None:
    for uid in BY_UID:
        demo = _play(uid, "right", tools, protocol)
        assert len(demo.ids) == len(demo.mask) and set(demo.mask[: demo.prompt_len]) == {0}
        runs = [
            (m, protocol.decode([t for t, _ in run]))
            for m, run in groupby(zip(demo.ids, demo.mask, strict=True), key=lambda p: p[1])
        ][1:]  # after the prompt: step, observation, step, ..., step
        assert [m for m, _ in runs] == [1, 0] * (len(runs) // 2) + [1]
        for m, text in runs:
            if m == 1:
                assert text.startswith("<think>") and re.search(r"</(search|visit|answer)>$", text)
            else:
                assert text.startswith("\n\n<information>") and text.endswith("</information>\n\n")


def test_the_mix_and_held_out_articles(tools: Toolbox, protocol: ToolProtocol) -> None:
    mix = wd.WebMix(in_snippet=0.4, link=0.2)  # of 5: 2 in-snippet (1 visits), 2 in-page, 1 link
    demos = wd.build_web_demos(QUESTIONS, TITLES, tools, protocol, 5, mix, max_context=MAX_CONTEXT)
    counts = {c: len(ds) for c, ds in demos.items()}
    assert counts == {
        "in-snippet": 1,
        "snippet-visit": 1,
        "in-page": 2,
        "read": 0,
        "link": 1,
        "skip": 0,
        "stop": 0,
    }
    with pytest.raises(ValueError, match="held-out"):
        wd.build_web_demos(
            QUESTIONS, TITLES, tools, protocol, 5, mix, held_out=lambda t: t == "Charles Babbage"
        )
    assert wd.build_web_demos(QUESTIONS, TITLES, tools, protocol, 5, mix, max_context=100) == {
        c: [] for c in wd.CATEGORIES
    }  # too long for the context: none


def test_a_share_of_the_in_page_demonstrations_reads_reworded_questions(
    tools: Toolbox, protocol: ToolProtocol
) -> None:
    # one in-page question reworded: its template marks it (data.web_questions.READ)
    w = BY_UID["in-page-3"]
    reworded = replace(w, template=f"{READ}where")
    questions = [q for q in QUESTIONS if q is not w] + [reworded]
    mix = wd.WebMix(in_snippet=0.4, link=0.2, read=0.5)  # of 5: in-page 2, of them 1 reworded
    demos = wd.build_web_demos(questions, TITLES, tools, protocol, 5, mix, max_context=MAX_CONTEXT)
    assert [len(demos[c]) for c in ("in-page", "read")] == [1, 1]
    (demo,) = demos["read"]
    assert "River Thames" in _steps(protocol, demo)[-1] and demo.reward == 1.0
    with pytest.raises(ValueError, match="shares must lie in"):
        wd.WebMix(read=1.5)


def test_reading_the_observations() -> None:
    obs = (
        "\n\n<information>[1] Ada Lovelace\nhttp://wiki.test/wiki/Ada_Lovelace\nAda was born.\n"
        "[2] London\nhttp://wiki.test/wiki/London\n[3] Cut</information>\n\n"
    )
    assert wd.parse_results(obs) == [
        wd.Result(1, "Ada Lovelace", "http://wiki.test/wiki/Ada_Lovelace", "Ada was born."),
        wd.Result(2, "London", "http://wiki.test/wiki/London", ""),
    ]
    assert wd.quote("One. Two three four five six seven eight nine 1815 x", "1815") == (
        "four five six seven eight nine 1815"
    )
    assert wd.quote("Description\nHe was born", "He") == "He" and wd.quote("a", "b") is None
    body = "Title: A 1815\nURL: http://wiki.test/wiki/A\nA was born in 1815.\nLinks:\n- B: http://x"
    assert wd.page_text(body) == "A was born in 1815."
    page = "<information>Title: A\n- Charles Babbage: http://wiki.test/wiki/Charles_Babbage\n"
    assert wd.link_url(page, "Charles Babbage") == "http://wiki.test/wiki/Charles_Babbage"
    assert wd.link_url(page, "Babbage") is None


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec(wiki.PACKAGE) is None, reason=wiki.INSTALL_HINT)
def test_real_train_questions_on_the_real_site(tag_tokenizer) -> None:  # type: ignore[no-untyped-def]
    from treegrpo.data.web_questions import all_web_questions, is_held_out, web_questions
    from treegrpo.data.wiki_web import wiki_web
    from treegrpo.jobs.data import WEB_HELD_OUT

    tools = wd.site_toolbox(wiki_web(), 3, 1200)
    protocol = ToolProtocol(tag_tokenizer, MAX_OBS, tools)
    train = {q.uid for q in web_questions(held_out_share=WEB_HELD_OUT)[0]}
    questions = [w for w in all_web_questions() if w.question.uid in train]
    titles = {a.index: a.title for a in wiki.load_articles()}
    held_out = lambda title: is_held_out(title, 0, WEB_HELD_OUT)  # noqa: E731
    # of 9: 3 in-snippet (1 visits), 4 link (1 skips, 1 stops), 2 in-page (1 skips)
    mix = wd.WebMix(in_snippet=0.3, link=0.4, snippet_visit=0.34, skip=0.34, stop=0.34)
    demos = wd.build_web_demos(
        questions, titles, tools, protocol, 9, mix, 0, 4, MAX_CONTEXT, held_out
    )
    counts = {c: len(ds) for c, ds in demos.items()}
    assert counts == {
        "in-snippet": 2,
        "snippet-visit": 1,
        "in-page": 1,
        "read": 0,
        "link": 2,
        "skip": 2,
        "stop": 1,
    }
    for category, ds in demos.items():
        for demo in ds:
            assert demo.reward == (FORMAT_ONLY if category in ("skip", "stop") else 1.0), category
            text = protocol.decode(demo.ids[demo.prompt_len :])
            visited = [
                slug_key(unquote(s)) for s in re.findall(r"URL: http://wiki\.test/wiki/(\S+)", text)
            ]
            assert bool(visited) == (category not in ("in-snippet", "skip")), category
            assert not any(held_out(t) for t in visited), visited


def test_the_web_warm_start_key_holds_the_reworded_share_only_when_on() -> None:
    from dataclasses import asdict

    from treegrpo.warmstart import web

    before = asdict(web.WebWarmStartConfig())
    del before["mix"]["read"]  # the default's settings as they were before the field
    assert web.WebWarmStartConfig().key() == before
    on = web.WebWarmStartConfig(mix=wd.WebMix(read=0.3))
    assert on.key() == asdict(on) and on.key()["mix"]["read"] == 0.3
