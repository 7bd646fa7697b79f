"""A step's forests as plain data for people to look at (``treegrpo view``): a few prompts'
trees, every node's step (decoded here, so the snapshot reads without the tokenizer), every kept
leaf's reward and advantages, every node's summed and mean descendant advantage
(``core.advantage.node_advantage``), and why the expansion rule branched from a node
(``Rollout.expansion_reasons``), once per expansion from it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from treegrpo.core.advantage import node_advantage, tree_advantage
from treegrpo.rollout.records import Rollout
from treegrpo.rollout.scoring import LeafScores, ScoredRollout


def forest_snapshot(
    scored: ScoredRollout,
    prompts: Sequence[int],
    decode: Callable[[Sequence[int]], str],
    golds: Sequence[Sequence[str]],
    questions: Sequence[str],
    hops: Sequence[int] | None = None,
    scale: bool = True,
    batch: float = 0.0,
) -> list[dict[str, Any]]:
    """The trees of batch prompts ``prompts`` as JSON-ready nested dicts. ``scored``: the RL step's
    kept leaves, scores, groups, advantages; intra, inter (and, ``batch`` > 0, batch) parts are
    recomputed with the same ``scale``. golds, questions, hops (0: unknown): per batch prompt."""
    forest = scored.rollout.forest
    leaf_ids = np.asarray(scored.leaves, dtype=np.int64)
    total = np.asarray(scored.adv, dtype=np.float64)
    group_ids = np.asarray(scored.groups, dtype=np.int64)
    trees = forest.tree_id[leaf_ids]
    reward = scored.scores.reward
    parts = {
        "adv_intra": tree_advantage(reward, group_ids, trees, "intra", scale=scale),
        "adv_inter": tree_advantage(reward, group_ids, trees, "inter", scale=scale),
        "adv": total,
    }
    if batch > 0:
        no_groups = np.zeros_like(group_ids)
        parts["adv_batch"] = tree_advantage(reward, no_groups, trees, "inter", scale=scale) * batch
    node_sum, node_mean, node_count = node_advantage(forest.parent, leaf_ids, total)
    row = {int(n): i for i, n in enumerate(leaf_ids.tolist())}
    why = _expansion_reasons(scored.rollout)
    out = []
    for p in prompts:
        tree_list = []
        for t in sorted({int(x) for x in forest.tree_id[forest.prompt_id == p].tolist()}):
            nodes = []
            for n in np.flatnonzero(forest.tree_id == t).tolist():
                node: dict[str, Any] = {
                    "id": n,
                    "parent": int(forest.parent[n]),
                    "depth": int(forest.depth[n]),
                    "leaf": bool(forest.is_leaf[n]),
                    "kept": n in row,
                    "n_leaves": int(node_count[n]),
                    "sum_adv": float(node_sum[n]),
                    "mean_adv": None if node_count[n] == 0 else float(node_mean[n]),
                }
                if n in why:
                    node["expansions"] = why[n]
                if forest.depth[n] > 0:  # a root is the prompt itself
                    node |= _step_fields(scored.rollout, n, decode)
                if n in row:
                    node |= _leaf_fields(scored.scores, row[n], parts)
                nodes.append(node)
            tree_list.append({"tree": t, "nodes": nodes})
        hop = int(hops[p]) if hops is not None else 0
        out.append({"index": int(p), "question": questions[p], "golds": list(golds[p]),
                    "hops": hop, "trees": tree_list})  # fmt: skip
    return out


def _expansion_reasons(rollout: Rollout) -> dict[int, list[str]]:
    """Node → the reasons of the expansions started there (empty where none were recorded)."""
    reasons = rollout.expansion_reasons
    if len(reasons) != len(rollout.expansions):  # a rollout that did not record them
        reasons = [""] * len(rollout.expansions)
    why: dict[int, list[str]] = {}
    for v, reason in zip(rollout.expansions.tolist(), reasons, strict=True):
        why.setdefault(int(v), []).append(reason)
    return why


def _step_fields(
    rollout: Rollout, n: int, decode: Callable[[Sequence[int]], str]
) -> dict[str, Any]:
    """The agent step that node ``n`` holds: its text, action, observation and how it ended."""
    rec = rollout.step(n)
    return {
        "text": decode(rec.action_ids),
        "action": rec.action.kind,
        "action_text": rec.action.text,
        "observation": decode(rec.obs_ids),
        "finish": rec.finish,
        "tool_status": rec.tool_status,  # ok / error / failed, "" if no call
    }


def _leaf_fields(scores: LeafScores, i: int, parts: dict[str, np.ndarray]) -> dict[str, Any]:
    """Kept leaf ``i``'s reward, EM, tool calls and advantages (``parts``: name → (B,))."""
    fields = {"reward": scores.reward[i], "em": scores.em[i], "tool_calls": scores.tool_calls[i]}
    return {k: float(v) for k, v in fields.items()} | {k: float(a[i]) for k, a in parts.items()}
