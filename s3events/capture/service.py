"""Wiring: settings → queue, tables and the Capture stage; and the --once / --continuous runs."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from s3events.backfill.periodic import PeriodicBackfill
from s3events.capture.cycle import Capture, CaptureOptions, CycleResult
from s3events.capture.queue import SqsQueue
from s3events.capture.receive import ReceiveLimits
from s3events.config import Settings, keys
from s3events.infra import aws
from s3events.metadata.table import MetadataTable, QuarantineTable
from s3events.runloop import StopFlag, run_loop

if TYPE_CHECKING:
    from s3events.capture.metrics import CaptureObserved

log = logging.getLogger(__name__)


@dataclass(slots=True)
class CaptureTotals:
    cycles: int = 0
    received: int = 0
    written: int = 0
    duplicates: int = 0
    poison: int = 0
    deleted: int = 0
    table_version: int | None = None

    def add(self, result: CycleResult) -> None:
        self.received += result.received
        self.written += result.written
        self.duplicates += result.duplicates
        self.poison += result.poison
        self.deleted += result.deleted
        if result.table_version is not None:
            self.table_version = result.table_version


def build_capture(settings: Settings, *, cycle_interval_seconds: float = 0.0) -> Capture:
    """Everything capture needs, checked up front: a missing or forbidden queue fails here.
    `cycle_interval_seconds`: the run loop's minimum seconds between cycles (the prefetch keeps to it)."""
    options = aws.options_from(settings)
    queue = SqsQueue(
        options,
        settings.require(keys.QUEUE_URL),
        wait_seconds=settings.get(keys.QUEUE_LONG_POLL_WAIT),
        visibility_timeout=settings.get(keys.QUEUE_VISIBILITY_TIMEOUT),
    )
    queue.check()
    storage_options = aws.FreshStorageOptions(options)  # renewed while running
    attempts = settings.get(keys.CAPTURE_COMMIT_MAX_ATTEMPTS)
    metadata = MetadataTable(
        settings.require(keys.METADATA_TABLE_PATH),
        storage_options=storage_options,
        commit_attempts=attempts,
        dedupe_window=timedelta(days=settings.get(keys.METADATA_DEDUPE_WINDOW_DAYS)),
        known_ids=settings.get(keys.METADATA_DEDUPE_IDS_IN_MEMORY),
    )
    quarantine = QuarantineTable(
        settings.require(keys.QUARANTINE_TABLE_PATH),
        storage_options=storage_options,
        commit_attempts=attempts,
    )
    return Capture(
        queue,
        metadata,
        quarantine,
        CaptureOptions(
            limits=ReceiveLimits(
                max_messages=settings.get(keys.QUEUE_MAX_MESSAGES_PER_BATCH),
                max_seconds=settings.get(keys.QUEUE_MAX_BATCH_SECONDS),
                concurrency=settings.get(keys.QUEUE_RECEIVE_CONCURRENCY),
            ),
            max_message_bytes=settings.get(keys.MESSAGE_MAX_BYTES),
            poison_action=settings.get(keys.POISON_ACTION),
            raw_body_max_chars=settings.get(keys.QUARANTINE_RAW_MAX_CHARS),
            cycle_interval_seconds=cycle_interval_seconds,
        ),
    )


def run_capture(
    settings: Settings,
    *,
    once: bool,
    min_interval_seconds: float | None = None,
    stop: StopFlag | None = None,
    housekeeping: Callable[[], object] | None = None,
    metrics: CaptureObserved | None = None,
) -> CaptureTotals:
    """Capture cycles until the queue is drained (`once`) or a stop signal; `housekeeping` runs between
    cycles in this thread (the CLI passes table maintenance in --continuous runs). Each cycle's result
    is recorded into `metrics`, when given."""
    stop = stop or StopFlag()
    interval = (
        min_interval_seconds
        if min_interval_seconds is not None
        else settings.get(keys.CAPTURE_MIN_SYNC_INTERVAL_SECONDS)
    )
    backfill = PeriodicBackfill.from_settings(settings, stop=stop.is_set, metrics=metrics)  # None: off
    capture = build_capture(settings, cycle_interval_seconds=interval)
    totals = CaptureTotals()
    started = time.monotonic()
    unwatch = _watch(capture, metrics)

    def step() -> CycleResult:
        try:
            result = capture.run_once()
        except Exception:
            if metrics is not None:
                metrics.capture.failures.inc()
            raise
        if metrics is not None:
            metrics.capture.record(result, now=time.time())
        if result.received:
            log.info(result.log_line(), extra=result.fields())
            totals.add(result)
        if backfill is not None:
            backfill.run_if_due()  # between cycles, in this thread: serialized with capture's commits
        if housekeeping is not None:
            housekeeping()  # likewise (table maintenance): never races this process's own commits
        return result

    try:
        totals.cycles = run_loop(
            step,
            once=once,
            is_idle=lambda r: r.received == 0,
            stop=stop,
            min_interval_seconds=interval,
            renew_credentials=aws.renew_credentials,  # rotated keys: the chain again, once, at once
        )
    finally:
        unwatch()
        capture.close()
    _log_finished(totals, time.monotonic() - started)
    return totals


def _log_finished(totals: CaptureTotals, elapsed: float) -> None:
    log.info(
        "capture finished: cycles=%d received=%d written=%d duplicates=%d poison=%d deleted=%d "
        "table_version=%s elapsed=%.1fs",
        totals.cycles,
        totals.received,
        totals.written,
        totals.duplicates,
        totals.poison,
        totals.deleted,
        totals.table_version,
        elapsed,
    )


def _watch(capture: Capture, metrics: CaptureObserved | None) -> Callable[[], None]:
    """Gauge the messages in hand and count the SQS client's retries; returns what stops the watching."""
    if metrics is None:
        return lambda: None
    from s3events.observe.aws_retries import watch_retries

    metrics.capture.track_in_hand(lambda: len(capture.heartbeat.tracked()))
    client = getattr(capture.queue, "client", None)
    return watch_retries(client, metrics.capture.record_retry) if client is not None else lambda: None
