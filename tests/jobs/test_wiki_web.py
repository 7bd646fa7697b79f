"""The built-in search URL "wiki:web" (``data.wiki_web``): ``check_data`` takes it, the data
job's toolbox over it is the web warm start's toolbox (same observations), the real site starts
once per process; and the smollm2-web warm start: its settings are the web presets' limits, its
cache key covers every setting, and both presets resolve (``treegrpo train --dry-run``)."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.web_fixtures import ARTICLES
from treegrpo import cli
from treegrpo.data import wiki, wiki_web
from treegrpo.data.web_questions import KINDS
from treegrpo.jobs import presets
from treegrpo.jobs.data import WEB_HELD_OUT, check_data, resolve_questions, web_side
from treegrpo.jobs.presets import DataConfig
from treegrpo.jobs.tools import make_toolbox
from treegrpo.tools.registry import PastCall, Toolbox
from treegrpo.train.yaml_config import apply_config, load_config
from treegrpo.warmstart import protocol as warm_protocol
from treegrpo.warmstart import web
from treegrpo.warmstart.web_demos import WebMix, site_toolbox
from treegrpo.website.local import LocalSite
from treegrpo.website.site import Site

REPO = Path(__file__).parents[2]
PRESETS = ("real-smollm2-web.yaml", "real-smollm2-web-gpu.yaml")
WEB = DataConfig(
    model="smollm2-web",
    train_files=("wiki-web:train",),
    eval_files=("wiki-web:test",),
    tools=("search", "visit"),
    search_url="wiki:web",
    topk=3,
    visit_chars=1200,
)


def test_check_data_takes_the_built_in_search_url() -> None:
    assert check_data(WEB) == []
    assert check_data(replace(WEB, search_url="http://127.0.0.1:8080")) == []
    (problem,) = check_data(replace(WEB, search_url="wiki:webb"))
    assert problem.startswith("data.search_url: wiki:webb: give an http(s):// URL") and (
        "wiki:web)" in problem
    )
    (problem,) = check_data(replace(WEB, search_api="json"))
    assert problem.startswith("data.search_api: wiki:web answers as SearXNG")


def _observations(tools: Toolbox) -> tuple[str, str]:
    (found,) = tools.run("search", [("Who designed the Analytical Engine?", ())])
    history = (PastCall("search", found.argument, found.result),)
    (page,) = tools.run("visit", [("1", history)])
    return found.text, page.text


def test_the_data_jobs_toolbox_is_the_warm_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    site = LocalSite.start(Site(ARTICLES, use_cache=False))
    try:
        monkeypatch.setattr(wiki_web, "_running", site)  # wiki_web() returns it
        job = make_toolbox(WEB, retriever=lambda: pytest.fail("no passage search"))
        warm = site_toolbox(site, WEB.topk, WEB.visit_chars)
        assert job.names == warm.names == ("search", "visit")
        skip = {"client", "fetcher"}
        for a, b in zip(job, warm, strict=True):  # every setting but the clients
            assert type(a) is type(b)
            assert {k: v for k, v in vars(a).items() if k not in skip} == {
                k: v for k, v in vars(b).items() if k not in skip
            }
        assert _observations(job) == _observations(warm)
        assert "http://wiki.test/wiki/Analytical_Engine" in _observations(job)[0]
    finally:
        site.close()


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec(wiki.PACKAGE) is None, reason=wiki.INSTALL_HINT)
def test_the_real_site_starts_once_and_answers() -> None:
    site = wiki_web.wiki_web()
    assert wiki_web.wiki_web() is site and site.public_url == "http://wiki.test"
    assert httpx.get(f"{site.url}/healthz").json()["articles"] == len(wiki.load_articles())
    found, page = _observations(site_toolbox(site, 3, 1200))
    urls = [line for line in found.split("\n") if "://" in line]
    assert len(urls) == 3 and all(u.startswith("http://wiki.test/wiki/") for u in urls)
    assert f"URL: {urls[0]}" in page and site.address not in found + page


def test_the_warm_start_is_played_with_the_presets_limits() -> None:
    cfg = web.WebWarmStartConfig()
    assert cfg.held_out_share == WEB_HELD_OUT
    for name in PRESETS:
        data = load_config(REPO / "configs" / name, presets.TRAIN_SECTIONS)["data"]
        assert data.model == "smollm2-web" and data.tools == ("search", "visit"), name
        assert data.search_url == "wiki:web" and check_data(data) == [], name
        assert data.train_files == ("wiki-web:train",)
        assert data.eval_files in (("wiki-web:test",), tuple(f"wiki-web:test:{k}" for k in KINDS))
        got = (data.topk, data.visit_chars, data.max_obs_tokens, data.max_turns, data.max_context)
        want = (cfg.topk, cfg.visit_chars, cfg.sft.max_obs_tokens, cfg.max_turns, cfg.max_context)
        assert got == want, name


def test_the_cache_key_covers_every_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries: list[Path] = []

    def record(entry: Path, build: Any, meta: dict[str, Any]) -> bool:
        entries.append(entry)
        return True

    monkeypatch.setattr(warm_protocol, "cached_dir", record)  # where cached_build calls it
    cfg = web.WebWarmStartConfig()
    variants = [
        cfg,
        cfg,
        replace(cfg, topk=5),
        replace(cfg, visit_chars=1000),
        replace(cfg, max_turns=3),
        replace(cfg, max_context=2048),
        replace(cfg, held_out_share=0.1),
        replace(cfg, mix=WebMix(skip=0.2)),
        replace(cfg, sft=replace(cfg.sft, steps=10)),
        replace(cfg, sft=replace(cfg.sft, max_obs_tokens=256)),
    ]
    for v in variants:
        assert web.web_warm_start(tmp_path / "base", v, tmp_path / "cache").parent.name == "web"
    assert entries[0] == entries[1] and len(set(entries)) == len(variants) - 1
    monkeypatch.setattr(web, "FORMAT_VERSION", web.FORMAT_VERSION + 1)
    web.web_warm_start(tmp_path / "base", cfg, tmp_path / "cache")
    assert entries[-1] != entries[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", PRESETS)
def test_the_web_presets_resolve(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    preset = REPO / "configs" / name
    out = tmp_path / "run"
    cli.main(["train", "--config", str(preset), "--dry-run", "--run.out-dir", str(out)])
    printed = capsys.readouterr().out
    assert printed.startswith("# treegrpo train --dry-run: the data job")
    cfg = apply_config(yaml.safe_load(printed), presets.TRAIN_SECTIONS, "stdout")
    assert cfg == {**load_config(preset, presets.TRAIN_SECTIONS), "run": cfg["run"]}
    assert not out.exists()


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec(wiki.PACKAGE) is None, reason=wiki.INSTALL_HINT)
def test_the_kind_sets_split_each_side_by_kind() -> None:
    for side in ("train", "test"):
        whole = web_side(side)
        parts = {k: resolve_questions([f"wiki-web:{side}:{k}"]) for k in KINDS}
        assert all(q.kind == k for k, part in parts.items() for q in part)
        assert sorted(q.uid for part in parts.values() for q in part) == sorted(
            q.uid for q in whole
        )
    assert len(parts["link"]) == 48  # the preset evaluates every held-out link question
