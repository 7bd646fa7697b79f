"""A run's report as one self-contained HTML page (``report.html`` beside ``report.md``), or two
runs side by side (``treegrpo view RUN_A RUN_B``): learning curves (inline PNG), before/after
tables, the configuration and links to the tree pages (``viz.trees``)."""

from __future__ import annotations

import base64
import html
import io
import json
import os.path
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from treegrpo.viz.trees import html_page

CURVES = (
    ("reward/mean", "training reward"),
    ("eval/em", "held-out EM"),
    ("loss/kl", "KL to the reference"),
    ("loss/entropy", "entropy"),
    ("loss/clip_frac", "clip fraction"),
    ("agent/tool_calls_per_leaf", "tool calls per episode"),
    ("time/gen_tokens_per_s", "generated tokens/s"),
    ("adv/uniform_prompts", "share of uniform-reward prompts"),
    ("reward/valid_format", "valid-format share of the leaves"),
    ("agent/broken_turn_leaves", "leaves with a broken turn"),
    (
        ("leaves/right", "leaves/wrong", "leaves/turn_limit", "leaves/no_answer"),
        "leaves by how they ended (right, wrong, turn limit, no answer)",
    ),
    ("offpolicy/abs_logp_gap", "sampler–trainer mean |Δ log p|"),
)
"""metrics.jsonl keys plotted, with titles; a panel of several keys: a line per key (and run)."""

_CSS = (
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;"
    "text-align:right}th{background:#f2f2f2}pre{background:#f7f7f7;padding:.5em;overflow:auto}"
    ".runs{display:flex;gap:2em;flex-wrap:wrap}img{max-width:100%}"
)


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no metrics (is {run_dir} a `treegrpo train` run?)")
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def with_held_out(run_dir: Path) -> list[dict[str, Any]]:
    """The run's metrics plus held-out EM before RL (step 0) and after (the last step), from
    ``eval-before.json`` and ``eval-after.json`` where present, as points of the EM curve."""
    rows = read_metrics(run_dir)
    last = max((r["step"] for r in rows), default=0)
    points = []
    for name, step in (("eval-before.json", 0), ("eval-after.json", last)):
        path = run_dir / name
        if path.is_file():
            em = json.loads(path.read_text()).get("overall", {}).get("em")
            if em is not None:
                points.append({"step": step, "eval/em": float(em)})
    return rows + points


def curves_png(runs: dict[str, list[dict[str, Any]]]) -> bytes:
    """One panel per ``CURVES`` entry, one line per run (shared axes), as PNG bytes."""
    fig = Figure(figsize=(11, 15))
    axes = fig.subplots(len(CURVES) // 2, 2).ravel()
    for ax, (keys, title) in zip(axes, CURVES, strict=True):
        several = not isinstance(keys, str)
        names: tuple[str, ...] = (keys,) if isinstance(keys, str) else tuple(keys)
        for name, rows in runs.items():
            for key in names:
                pts = sorted((r["step"], r[key]) for r in rows if key in r)
                label = f"{name}: {key.split('/')[-1]}" if several else name
                if pts:
                    ax.plot(*zip(*pts, strict=True), "o-" if key == "eval/em" else "-", label=label)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        if several:
            ax.legend(fontsize=7)
    axes[0].legend(fontsize=8)
    for ax in axes[-2:]:
        ax.set_xlabel("RL step")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return buf.getvalue()


def markdown_tables(text: str) -> str:
    """The pipe tables and plain lines of a report.md as HTML (images are left out)."""
    out: list[str] = []
    rows: list[list[str]] = []

    def flush() -> None:
        if rows:
            head, *body = rows
            lines = [_table_row("th", head)] + [_table_row("td", r) for r in body]
            out.append(f"<table>{''.join(lines)}</table>")
            rows.clear()

    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-:") for c in cells):  # not the separator row
                rows.append(cells)
            continue
        flush()
        if line.strip() and not line.startswith(("#", "![")):
            out.append(f"<p>{html.escape(line)}</p>")
    flush()
    return "".join(out)


def _table_row(tag: str, cells: Sequence[str]) -> str:
    return "<tr>" + "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in cells) + "</tr>"


PHASES = (
    ("time/rollout_s", "rollout (sampling and search)"),
    ("time/update_s", "update (old and reference log-probs, optimizer steps)"),
    ("time/weight_push_s", "weights to the rollout"),
    ("time/other_s", "rewards, advantages, batching"),
    ("time/eval_s", "held-out evaluation"),
)
"""metrics.jsonl keys of a step's time by phase (``train.step``, ``train.trainer``)."""
PARTS = {
    "time/rollout_s": (("time/expansion_choice_s", "choosing where to expand"),),
    "time/update_s": (
        ("time/update/old_logprobs_s", "old log-probs"),
        ("time/update/ref_logprobs_s", "reference log-probs"),
        ("time/update/policy_s", "policy forward, backward and optimizer steps"),
    ),
}
"""Parts of a phase, shown under it (already counted in the phase's seconds)."""
TOKENS = {
    "time/rollout_s": "tokens/generated",
    "time/eval_s": "tokens/eval_generated",
    "time/update/old_logprobs_s": "tokens/update/old_logprobs",
    "time/update/ref_logprobs_s": "tokens/update/ref_logprobs",
    "time/update/policy_s": "tokens/update/policy",
}
"""What a phase's tokens/s counts: generated tokens for sampling and evaluation, path tokens
(each leaf's whole path, as an update without shared prefixes holds them) for the update's."""


def time_table(rows: Sequence[dict[str, Any]]) -> str:
    """Where a run's time went, as an HTML table: per phase the seconds in all, the share of
    the total (evaluation only on the steps that evaluated) and tokens per second (``TOKENS``);
    "" for a run that logged no phases (written before they were)."""
    whole = sum(sum(r.get(key, 0.0) for r in rows) for key, _ in PHASES)
    if whole <= 0:
        return ""
    cells = ""
    for key, title in PHASES:
        cells += _time_row(rows, key, title, whole)
        for part, name in PARTS.get(key, ()):
            if any(part in r for r in rows):
                cells += _time_row(rows, part, f"· {name}", whole)
    return (
        "<h3>where the time went</h3><table><tr><th>phase</th><th>seconds</th><th>share</th>"
        f"<th>tokens/s</th></tr>{cells}</table><p>tokens/s: generated tokens for sampling and "
        "evaluation; for the update's parts, path tokens (each kept leaf's whole path, as an "
        "update without shared prefixes computes them)</p>"
    )


def _time_row(rows: Sequence[dict[str, Any]], key: str, title: str, whole: float) -> str:
    """The row of phase ``key``: its seconds, their share of ``whole`` and its tokens per second
    over the steps that logged its tokens (``TOKENS``; blank where none did)."""
    sec = sum(r.get(key, 0.0) for r in rows)
    tokens = TOKENS.get(key)
    rate = ""
    if tokens is not None and sec > 0 and any(tokens in r for r in rows):
        rate = f"{sum(r.get(tokens, 0.0) for r in rows) / sec:,.0f}"
    share = f"{100 * sec / whole:.0f}%"
    return (
        f"<tr><td>{html.escape(title)}</td><td>{sec:.1f}</td><td>{share}</td><td>{rate}</td></tr>"
    )


def _run_section(run_dir: Path, view: Path) -> str:
    report = run_dir / "report.md"
    tables = markdown_tables(report.read_text()) if report.is_file() else "<p>(no report.md)</p>"
    tables += time_table(read_metrics(run_dir))
    view_dir = run_dir / "view"
    pages = sorted(view_dir.glob("eval*.html")) + sorted(view_dir.glob("step-*.html"))
    links = "".join(
        f'<li><a href="{html.escape(_relative(p, view))}">{p.stem}</a></li>' for p in pages
    )
    config = run_dir / "config.yaml"
    cfg = config.read_text() if config.is_file() else (run_dir / "config.json").read_text()
    return (
        f"<section><h2>{html.escape(run_dir.name)}</h2>{tables}"
        + (f"<h3>evaluations and rollout trees</h3><ul>{links}</ul>" if links else "")
        + f"<details><summary>configuration</summary><pre>{html.escape(cfg)}</pre></details>"
        "</section>"
    )


def _relative(path: Path, start: Path) -> str:
    """``path`` relative to the directory ``start`` (a link that works from the page)."""
    return os.path.relpath(path.resolve(), start.resolve()).replace("\\", "/")


def render_report(run_dirs: Sequence[Path], out: Path) -> str:
    """One run's report, or several side by side, for a page written to ``out``."""
    runs = {Path(d).name: with_held_out(Path(d)) for d in run_dirs}
    if len(runs) != len(run_dirs):
        raise ValueError("runs to compare need different directory names")
    png = base64.b64encode(curves_png(runs)).decode()
    title = " vs ".join(runs)
    sections = "".join(_run_section(Path(d), Path(out).parent) for d in run_dirs)
    img = f'<img alt="learning curves" src="data:image/png;base64,{png}">'
    body = f'<h1>{html.escape(title)}</h1>{img}<div class="runs">{sections}</div>'
    return html_page(title, _CSS, body)


def write_run_report(run_dirs: Sequence[Path], out: Path) -> Path:
    """Write ``render_report`` to ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(run_dirs, out))
    return out
