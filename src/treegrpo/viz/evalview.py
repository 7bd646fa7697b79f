"""An evaluation as a self-contained HTML page: one chain per question (greedy: one trajectory
each), its steps and observations, and the answer beside the gold ones, from the ``rows`` of an
``eval*.json`` report; filters by right or wrong, hop count and text."""

from __future__ import annotations

import ast
import html
import json
import re
from pathlib import Path
from typing import Any

from treegrpo.viz.trees import filter_select, html_page

_OBS = re.compile(r"(<information>.*?</information>)", re.S)

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
.controls{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #ddd}
.controls label{margin-right:1em}
section.q{border-bottom:1px solid #eee;padding:.4em 0}
.right{color:#060}.wrong{color:#a00}.gold{color:#060}
ol.chain{margin:.2em 0}.step{font-family:ui-monospace,monospace;white-space:pre-wrap}
details pre{white-space:pre-wrap;background:#f7f7f7;padding:.4em}.hidden{display:none}
"""

_JS = """
function applyFilters(){
  const q=document.getElementById('q').value.toLowerCase();
  const em=document.getElementById('em').value, hops=document.getElementById('hops').value;
  document.querySelectorAll('section.q').forEach(s=>{
    let ok=(em==='all'||s.dataset.em===em)&&(hops==='all'||s.dataset.hops===hops);
    ok=ok&&(!q||s.dataset.text.includes(q));
    s.classList.toggle('hidden',!ok);
  });
}
document.addEventListener('DOMContentLoaded',()=>{['q','em','hops'].forEach(id=>{
  const el=document.getElementById(id);el.addEventListener('input',applyFilters);
  el.addEventListener('change',applyFilters);});});
"""


def _golds(value: Any) -> list[str]:
    """Gold answers as a list (the report's CSV-like rows hold the list's repr)."""
    if isinstance(value, list):
        return [str(g) for g in value]
    try:
        parsed = ast.literal_eval(str(value))
    except (ValueError, SyntaxError):
        return [str(value)]
    return [str(g) for g in parsed] if isinstance(parsed, list | tuple) else [str(parsed)]


def chain_steps(response: str) -> list[tuple[str, str]]:
    """The trajectory cut into (model text, observation) pairs at each ``<information>``."""
    parts = [*_OBS.split(response), ""]  # text, observation, …, text, no observation
    pairs = zip(parts[::2], parts[1::2], strict=True)
    return [(t.strip(), obs) for t, obs in pairs if t.strip() or obs]


def render_eval(report: dict[str, Any], title: str) -> str:
    """The page of one evaluation report (``eval.evaluate``'s dict with ``rows``)."""
    rows = report.get("rows") or []
    hops = sorted({str(r.get("hops", "")) for r in rows if r.get("hops", "") != ""})
    sections = []
    for i, r in enumerate(rows):
        right = float(r.get("em", 0)) > 0
        golds = _golds(r.get("golds", []))
        steps = "".join(
            f'<li><span class="step">{html.escape(text)}</span>'
            + (
                f"<details><summary>observation</summary><pre>{html.escape(obs)}</pre></details>"
                if obs
                else ""
            )
            + "</li>"
            for text, obs in chain_steps(str(r.get("response", "")))
        )
        text = f"{r.get('question', '')} {r.get('response', '')}".lower()
        sections.append(
            f'<section class="q" data-em="{1 if right else 0}" '
            f'data-hops="{html.escape(str(r.get("hops", "")))}" data-text="{html.escape(text)}">'
            f"<b>{i + 1}. {html.escape(str(r.get('question', '')))}</b><div>answer: "
            f'<span class="{"right" if right else "wrong"}">{html.escape(str(r.get("answer")))}'
            f'</span> · gold: <span class="gold">{html.escape(", ".join(golds))}</span> · '
            f"searches {html.escape(str(r.get('tool_calls', '')))}</div>"
            f'<ol class="chain">{steps}</ol></section>'
        )
    overall = report.get("overall", {})
    summary = ", ".join(f"{k} {v:.3f}" for k, v in overall.items() if isinstance(v, float))
    body = (
        f"<h1>{html.escape(title)}</h1><div>{len(rows)} questions; {html.escape(summary)}"
        '</div><div class="controls"><label>search <input id="q" type="search"></label>'
        + filter_select("answer", "em", [("1", "right"), ("0", "wrong")])
        + filter_select("hops", "hops", hops)
        + "</div>"
        + "".join(sections)
    )
    return html_page(title, _CSS, body, _JS)


def write_eval_pages(run_dir: Path) -> list[Path]:
    """A page per evaluation report of ``run_dir`` (``eval-*.json``, or the ``eval.json`` of
    ``treegrpo eval``) under ``run_dir/view``."""
    reports = sorted(Path(run_dir).glob("eval*.json"))
    out = Path(run_dir) / "view"
    pages = []
    for path in reports:
        report = json.loads(path.read_text())
        if not isinstance(report, dict) or "rows" not in report:
            continue
        out.mkdir(parents=True, exist_ok=True)
        page = out / f"{path.stem}.html"
        page.write_text(render_eval(report, f"{Path(run_dir).name}: {path.stem}"))
        pages.append(page)
    return pages
