"""Packing paths that share prefixes: each segment once, each token seeing exactly its own path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treegrpo.core.packing import Layout, pack

# prompt 0 (3 tokens); steps 1 (2), 2 (1), 3 (2), 4 (0, an empty step), 5 (1):
#   0 ─ 1 ─ 2          path A = 0 1 2
#       └── 3 ─ 4 ─ 5  path B = 0 1 3 4 5
#   0 ─ 6              path C = 0 6      (another tree of the same prompt)
LENGTHS = {0: 3, 1: 2, 2: 1, 3: 2, 4: 0, 5: 1, 6: 2}
PATHS = [[0, 1, 2], [0, 1, 3, 4, 5], [0, 6]]


def test_each_segment_once_in_depth_first_order() -> None:
    lay = pack(PATHS, LENGTHS)
    assert lay.segments.tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert lay.parent.tolist() == [-1, 0, 1, 1, 3, 4, 0]
    assert lay.start.tolist() == [0, 3, 5, 6, 8, 8, 9]
    assert lay.n_tokens == 11  # against 6 + 8 + 5 = 19 tokens path by path
    # positions are offsets along each token's own path; prev is the token before it there
    assert lay.position.tolist() == [0, 1, 2, 3, 4, 5, 5, 6, 7, 3, 4]
    assert lay.prev.tolist() == [-1, 0, 1, 2, 3, 4, 4, 6, 7, 2, 9]
    assert lay.path_tokens(1).tolist() == [0, 1, 2, 3, 4, 6, 7, 8]
    assert lay.per_token(np.ones(len(PATHS))).tolist() == [3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1]


def test_any_segment_name_is_a_name_negative_ones_too() -> None:
    # the trainer names prompt p's segment -1 - p; -1 is no "no parent" mark: the layout is the
    # one the same tree gets under non-negative names, positions from 0 on every root
    renamed = {0: -1, 1: -2, 2: -3, 3: -4, 4: -5, 5: -6, 6: -7}
    paths = [[renamed[s] for s in path] for path in PATHS]
    lay = pack(paths, {renamed[s]: n for s, n in LENGTHS.items()})
    plain = pack(PATHS, LENGTHS)
    for field in ("parent", "start", "position", "prev", "member"):
        assert getattr(lay, field).tolist() == getattr(plain, field).tolist(), field
    two_roots = pack([[-1, 5], [-2, 6]], {-1: 3, -2: 3, 5: 2, 6: 1})
    assert two_roots.parent.tolist() == [-1, 0, -1, 2]  # -2 is a root of its own
    assert two_roots.position.tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3]


def test_a_token_attends_to_its_path_up_to_itself_only() -> None:
    lay = pack(PATHS, LENGTHS)
    allowed = lay.attention()
    for p in range(len(PATHS)):
        toks = lay.path_tokens(p).tolist()
        for n, i in enumerate(toks):
            assert set(np.flatnonzero(allowed[i]).tolist()) == set(toks[: n + 1])
    # a sibling's tokens are never seen: step 2 (index 5) and step 3 (6, 7)
    assert not allowed[6, 5] and not allowed[5, 6] and not allowed[9, 3]


def test_per_token_sums_over_the_paths_through_it() -> None:
    lay = pack(PATHS, LENGTHS)
    got = lay.per_token([1.0, 10.0, 100.0])
    assert got.tolist() == [111, 111, 111, 11, 11, 1, 10, 10, 10, 100, 100]
    two = lay.per_token(np.array([[1.0, 2.0], [3.0, 4.0], [0.0, 0.0]]))
    assert two.shape == (11, 2) and two[0].tolist() == [4.0, 6.0]
    with pytest.raises(ValueError, match="rows for 3 paths"):
        lay.per_token([1.0])


def test_bad_paths_are_refused() -> None:
    with pytest.raises(ValueError, match="do not form a tree"):
        pack([[0, 1], [0, 2, 1]], {0: 1, 1: 1, 2: 1})
    with pytest.raises(ValueError, match="twice"):
        pack([[0, 1, 0]], {0: 1, 1: 1})
    with pytest.raises(ValueError, match="no length"):
        pack([[0, 9]], {0: 1})
    with pytest.raises(ValueError, match="at least one path"):
        pack([], {})


@st.composite
def forests(draw: st.DrawFn) -> tuple[list[list[int]], dict[int, int]]:
    """Random trees of segments (node i's parent is below i) and a random set of root-to-node
    paths through them."""
    n = draw(st.integers(1, 12))
    parent = [-1] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
    lengths = {i: draw(st.integers(0 if i else 1, 4)) for i in range(n)}
    ends = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=6, unique=True))
    paths = []
    for e in ends:
        path = [e]
        while parent[path[-1]] >= 0:
            path.append(parent[path[-1]])
        paths.append(path[::-1])
    return paths, lengths


@settings(max_examples=150, deadline=None)
@given(forests())
def test_packing_reproduces_every_path(case: tuple[list[list[int]], dict[int, int]]) -> None:
    paths, lengths = case
    lay: Layout = pack(paths, lengths)
    ids = np.concatenate([np.full(lengths[s], s) for s in lay.segments.tolist()])  # (S,)
    allowed = lay.attention()
    for p, path in enumerate(paths):
        toks = lay.path_tokens(p)
        alone = np.concatenate([np.full(lengths[s], s) for s in path])
        assert ids[toks].tolist() == alone.tolist()  # the same tokens in the same order
        assert lay.position[toks].tolist() == list(range(len(alone)))
        assert lay.prev[toks].tolist() == [-1, *toks[:-1].tolist()]
        for n, i in enumerate(toks.tolist()):
            assert set(np.flatnonzero(allowed[i]).tolist()) == set(toks[: n + 1].tolist())
    # each token once: never more than the paths hold in all
    assert lay.n_tokens <= sum(sum(lengths[s] for s in path) for path in paths)
    assert (lay.per_token(np.ones(len(paths))) >= 1).all()  # every token on a path
