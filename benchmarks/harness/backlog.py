"""Backlog over time and batch sizes, computed after a run from when each object was PUT and when it
became visible, so nothing polls the services while they work."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping


def backlog_series(
    put: Mapping[str, float], visible: Mapping[str, float], *, start: float, end: float, every: float
) -> list[tuple[float, int]]:
    """(seconds since `start`, objects PUT but not yet visible) every `every` seconds from `start` to
    `end` (epoch seconds): the objects of `put` only, an object not in `visible` counting as waiting."""
    puts = sorted(put.values())
    seen = sorted(visible[u] for u in put if u in visible)
    series = []
    t = start
    while True:
        waiting = bisect.bisect_right(puts, t) - bisect.bisect_right(seen, t)
        series.append((round(t - start, 1), waiting))
        if t >= end:
            return series
        t = min(t + every, end)


def batch_sizes(versions: Iterable[int]) -> list[int]:
    """Objects per commit, from the version that first held each object, in version order."""
    counted = Counter(versions)
    return [counted[v] for v in sorted(counted)]
