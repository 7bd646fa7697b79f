"""The run report page (``viz.report``): curves as a non-blank inline plot, the before/after
table, the configuration, links to the tree pages that resolve; two runs side by side."""

from __future__ import annotations

import base64
import io
import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from treegrpo import cli
from treegrpo.viz.report import CURVES, markdown_tables, render_report, time_table

TABLE = """# run

| held-out group | n | EM before | EM after |
|---|---:|---:|---:|
| 1-hop | 100 | 100.0 | 99.0 |
| overall | 400 | 25.0 | 78.5 |

![learning curve](learning_curve.png)

Wall time: 160 s.
"""


def _run(path: Path, reward: float) -> Path:
    path.mkdir(parents=True)
    rows = []
    for step in range(1, 6):
        keys = [k for ks, _ in CURVES for k in ((ks,) if isinstance(ks, str) else ks)]
        row = {"step": step, **{k: reward * step for k in keys if k != "eval/em"}}
        if step % 5 == 0:
            row["eval/em"] = 0.5
        rows.append(row)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "report.md").write_text(TABLE.replace("78.5", f"{70 + reward:.1f}"))
    (path / "config.yaml").write_text("algo:\n  algo: tree\n  m: 2\n")
    (path / "eval-before.json").write_text(json.dumps({"overall": {"em": 0.25}}))
    (path / "eval-after.json").write_text(json.dumps({"overall": {"em": 0.7}}))
    (path / "view").mkdir()
    (path / "view" / "step-000001.html").write_text("<html></html>")
    return path


def _image(page: str) -> np.ndarray:
    (data,) = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    raw = base64.b64decode(data)
    assert len(raw) > 20_000
    return imread(io.BytesIO(raw), format="png")


def test_markdown_tables_become_html_tables() -> None:
    out = markdown_tables(TABLE)
    assert out.count("<table>") == 1 and "<th>EM after</th>" in out
    assert "<td>overall</td><td>400</td><td>25.0</td><td>78.5</td>" in out
    assert "---" not in out and "learning_curve.png" not in out and "Wall time" in out


def test_one_run_report(tmp_path: Path) -> None:
    run = _run(tmp_path / "tree", reward=0.1)
    page_path = run / "report.html"
    page = render_report([run], page_path)
    pixels = _image(page)
    assert pixels.shape[0] > 500 and float(pixels[..., :3].std()) > 0.05  # not blank
    assert "<td>78.5</td>" not in page and "<td>70.1</td>" in page
    assert "algo: tree" in page
    links = re.findall(r'href="([^"]+)"', page)
    assert links == ["view/step-000001.html"]
    assert all((page_path.parent / link).is_file() for link in links)
    assert "http://" not in page and "https://" not in page
    assert "where the time went" not in page  # no phases logged: no table


def test_the_time_table_adds_up_the_phases() -> None:
    rows = [
        {"step": 1, "time/rollout_s": 3.0, "time/update_s": 1.0, "time/other_s": 0.0},
        {"step": 2, "time/rollout_s": 3.0, "time/update_s": 1.0, "time/eval_s": 2.0},
    ]
    table = time_table(rows)
    assert "<td>rollout (sampling and search)</td><td>6.0</td><td>60%</td>" in table
    assert "<td>held-out evaluation</td><td>2.0</td><td>20%</td>" in table
    assert "<td>weights to the rollout</td><td>0.0</td><td>0%</td>" in table
    assert "old log-probs" not in table  # parts only where they were logged
    rows[0] |= {"time/update/old_logprobs_s": 0.4, "time/update/policy_s": 0.5}
    rows[1] |= {"time/update/old_logprobs_s": 0.6, "time/update/policy_s": 0.3}
    table = time_table(rows)
    # a part sits under its phase, as a share of the whole, and the whole is unchanged
    assert "<td>· old log-probs</td><td>1.0</td><td>10%</td><td></td>" in table
    assert table.index("update (old") < table.index("· old log-probs") < table.index("weights")
    assert "<td>held-out evaluation</td><td>2.0</td><td>20%</td><td></td>" in table
    # tokens per second: generated ones while sampling and evaluating, path tokens in updates
    rows[0] |= {"tokens/generated": 1200.0, "tokens/update/old_logprobs": 5000.0}
    rows[1] |= {"tokens/generated": 600.0, "tokens/update/old_logprobs": 3000.0}
    rows[1] |= {"tokens/eval_generated": 500.0}
    table = time_table(rows)
    assert "<td>rollout (sampling and search)</td><td>6.0</td><td>60%</td><td>300</td>" in table
    assert "<td>· old log-probs</td><td>1.0</td><td>10%</td><td>8,000</td>" in table
    assert "<td>held-out evaluation</td><td>2.0</td><td>20%</td><td>250</td>" in table
    assert (
        "<td>· policy forward, backward and optimizer steps</td><td>0.8</td><td>8%</td><td></td>"
        in table
    )


def test_two_runs_side_by_side_through_the_cli(tmp_path: Path) -> None:
    a, b = _run(tmp_path / "tree", 0.1), _run(tmp_path / "chain", 0.2)
    cli.main(["view", str(a), str(b)])
    page = (a / "compare-chain.html").read_text()
    assert "<h1>tree vs chain</h1>" in page and "<td>70.1</td>" in page and "<td>70.2</td>" in page
    links = re.findall(r'href="([^"]+)"', page)
    assert sorted(links) == ["../chain/view/step-000001.html", "view/step-000001.html"]
    assert all((a / link).is_file() for link in links)
    _image(page)
    with pytest.raises(SystemExit, match="no metrics"):
        cli.main(["view", str(tmp_path / "missing")])


@pytest.mark.slow
def test_view_serves_the_pages_on_loopback(tmp_path: Path) -> None:
    run = _run(tmp_path / "tree", 0.1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "treegrpo.cli", "view", str(run), "--serve", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                url = f"http://127.0.0.1:{port}/report.html"
                page = urllib.request.urlopen(url, timeout=5).read().decode()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout
                time.sleep(0.3)
        assert "<h1>tree</h1>" in page and "data:image/png;base64," in page
    finally:
        proc.terminate()
        proc.wait(timeout=10)
