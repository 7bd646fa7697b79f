"""The tree page in a real browser: headless Chromium (Debian's package, installed by
`make setup`) driven by Selenium opens a page, expands a node, filters by reward and reads the
result from the DOM; the screenshot goes to ``test-artifacts/`` (``$TREEGRPO_ARTIFACTS``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from treegrpo.viz.trees import render_step

pytestmark = pytest.mark.slow


def _node(
    id: int, parent: int, depth: int, action: str = "", text: str = "", **leaf: Any
) -> dict[str, Any]:
    node: dict[str, Any] = {
        "id": id,
        "parent": parent,
        "depth": depth,
        "leaf": bool(leaf),
        "kept": bool(leaf),
        "n_leaves": 0,
        "sum_adv": 0.0,
        "mean_adv": None,
    }
    if depth:
        node |= {
            "text": f"<think>step {id}</think>",
            "action": action,
            "action_text": text,
            "observation": f"passage for {text}" if action == "search" else "",
            "finish": "stop",
        }
    return node | leaf


def _leaf(reward: float, adv: float, searches: int) -> dict[str, float]:
    return {
        "reward": reward,
        "em": reward,
        "tool_calls": searches,
        "adv_intra": adv / 2,
        "adv_inter": adv / 2,
        "adv": adv,
    }


PAGE = {
    "step": 3,
    "algo": {"algo": "tree", "m": 1, "n": 2, "l": 1},
    "prompts": [
        {
            "index": 0,
            "question": "Where was Alan born?",
            "golds": ["Rome"],
            "trees": [
                {
                    "tree": 0,
                    "nodes": [
                        _node(0, -1, 0),
                        _node(1, 0, 1, "search", "Alan born"),
                        _node(2, 1, 2, "answer", "Rome", **_leaf(1.0, 1.4, 1)),
                        _node(3, 1, 2, "answer", "Oslo", **_leaf(0.0, -0.7, 1)),
                        _node(4, 0, 1, "answer", "Lima", **_leaf(0.0, -0.7, 0)),
                    ],
                }
            ],
        },
    ],
}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail("chromium and chromedriver are missing: run `make setup` (Debian packages)")
    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900"):
        opts.add_argument(arg)
    opts.binary_location = chromium
    drv = webdriver.Chrome(service=Service(driver), options=opts)
    yield drv
    drv.quit()


def test_a_page_expands_filters_and_shows_the_right_text(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    page = tmp_path / "step.html"
    page.write_text(render_step(PAGE, title="run"))
    browser.get(page.as_uri())
    assert "run: step 3" in browser.find_element(By.TAG_NAME, "h1").text
    assert "branch ×2" in browser.find_element(By.TAG_NAME, "body").text

    thought = browser.find_elements(By.CSS_SELECTOR, "details")[0]
    assert not thought.find_element(By.TAG_NAME, "pre").is_displayed()  # collapsed
    thought.find_element(By.TAG_NAME, "summary").click()
    assert thought.get_attribute("open") is not None
    assert thought.find_element(By.TAG_NAME, "pre").text == "<think>step 1</think>"

    leaves = browser.find_elements(By.CSS_SELECTOR, "li.kept")
    assert [li.get_attribute("data-reward") for li in leaves] == ["1.0", "0.0", "0.0"]
    Select(browser.find_element(By.ID, "reward")).select_by_value("pos")
    shown = [li for li in leaves if li.value_of_css_property("opacity") == "1"]
    assert [li.get_attribute("data-reward") for li in shown] == ["1.0"]
    assert "reward 1" in shown[0].text and "total +1.40" in shown[0].text

    Select(browser.find_element(By.ID, "reward")).select_by_value("all")
    box = browser.find_element(By.ID, "q")
    box.send_keys("oslo")
    shown = [li for li in leaves if li.value_of_css_property("opacity") == "1"]
    assert [li.get_attribute("data-reward") for li in shown] == ["0.0"] and "Oslo" in shown[0].text

    artifacts = Path(os.environ.get("TREEGRPO_ARTIFACTS", "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "tree-page.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
