import numpy as np
import pytest

from treegrpo.core.advantage import tree_advantage
from treegrpo.core.groups import dense_ids, uniform_share


def test_dense_ids_first_appearance_order() -> None:
    assert dense_ids(["b", "a", "b", "c"]).tolist() == [0, 1, 0, 2]


def test_two_datasets_reusing_row_indexes_stay_apart() -> None:
    # NQ row 0 and HotpotQA row 0 are different prompts; the authors' code merged them.
    sources = ["nq", "nq", "hotpotqa", "hotpotqa"]
    rows = [0, 0, 0, 0]
    ids = dense_ids(sources, rows)
    assert ids.tolist() == [0, 0, 1, 1]
    # With separate groups each prompt is normalized on its own ...
    rewards = np.array([1.0, 0.0, 1.0, 1.0])
    adv = tree_advantage(rewards, ids, np.arange(4), mode="inter")
    np.testing.assert_allclose(adv[2:], 0.0)  # an all-correct group carries no signal
    # ... whereas grouping by the row index alone mixes them.
    merged = tree_advantage(rewards, np.array(rows), np.arange(4), mode="inter")
    assert not np.allclose(merged[2:], 0.0)


def test_dense_ids_accepts_numpy_columns_and_checks_lengths() -> None:
    assert dense_ids(np.array([3, 3, 4]), np.array([1, 1, 1])).tolist() == [0, 0, 1]
    with pytest.raises(ValueError, match="rows"):
        dense_ids([1, 2], [1])


def test_uniform_share_counts_groups_with_one_reward() -> None:
    assert uniform_share([0, 0, 1, 0, 1, 1], [0, 0, 1, 1, 2, 2]) == pytest.approx(2 / 3)
    assert uniform_share([0.2, 0.2], [5, 5]) == 1.0  # ids need not be dense
    assert uniform_share([1.0], [0]) == 1.0  # a group of one
    assert uniform_share([0.0, 1.0, 0.5], [0, 0, 0]) == 0.0
    assert uniform_share([], []) == 0.0
    with pytest.raises(ValueError, match="same 1-D shape"):
        uniform_share([0.0, 1.0], [0])


def test_distinct_per_group_counts_distinct_keys_in_each_group() -> None:
    from treegrpo.core.groups import distinct_per_group

    assert distinct_per_group([(1, 2), (1, 2), (3,)], [5, 5, 5]) == 2.0
    assert distinct_per_group(["a", "b", "a", "a"], [0, 0, 1, 1]) == 1.5
    assert distinct_per_group([], []) == 0.0
    with pytest.raises(ValueError, match="same length"):
        distinct_per_group(["a"], [0, 1])
