"""The README's core example runs as written."""

import re
from pathlib import Path


def test_readme_core_example_runs() -> None:
    text = (Path(__file__).parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    core = next(b for b in blocks if "tree_advantage" in b)
    scope: dict[str, object] = {}
    exec(compile(core, "README.md", "exec"), scope)
    assert len(scope["adv"]) == len(scope["leaves"]) == 3  # type: ignore[arg-type]
