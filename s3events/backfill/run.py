"""One backfill pass, as numbered steps: 1 list → 2 diff → 3 write → 4 record completion.

Notifications are not guaranteed to arrive. A pass lists the sources, finds the objects the metadata
table does not know and writes them as created events with `event_source = "backfill"` and exactly the
identity capture gives them (bucket, key, version id else etag), so an object is one row whichever of
the two saw it first. Steps 1-3 are pipelined: pages are compared while later pages are still being
listed, and new events are committed in chunks, so memory does not grow with the number of objects.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa

from s3events.backfill.diff import unknown_positions
from s3events.backfill.listing import Lister, list_sources
from s3events.backfill.model import (
    BackfillOptions,
    BackfillReport,
    Source,
    SourceCounts,
    backfill_event,
    distinct_sources,
)
from s3events.backfill.s3_lister import S3Lister
from s3events.backfill.table import BackfillTable
from s3events.config import Settings, keys
from s3events.events.model import ObjectEvent
from s3events.events.record import EventRecord
from s3events.infra import aws
from s3events.metadata.table import CommitResult

if TYPE_CHECKING:
    from s3events.backfill.metrics import BackfillObserved

log = logging.getLogger(__name__)


class Progress(Protocol):
    """Shows a pass's counts while it runs (the command's terminal counter)."""

    def update(self, report: BackfillReport) -> None: ...
    def finish(self) -> None: ...


class Table(Protocol):
    def known_ids(self, buckets: Sequence[str]) -> pa.Table: ...
    def commit(
        self, records: Sequence[EventRecord], *, custom_metadata: Mapping[str, str]
    ) -> CommitResult: ...
    def last_completed(self) -> int | None: ...
    def record_completion(
        self, epoch_seconds: int, *, custom_metadata: Mapping[str, str]
    ) -> tuple[int, int]: ...


@dataclass(slots=True)
class _Backlog:
    """Listed objects not compared yet, and new events not committed yet."""

    listed: list[tuple[Source, ObjectEvent]] = field(default_factory=list)
    new: list[ObjectEvent] = field(default_factory=list)


class Backfill:
    """The backfill stage. `run_once()` runs one pass over the given sources."""

    def __init__(
        self,
        lister: Lister,
        table: Table,
        *,
        on_pass: Callable[[BackfillReport], None] | None = None,
        uploaded_again_after: timedelta | None = None,
    ) -> None:
        self._lister = lister
        self._table = table
        self._on_pass = on_pass  # sees every pass's report (metrics)
        # capture's dedupe window: the same content listed this much later than its known event is a new
        # upload, as capture would record it (None: any known identity is known)
        self._uploaded_again_after = uploaded_again_after

    @property
    def table(self) -> Table:
        return self._table

    def run_once(
        self,
        sources: Sequence[Source],
        options: BackfillOptions | None = None,
        *,
        record_completion: bool = True,
        progress: Progress | None = None,
        stop: Callable[[], bool] = lambda: False,
    ) -> BackfillReport:
        """One pass. `record_completion`: on success, record the pass's completion time in the table
        (the periodic schedule reads it). A dry run writes nothing; a stopped pass records nothing."""
        started = time.monotonic()
        try:
            report = self._pass(sources, options or BackfillOptions(), record_completion, progress, stop)
        finally:
            if progress is not None:
                progress.finish()
        report.elapsed_seconds = time.monotonic() - started
        log.info(report.log_line())
        if self._on_pass is not None and not report.dry_run:
            self._on_pass(report)
        return report

    def _pass(
        self,
        sources: Sequence[Source],
        options: BackfillOptions,
        record_completion: bool,
        progress: Progress | None,
        stop: Callable[[], bool],
    ) -> BackfillReport:
        started = time.monotonic()
        sources = distinct_sources(list(sources))
        report = BackfillReport(sources={s.uri: SourceCounts() for s in sources}, dry_run=options.dry_run)
        # The ids the table knows for these buckets: one Arrow column, read once (step 2 uses it).
        known = self._table.known_ids(sorted({s.bucket for s in sources}))
        pending = _Backlog()
        # 1. list: all sources in parallel, page by page
        for listed in list_sources(self._lister, sources, workers=options.workers, stop=stop):
            counts = report.sources[listed.source.uri]
            if listed.source_done:
                counts.elapsed_seconds = time.monotonic() - started
            counts.listed += len(listed.objects)
            for obj in listed.objects:
                if options.window.contains(obj.last_modified):
                    pending.listed.append((listed.source, backfill_event(obj)))
                else:
                    counts.outside_window += 1
            # 2. diff: a chunk of listed objects against the table's ids (an Arrow anti-join)
            if len(pending.listed) >= options.diff_chunk:
                self._diff(pending, known, report, options)
            # 3. write: commit the new events in chunks (insert-if-absent; conflicts retried)
            while len(pending.new) >= options.commit_chunk:
                self._write(pending, report, options.commit_chunk)
            if progress is not None:
                progress.update(report)
        report.interrupted = stop()
        if not report.interrupted:
            self._diff(pending, known, report, options)
            while pending.new:
                self._write(pending, report, options.commit_chunk)
        # 4. record completion: the time of this pass, so a restarted capture does not re-run it at once
        if record_completion and not options.dry_run and not report.interrupted:
            report.completed_at, report.table_version = self._table.record_completion(
                int(time.time()), custom_metadata={"s3events.writer": "backfill"}
            )
        return report

    def _diff(
        self, pending: _Backlog, known: pa.Table, report: BackfillReport, options: BackfillOptions
    ) -> None:
        listed, pending.listed = pending.listed, []
        absent = unknown_positions(
            [e.event_id for _, e in listed],
            known,
            listed_at=[e.event_time for _, e in listed],
            window=self._uploaded_again_after,
        )
        for position, (source, event) in enumerate(listed):
            counts = report.sources[source.uri]
            if position not in absent:
                counts.already_known += 1
                continue
            counts.new += 1
            if options.dry_run:
                if len(report.sample) < options.sample_size:
                    report.sample.append(f"s3://{event.bucket}/{event.key}")
            else:
                pending.new.append(event)

    def _write(self, pending: _Backlog, report: BackfillReport, chunk: int) -> None:
        events, pending.new = pending.new[:chunk], pending.new[chunk:]
        now = datetime.now(UTC)
        result = self._table.commit(
            [EventRecord(event=e, source="backfill", captured_at=now) for e in events],
            custom_metadata={"s3events.writer": "backfill", "s3events.events": str(len(events))},
        )
        report.injected += result.written
        report.raced += result.duplicates
        report.table_version = result.version


def build_backfill(
    settings: Settings, *, page_size: int = 1000, metrics: BackfillObserved | None = None
) -> Backfill:
    options = aws.options_from(settings)
    window = timedelta(days=settings.get(keys.METADATA_DEDUPE_WINDOW_DAYS))
    table = BackfillTable(
        settings.require(keys.METADATA_TABLE_PATH),
        storage_options=aws.FreshStorageOptions(options),
        commit_attempts=settings.get(keys.CAPTURE_COMMIT_MAX_ATTEMPTS),
        dedupe_window=window,
    )
    on_pass = metrics.backfill.record if metrics is not None else None
    return Backfill(
        S3Lister(options, page_size=page_size), table, on_pass=on_pass, uploaded_again_after=window
    )


def configured_sources(settings: Settings) -> list[Source]:
    return [Source.parse(uri) for uri in settings.get(keys.BACKFILL_SOURCES)]


def run_backfill(
    settings: Settings,
    *,
    sources: Sequence[str] | None = None,
    options: BackfillOptions | None = None,
    progress: Progress | None = None,
    stop: Callable[[], bool] = lambda: False,
    metrics: BackfillObserved | None = None,
) -> BackfillReport:
    """One pass over `sources` (s3:// URIs), else over `s3events.backfill.sources`.

    Only a full pass (the configured sources, no time window) records its completion time: that is the
    pass the periodic schedule in capture stands for.
    """
    options = options or BackfillOptions()
    chosen = [Source.parse(uri) for uri in sources] if sources else configured_sources(settings)
    full = not sources and options.window.unbounded
    return build_backfill(settings, page_size=options.page_size, metrics=metrics).run_once(
        chosen, options, record_completion=full, progress=progress, stop=stop
    )
