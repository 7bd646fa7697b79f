"""Held-out EM against what a run spent, and comparisons at equal spend (docs/evaluation.md,
"Equal spend, not equal rungs"). Pure: no torch, no files.

A run's curve is (spend_j, EM_j), spend 0 at the start, spend the cumulative generated tokens
per prompt (or training wall seconds). For runs a and b of one seed with final spends X_a, X_b,
at the matched spend x* = min(X_a, X_b):

    ΔEM(x*)  = EM_a(x*) − EM_b(x*),             EM(x) linear between evaluated points,
    ΔAUC(x*) = (1/x*) ∫_0^x* (EM_a − EM_b)(x) dx,

each paired by seed and summarised by its mean and a Student-t 95% interval.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from treegrpo.jobs.budget.stats import t_interval, unit

AXES = {"tokens": "generated tokens per prompt", "seconds": "training wall seconds"}
"""The spends a curve is read against: cumulative generated tokens per prompt, or cumulative
RL-step wall time (evaluation excluded)."""


def held_out_curve(
    before_em: float, after_em: float, steps: Sequence[dict[str, Any]]
) -> dict[str, list[float]]:
    """A run's held-out curve from its RL-step lines (in order): the start at spend 0, each step
    with ``eval/em``, ``after_em`` at the end; lists "step", "tokens", "seconds", "em"."""
    out: dict[str, list[float]] = {"step": [0], "tokens": [0.0], "seconds": [0.0]}
    out["em"] = [before_em]
    tokens = seconds = 0.0
    for i, m in enumerate(steps):
        tokens += m["spend/generated_per_prompt"]
        seconds += m["time/step_s"]
        last = i == len(steps) - 1
        if "eval/em" in m or last:
            out["step"].append(int(m.get("step", i + 1)))
            out["tokens"].append(tokens)
            out["seconds"].append(seconds)
            out["em"].append(after_em if last else m["eval/em"])
    return out


def em_at(xs: Sequence[float], ems: Sequence[float], x: float) -> float:
    """EM at spend ``x`` on the curve (xs increasing, linear between points). Raises
    ValueError beyond its ends: a run is never extrapolated past what it spent."""
    if not xs or x < xs[0] or x > xs[-1] + 1e-9 * max(abs(xs[-1]), 1.0):
        raise ValueError(f"spend {x:g} is outside the curve's [{xs[0] if xs else 0:g}, ...]")
    return float(np.interp(x, xs, ems))


def area(xs: Sequence[float], ems: Sequence[float], x: float) -> float:
    """(1/x) ∫_0^x EM(s) ds on the curve (the trapezoid rule is exact for the linear curve):
    the mean held-out EM over the first ``x`` of the spend."""
    if x <= 0:
        raise ValueError(f"area needs a positive spend, got {x:g}")
    end = em_at(xs, ems, x)
    keep = [i for i, s in enumerate(xs) if s < x]
    px = [xs[i] for i in keep] + [x]
    py = [ems[i] for i in keep] + [end]
    return float(np.trapezoid(py, px) / x)


def matched(
    records: Sequence[dict[str, Any]],
    method: str,
    against: str,
    budget: int,
    against_budget: int | None = None,
    axis: str = "tokens",
) -> dict[str, Any] | None:
    """``method`` at ``budget`` − ``against`` at ``against_budget`` (default the same), read at each
    seed's matched spend on ``axis`` ("tokens" or "seconds"): ΔEM and ΔAUC per seed, their means and
    95% intervals (None with one seed), the spends. None when no seed has both curves."""
    if axis not in AXES:
        raise ValueError(f"axis must be one of {', '.join(AXES)}, got {axis!r}")
    other = budget if against_budget is None else against_budget
    by = {(r["method"], r["budget"], unit(r)): r for r in records if r.get("held_out_curve")}
    seeds = sorted(s for m, b, s in by if (m, b) == (method, budget) and (against, other, s) in by)
    if not seeds:
        return None
    at, d_em, d_auc = [], [], []
    for s in seeds:
        a = by[(method, budget, s)]["held_out_curve"]
        b = by[(against, other, s)]["held_out_curve"]
        x = min(a[axis][-1], b[axis][-1])
        if x <= 0:
            continue
        at.append(x)
        d_em.append(em_at(a[axis], a["em"], x) - em_at(b[axis], b["em"], x))
        d_auc.append(area(a[axis], a["em"], x) - area(b[axis], b["em"], x))
    if not at:
        return None
    return {
        "method": method,
        "budget": budget,
        "against": against,
        "against_budget": other,
        "axis": axis,
        "seeds": seeds,
        "at": at,
        "em_diffs": d_em,
        "em_mean": statistics.fmean(d_em),
        "em_ci95": t_interval(d_em),
        "auc_diffs": d_auc,
        "auc_mean": statistics.fmean(d_auc),
        "auc_ci95": t_interval(d_auc),
    }


def mean_curve(curves: Sequence[dict[str, list[float]]], axis: str) -> dict[str, list[float]]:
    """The seeds' curves averaged point by point (the same steps when the runs share ``eval_every``
    and steps): mean spend on ``axis`` and mean EM, over the points every curve has."""
    n = min(len(c["em"]) for c in curves)
    return {
        axis: [statistics.fmean(c[axis][i] for c in curves) for i in range(n)],
        "em": [statistics.fmean(c["em"][i] for c in curves) for i in range(n)],
    }
