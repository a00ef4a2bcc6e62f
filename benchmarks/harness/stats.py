"""Medians and percentiles, one definition for every benchmark."""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def median(values: Iterable[float]) -> float:
    """The median; NaN for no values."""
    values = list(values)
    return statistics.median(values) if values else float("nan")


def percentile(values: Iterable[float], q: float) -> float:
    """The nearest-rank `q` quantile (0 <= q <= 1) of `values`, one of the values itself; NaN for none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def ratio(baseline: float, ours: float) -> float:
    """How many times faster (or cheaper) ours is than the baseline: baseline / ours; NaN when ours is 0."""
    return baseline / ours if ours else float("nan")
