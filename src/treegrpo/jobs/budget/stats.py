"""The budget benchmark's summaries over seeds: mean and sample standard deviation, a mean's
Student-t 95% interval (paired differences are summarised so) and its text. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from scipy import stats


def unit(record: dict[str, Any]) -> str:
    """What pairs a run with its counterparts of other methods: its seed, with its warm start
    where the benchmark sampled several ("s3-w1-onednn"; records from before: "s3")."""
    return str(record.get("unit", f"s{record['seed']}"))


def mean_std(xs: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (n − 1; None for a single value)."""
    if not xs:
        raise ValueError("mean_std of no values")
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


def t_interval(xs: Sequence[float]) -> tuple[float, float] | None:
    """mean ± t_{0.975, n−1} · s / √n: the mean of ``xs`` and its 95% interval (None for one)."""
    mean, std = mean_std(xs)
    if std is None:
        return None
    half = float(stats.t.ppf(0.975, len(xs) - 1)) * std / len(xs) ** 0.5
    return (mean - half, mean + half)


def ci_text(ci95: Sequence[float] | None) -> str:
    """(-0.03, 0.105) → "[-3.0, +10.5]", in points; "—" without an interval."""
    return "—" if ci95 is None else f"[{100 * ci95[0]:+.1f}, {100 * ci95[1]:+.1f}]"
