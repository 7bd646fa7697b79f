"""Rollout trees as self-contained HTML pages (``treegrpo view``; CSS and JavaScript inline): a
page per kept step (``forests/step-NNNNNN.json``, from ``rollout.snapshot``). What a page shows:
docs/configuration.md, "The run directory"."""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em}h2{font-size:1.1em;margin:1.2em 0 .3em}
.controls{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #ddd}
.controls label{margin-right:1em}
ul.tree{list-style:none;padding-left:1.4em;border-left:1px dotted #bbb;margin:.2em 0}
li.node{margin:.25em 0}
.head{display:inline-block;padding:.1em .4em;border-radius:4px}
.action{font-family:ui-monospace,monospace}
.badge{font-size:.8em;padding:0 .35em;border-radius:3px;background:#eee;margin-left:.4em}
.branch{background:#ffe08a}.why{background:#e6dcf5}.leaf{background:#cde}.r1{background:#b7e4b0}.r0{background:#f3c0c0}
.adv{font-size:.85em;color:#444;margin-left:.4em}
details{margin-left:1em}details pre{white-space:pre-wrap;background:#f7f7f7;padding:.4em}
.gold{color:#060}.hidden{display:none}
"""

_JS = """
function applyFilters(){
  const q=document.getElementById('q').value.toLowerCase();
  const rew=document.getElementById('reward').value;
  const pr=document.getElementById('prompt').value;
  const hops=document.getElementById('hops').value;
  const qh=document.getElementById('qhops').value;
  document.querySelectorAll('section.prompt').forEach(sec=>{
    const showPrompt=(pr==='all'||sec.dataset.prompt===pr)&&(qh==='all'||sec.dataset.hops===qh);
    let any=false;
    sec.querySelectorAll('li.kept').forEach(li=>{
      const r=parseFloat(li.dataset.reward);
      let ok=(rew==='all')||(rew==='pos'&&r>0)||(rew==='zero'&&r<=0);
      ok=ok&&(hops==='all'||li.dataset.searches===hops);
      ok=ok&&(!q||li.dataset.path.includes(q));
      li.style.opacity=ok?'1':'0.25';
      any=any||ok;
    });
    sec.classList.toggle('hidden',!(showPrompt&&(any||(!q&&rew==='all'&&hops==='all'))));
  });
}
document.addEventListener('DOMContentLoaded',()=>{
  ['q','reward','prompt','hops','qhops'].forEach(id=>{
    const el=document.getElementById(id);el.addEventListener('input',applyFilters);
    el.addEventListener('change',applyFilters);});
});
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def html_page(title: str, css: str, body: str, js: str = "") -> str:
    """A self-contained HTML document titled ``title``, with ``css`` and ``js`` inline."""
    script = f"<script>{js}</script>" if js else ""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{css}</style>{script}</head><body>{body}</body></html>"
    )


def filter_select(label: str, key: str, options: Sequence[Any]) -> str:
    """``<select id=key>`` labelled ``label``: "all", then ``options`` (values or (value, text))."""
    pairs = [o if isinstance(o, tuple) else (o, o) for o in options]
    items = "".join(f'<option value="{_e(v)}">{_e(text)}</option>' for v, text in pairs)
    all_ = '<option value="all">all</option>'
    return f'<label>{label} <select id="{key}">{all_}{items}</select></label>'


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:+.2f}"


def _colour(mean: float | None) -> str:
    """Background for a node by its mean descendant advantage: green > 0, red < 0."""
    if mean is None or mean == 0:
        return "transparent"
    a = min(abs(mean), 2.0) / 2.0 * 0.6 + 0.1
    return f"rgba(0,160,0,{a:.2f})" if mean > 0 else f"rgba(210,0,0,{a:.2f})"


def _node_html(node: dict[str, Any], children: dict[int, list[dict[str, Any]]], path: str) -> str:
    kids = children.get(node["id"], [])
    parts = (node.get(k, "") for k in ("text", "action_text", "observation"))
    text = " ".join(parts).lower()  # what the search box matches, along the path to a leaf
    path = f"{path} {text}"
    classes = ["node"] + (["kept"] if node["kept"] else [])
    attrs = ""
    if node["kept"]:
        searches = int(node.get("tool_calls", 0))  # executed searches on the leaf's path
        attrs = (
            f' data-reward="{node["reward"]}" data-searches="{searches}"'
            f' data-path="{_e(path.strip())}"'
        )
    badges = ""
    if len(kids) > 1:
        badges += f'<span class="badge branch">branch ×{len(kids)}</span>'
    for reason, times in Counter(node.get("expansions", [])).items():
        count = f" ×{times}" if times > 1 else ""
        because = f": {_e(reason)}" if reason else ""
        badges += f'<span class="badge why">expanded{count}{because}</span>'
    if node["depth"] == 0:
        label = '<span class="action">(prompt)</span>'
    else:
        kind = node.get("action", "")
        label = f'<span class="action">{_e(kind)}: {_e(node.get("action_text", ""))}</span>'
        status = node.get("tool_status", "")
        if status in ("error", "failed"):  # the call went wrong: the observation says how
            badges += f'<span class="badge r0">{_e(kind)} {status}</span>'
    if node["kept"]:
        r = node["reward"]
        badges += f'<span class="badge leaf {"r1" if r > 0 else "r0"}">reward {r:g}</span>'
        batch = f", batch {_fmt(node['adv_batch'])}" if "adv_batch" in node else ""
        badges += (
            f'<span class="adv">Â intra {_fmt(node["adv_intra"])}, inter '
            f"{_fmt(node['adv_inter'])}{batch}, total {_fmt(node['adv'])}</span>"
        )
    elif node["n_leaves"]:
        badges += (
            f'<span class="adv">Σ Â {_fmt(node["sum_adv"])}, mean {_fmt(node["mean_adv"])} '
            f"over {node['n_leaves']} leaves</span>"
        )
    out = (
        f'<li class="{" ".join(classes)}" data-node="{node["id"]}"{attrs}><span class="head" '
        f'style="background:{_colour(node["mean_adv"])}">{label}</span>{badges}'
    )
    if node["depth"] > 0:
        out += f"<details><summary>thought</summary><pre>{_e(node['text'])}</pre></details>"
        if node.get("observation"):
            what = f"{node['action']} result" if node.get("tool_status") else "observation"
            out += (
                f"<details><summary>{_e(what)}</summary><pre>{_e(node['observation'])}</pre>"
                "</details>"
            )
    if kids:
        out += '<ul class="tree">' + "".join(_node_html(k, children, path) for k in kids) + "</ul>"
    return out + "</li>"


def _tree_html(tree: dict[str, Any]) -> str:
    children: dict[int, list[dict[str, Any]]] = {}
    roots = []
    for n in tree["nodes"]:
        if n["parent"] < 0:
            roots.append(n)
        else:
            children.setdefault(n["parent"], []).append(n)
    body = "".join(_node_html(r, children, "") for r in roots)
    return f'<h3>tree {tree["tree"]}</h3><ul class="tree">{body}</ul>'


def render_step(data: dict[str, Any], title: str = "treegrpo") -> str:
    """One kept step's page: ``data`` as the trainer writes ``forests/step-NNNNNN.json``."""
    prompts = data["prompts"]
    kept = [n for p in prompts for t in p["trees"] for n in t["nodes"] if n["kept"]]
    searches = sorted({int(n.get("tool_calls", 0)) for n in kept})
    prompt_options = [(p["index"], f"{p['index']}: {p['question'][:60]}") for p in prompts]
    question_hops = sorted({int(p.get("hops", 0)) for p in prompts} - {0})
    algo = data.get("algo", {})
    keys = ("algo", "m", "n", "l", "k", "expansion")
    shape = ", ".join(f"{k}={algo[k]}" for k in keys if k in algo)
    sections = []
    for p in prompts:
        golds = ", ".join(_e(g) for g in p["golds"])
        trees = "".join(_tree_html(t) for t in p["trees"])
        sections.append(
            f'<section class="prompt" data-prompt="{p["index"]}" data-hops="{p.get("hops", 0)}">'
            f"<h2>prompt {p['index']}: "
            f'{_e(p["question"])}</h2><div>gold: <span class="gold">{golds}</span></div>'
            f"{trees}</section>"
        )
    body = (
        f"<h1>{_e(title)}: step {data['step']}</h1><div>{_e(shape)}</div>"
        '<div class="controls"><label>search <input id="q" type="search"></label>'
        + filter_select("reward", "reward", [("pos", "> 0"), ("zero", "0")])
        + filter_select("prompt", "prompt", prompt_options)
        + filter_select("question hops", "qhops", question_hops)
        + filter_select("searches", "hops", searches)
        + "</div>"
        + "".join(sections)
    )
    return html_page(f"{title} step {data['step']}", _CSS, body, _JS)


def write_pages(run_dir: Path) -> list[Path]:
    """A page per kept step of ``run_dir`` (``forests/*.json``) and an index, under
    ``run_dir/view``; returns the pages, the index first."""
    run_dir = Path(run_dir)
    snapshots = sorted((run_dir / "forests").glob("step-*.json"))
    if not snapshots:
        raise FileNotFoundError(
            f"{run_dir / 'forests'}: no kept forests (a run keeps them every "
            "--run.forests-every steps; 0 turns it off)"
        )
    out = run_dir / "view"
    out.mkdir(parents=True, exist_ok=True)
    pages = []
    for snap in snapshots:
        page = out / f"{snap.stem}.html"
        page.write_text(render_step(json.loads(snap.read_text()), title=run_dir.name))
        pages.append(page)
    index = out / "index.html"
    index.write_text(_index_html(run_dir.name, [p.name for p in pages]))
    return [index, *pages]


def _index_html(title: str, names: Sequence[str]) -> str:
    links = "".join(f'<li><a href="{_e(n)}">{_e(n[:-5])}</a></li>' for n in names)
    return html_page(title, _CSS, f"<h1>{_e(title)}: kept steps</h1><ul>{links}</ul>")
