"""The ``treegrpo`` command line.

Subcommands are plain functions whose arguments tyro turns into flags; each imports what it
needs when it runs, so ``treegrpo --help`` stays fast.
"""

from __future__ import annotations

import tyro


def budget(depth: int = 3) -> None:
    """Show the paper's budget ladder: tree shapes and chain sizes with their expected cost.

    Args:
        depth: Steps per chain assumed for the exact one-round cost (the root counts as a
            candidate, so short chains cost more than the paper's formula).
    """
    from rich.console import Console
    from rich.table import Table

    from treegrpo.core.budget import CHAIN_LADDER, TREE_LADDER, expected_cost, expected_cost_l1

    table = Table(title=f"Budget ladder (trajectories per prompt; exact cost at depth {depth})")
    for col in ("budget", "tree (M,N,L)", "leaves", "M·(1+L·N/2)", "exact", "chain M"):
        table.add_column(col, justify="right")
    for b, shape in TREE_LADDER.items():
        exact = expected_cost_l1(shape.m, shape.n, depth) if shape.l == 1 else float("nan")
        table.add_row(
            str(b),
            f"({shape.m},{shape.n},{shape.l})",
            str(shape.leaves_per_prompt),
            f"{expected_cost(shape.m, shape.n, shape.l):g}",
            f"{exact:.2f}",
            str(CHAIN_LADDER[b].m),
        )
    Console().print(table)


def main() -> None:
    """Entry point of the ``treegrpo`` script."""
    tyro.extras.subcommand_cli_from_dict(
        {"budget": budget},
        description="Tree-GRPO: reinforcement learning for tool-using LLM agents over "
        "tree-structured rollouts.",
    )


if __name__ == "__main__":
    main()
