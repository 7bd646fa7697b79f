"""A step's forests as plain data for people to look at (``treegrpo view``): a few prompts'
trees, every node's decoded step, every kept leaf's reward and advantages, every node's
summed and mean descendant advantage (``core.advantage.node_advantage``), and why the expansion
rule branched from a node (``Rollout.expansion_reasons``), once per expansion from it.

Token ids are decoded here, at write time, so the saved snapshot reads without the tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from treegrpo.core.advantage import node_advantage, tree_advantage
from treegrpo.rollout.records import Rollout
from treegrpo.rollout.scoring import LeafScores


def forest_snapshot(
    rollout: Rollout,
    leaves: Sequence[int],
    scores: LeafScores,
    groups: npt.ArrayLike,
    adv: npt.ArrayLike,
    prompts: Sequence[int],
    decode: Callable[[Sequence[int]], str],
    golds: Sequence[Sequence[str]],
    questions: Sequence[str],
    hops: Sequence[int] | None = None,
    scale: bool = True,
) -> list[dict[str, Any]]:
    """The trees of batch prompts ``prompts`` as nested dicts (JSON-ready).

    leaves (B,): the kept leaf node ids, with their ``scores``, prompt groups ``groups`` (B,)
    and total advantages ``adv`` (B,) as the RL step computed them; the intra-tree and
    inter-tree parts are recomputed from the rewards (``core.advantage.tree_advantage``) with
    the same std ``scale``. golds, questions and hops (0: unknown) are per batch prompt."""
    forest = rollout.forest
    leaf_ids = np.asarray(leaves, dtype=np.int64)
    total = np.asarray(adv, dtype=np.float64)
    group_ids = np.asarray(groups, dtype=np.int64)
    trees = forest.tree_id[leaf_ids]
    intra = tree_advantage(scores.reward, group_ids, trees, "intra", scale=scale)
    inter = tree_advantage(scores.reward, group_ids, trees, "inter", scale=scale)
    node_sum, node_mean, node_count = node_advantage(forest.parent, leaf_ids, total)
    row = {int(n): i for i, n in enumerate(leaf_ids.tolist())}
    why: dict[int, list[str]] = {}  # node → the reasons of the expansions that started there
    reasons = rollout.expansion_reasons
    if len(reasons) != len(rollout.expansions):  # a rollout that did not record them
        reasons = [""] * len(rollout.expansions)
    for v, reason in zip(rollout.expansions.tolist(), reasons, strict=True):
        why.setdefault(int(v), []).append(reason)
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
                    rec = rollout.step(n)
                    node |= {
                        "text": decode(rec.action_ids),
                        "action": rec.action.kind,
                        "action_text": rec.action.text,
                        "observation": decode(rec.obs_ids),
                        "finish": rec.finish,
                        "tool_status": rec.tool_status,  # ok / error / failed, "" if no call
                    }
                if n in row:
                    i = row[n]
                    node |= {
                        "reward": float(scores.reward[i]),
                        "em": float(scores.em[i]),
                        "tool_calls": float(scores.tool_calls[i]),
                        "adv_intra": float(intra[i]),
                        "adv_inter": float(inter[i]),
                        "adv": float(total[i]),
                    }
                nodes.append(node)
            tree_list.append({"tree": t, "nodes": nodes})
        out.append(
            {
                "index": int(p),
                "question": questions[p],
                "golds": list(golds[p]),
                "hops": int(hops[p]) if hops is not None else 0,
                "trees": tree_list,
            }
        )
    return out
