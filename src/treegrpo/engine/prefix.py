"""Which prompts of a batch start with the same tokens, so their common start is computed once:
Search-R1's prompts are one fixed instruction and a short question, and a token's keys and values
depend only on the tokens before it (as in vLLM's prefix caching and SGLang's radix attention).
Pure Python on token ids; the engine (``engine.hf``) decides what to do with the groups.
"""

from __future__ import annotations

from collections.abc import Sequence


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens ``a`` and ``b`` have in common."""
    pairs = zip(a, b, strict=False)  # up to the shorter one's end
    return next((i for i, (x, y) in enumerate(pairs) if x != y), min(len(a), len(b)))


def shared_prefix_groups(
    seqs: Sequence[Sequence[int]], min_shared: int
) -> list[tuple[list[int], int]]:
    """Groups of at least two sequences that start with the same ``n >= min_shared`` tokens:
    ``[(indices, n), ...]``, indices ascending, n the longest prefix the group shares; a sequence is
    in at most one group. Sorted, long common starts are neighbours; a run of them grows while its
    common prefix (the minimum over neighbouring pairs) stays ``min_shared`` or longer."""
    if min_shared < 1:
        raise ValueError(f"min_shared must be at least 1, got {min_shared}")
    order = sorted(range(len(seqs)), key=lambda i: list(seqs[i]))
    groups: list[tuple[list[int], int]] = []
    run: list[int] = []
    shared = 0
    for i in order:
        if run:
            n = min(shared, common_prefix_length(seqs[run[-1]], seqs[i]))
            if n >= min_shared:
                run.append(i)
                shared = n
                continue
            if len(run) > 1:
                groups.append((sorted(run), shared))
        run, shared = [i], len(seqs[i])
    if len(run) > 1:
        groups.append((sorted(run), shared))
    return groups
