"""Timing calls."""

from __future__ import annotations

import time
from collections.abc import Callable


def timed(
    call: Callable[[], object], repeat: int = 1, *, before: Callable[[], object] | None = None
) -> list[float]:
    """Wall seconds of `repeat` calls of `call` (`before`, if given, runs untimed ahead of each)."""
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times
