"""The periodic backfill inside capture: a full pass between capture cycles, in capture's own thread.

Running in the same thread serializes the pass with capture's commits. The time of the last completed
pass lives in the metadata table (app transaction `s3events.backfill`), so a restarted capture does not
run a pass at once when one completed less than an interval ago, and several capture processes (or a
manual `s3events backfill`) share one schedule: the stored time is read again whenever a pass is due.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from s3events.backfill.model import BackfillReport, Source
from s3events.backfill.run import Backfill, build_backfill, configured_sources
from s3events.config import Settings, keys
from s3events.infra.delta_errors import log_side_failure

if TYPE_CHECKING:
    from s3events.backfill.metrics import BackfillObserved

log = logging.getLogger(__name__)

# A failed pass is tried again after this long (or the interval, when shorter), not at every cycle.
RETRY_FAILED_SECONDS = 300.0


class PeriodicBackfill:
    def __init__(
        self,
        backfill: Backfill,
        last_completed: Callable[[], int | None],
        sources: Sequence[Source],
        *,
        interval_seconds: float,
        stop: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if interval_seconds <= 0:
            raise ValueError("interval_seconds must be > 0")
        self._backfill = backfill
        self._last_completed = last_completed
        self._sources = list(sources)
        self._interval = interval_seconds
        self._stop = stop
        self._clock = clock
        self._next_at = self._due_after(last_completed())  # read at start-up
        wait = max(0.0, self._next_at - clock())
        log.info(
            "periodic backfill every %.0fs of %s; next pass in %.0fs",
            interval_seconds,
            ", ".join(s.uri for s in self._sources),
            wait,
        )

    @classmethod
    def from_settings(
        cls, settings: Settings, *, stop: Callable[[], bool], metrics: BackfillObserved | None = None
    ) -> PeriodicBackfill | None:
        """The periodic pass `s3events.backfill.interval.seconds` asks for; None when it is 0 (off)."""
        interval = settings.get(keys.BACKFILL_INTERVAL_SECONDS)
        if interval <= 0:
            return None
        backfill = build_backfill(settings, metrics=metrics)
        return cls(
            backfill,
            backfill.table.last_completed,
            configured_sources(settings),
            interval_seconds=interval,
            stop=stop,
        )

    def due(self) -> bool:
        return self._clock() >= self._next_at

    def run_if_due(self) -> BackfillReport | None:
        """Run a pass when one is due. A failure is logged and retried later; it never stops capture."""
        if not self.due() or self._stop():
            return None
        try:
            # Another process (a second capture, `s3events backfill`) may have completed one meanwhile.
            self._next_at = self._due_after(self._last_completed())
            if not self.due():
                return None
            report = self._backfill.run_once(self._sources, stop=self._stop)
        except Exception as exc:
            retry_in = min(self._interval, RETRY_FAILED_SECONDS)
            log_side_failure(log, "periodic backfill failed; capture goes on", retry_in, exc)
            self._next_at = self._clock() + retry_in
            return None
        if report.completed_at is not None:
            self._next_at = self._due_after(report.completed_at)
        return report

    def _due_after(self, completed_at: float | None) -> float:
        return float("-inf") if completed_at is None else completed_at + self._interval
