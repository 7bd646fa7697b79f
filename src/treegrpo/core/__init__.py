"""Pure core of treegrpo: rollout trees, budget, advantages and rewards (numpy + stdlib only).

Nothing here imports torch, transformers, does I/O or reads config objects; a test checks it.
"""

from treegrpo.core.advantage import (
    group_relative,
    node_advantage,
    token_advantages,
    tree_advantage,
)
from treegrpo.core.budget import (
    CHAIN_LADDER,
    TREE_LADDER,
    Spend,
    SpendAccountant,
    TreeShape,
    expected_cost,
    expected_cost_l1,
)
from treegrpo.core.groups import dense_ids
from treegrpo.core.rewards import (
    exact_match,
    extract_answer,
    f1_score,
    is_valid_format,
    is_well_formed_step,
    normalize_answer,
    search_r1_f1_reward,
    search_r1_reward,
)
from treegrpo.core.tree import Forest

__all__ = [
    "CHAIN_LADDER",
    "TREE_LADDER",
    "Forest",
    "Spend",
    "SpendAccountant",
    "TreeShape",
    "dense_ids",
    "exact_match",
    "expected_cost",
    "expected_cost_l1",
    "extract_answer",
    "f1_score",
    "group_relative",
    "is_valid_format",
    "is_well_formed_step",
    "node_advantage",
    "normalize_answer",
    "search_r1_f1_reward",
    "search_r1_reward",
    "token_advantages",
    "tree_advantage",
]
