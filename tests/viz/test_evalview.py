"""The evaluation page (``viz.evalview``): one chain per question, its steps and observations,
the answer beside the gold ones, filters' data, no external URL."""

from __future__ import annotations

import json
from pathlib import Path

from treegrpo import cli
from treegrpo.viz.evalview import chain_steps, render_eval, write_eval_pages

RESPONSE = (
    "<think> Kibo's boss </think><search> Kibo's boss </search>\n\n<information>Doc 1(Title: "
    '"Kibo") Kibo\'s boss is Vivo.</information>\n\n<think> Vivo </think><answer> Vivo </answer>'
)
REPORT = {
    "overall": {"em": 0.5, "n": 2},
    "rows": [
        {
            "question": "Who is Kibo's boss?",
            "golds": "['Vivo']",
            "answer": "Vivo",
            "em": "1.0",
            "hops": "1",
            "tool_calls": "1.0",
            "response": RESPONSE,
        },
        {
            "question": "Who is Lumo's boss's friend?",
            "golds": "['Tano', 'T.']",
            "answer": "Pio",
            "em": "0.0",
            "hops": "2",
            "tool_calls": "0.0",
            "response": "<answer> Pio </answer>",
        },
    ],
}


def test_chain_steps_cut_at_observations() -> None:
    steps = chain_steps(RESPONSE)
    assert [bool(obs) for _, obs in steps] == [True, False]
    assert steps[0][0].endswith("</search>") and "Kibo's boss is Vivo." in steps[0][1]
    assert steps[1][0] == "<think> Vivo </think><answer> Vivo </answer>"


def test_the_page_shows_each_chain_with_its_gold(tmp_path: Path) -> None:
    page = render_eval(REPORT, "run: eval-after")
    assert page.count('<section class="q"') == 2
    assert 'data-em="1" data-hops="1"' in page and 'data-em="0" data-hops="2"' in page
    assert 'class="right">Vivo<' in page and 'class="wrong">Pio<' in page
    assert 'class="gold">Tano, T.<' in page
    assert "Kibo&#x27;s boss is Vivo." in page and "<summary>observation</summary>" in page
    assert "http://" not in page and "https://" not in page
    (tmp_path / "eval-after.json").write_text(json.dumps(REPORT))
    (tmp_path / "eval-before.json").write_text(json.dumps({"overall": {}}))  # no rows: no page
    assert [p.name for p in write_eval_pages(tmp_path)] == ["eval-after.html"]
    cli.main(["view", str(tmp_path)])  # an eval directory: its pages, no run report
    assert (tmp_path / "view" / "eval-after.html").is_file()
    assert not (tmp_path / "report.html").exists()


def test_model_output_on_the_page_is_text_never_markup() -> None:
    """Model output is adversarial: an answer or step that holds HTML or a script must show as
    text (escaped), never run in the browser that opens the page."""
    evil = '"><img src=x onerror=alert(1)><script>alert(2)</script>'
    row = {**REPORT["rows"][1], "answer": evil, "response": f"<answer> {evil} </answer>"}
    page = render_eval({"overall": REPORT["overall"], "rows": [row]}, "evil")
    assert "<script>alert(2)" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page
