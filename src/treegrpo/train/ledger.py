"""The per-prompt budget ledger: what each prompt of each RL step spent and whether it taught
anything, one ``ledger.jsonl`` line per step beside ``metrics.jsonl`` (the step's totals and its
time by phase). A line holds the step and, per prompt in batch order (lists of length P): ``uid``;
``generated`` tokens sampled; ``processed`` tokens the engine computed (prefill included);
``tool_calls`` executed; ``leaves`` in its forest; ``expansions`` that branched in its trees;
``reward`` the mean reward of its kept leaves; ``signal`` whether some kept leaf has a nonzero
advantage (a prompt whose leaves all score alike teaches nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from treegrpo.rollout.scoring import ScoredRollout

LEDGER_FILE = "ledger.jsonl"


def ledger_row(step: int, outcome: ScoredRollout, uids: Sequence[str]) -> dict[str, Any]:
    """The ledger line of ``step`` from its rollout, scores and advantages."""
    rollout = outcome.rollout
    n = len(uids)
    forest = rollout.forest
    prompt_of = forest.prompt_id[np.asarray(outcome.leaves, dtype=np.int64)]  # (B,)
    expansions = np.bincount(forest.prompt_id[rollout.expansions], minlength=n)  # (P,)
    spend = [rollout.spend.by_prompt.get(p) for p in range(n)]
    reward = [outcome.scores.reward[prompt_of == p] for p in range(n)]
    spent = ("generated", "processed", "tool_calls", "leaves")
    return {
        "step": step,
        "uid": list(uids),
        **{k: [getattr(s, k) if s else 0 for s in spend] for k in spent},
        "expansions": expansions.tolist(),
        "reward": [float(r.mean()) if r.size else float("nan") for r in reward],
        "signal": [bool((outcome.adv[prompt_of == p] != 0).any()) for p in range(n)],
    }
