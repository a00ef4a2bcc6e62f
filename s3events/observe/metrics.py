"""The Prometheus metrics of one s3events process, in a registry of its own.

Each flow records here at one place, from the result object it already builds: a capture cycle's
`CycleResult`, an ingest cycle's `IngestCycle`, a backfill pass's `BackfillReport`, a maintenance pass's
`TableReport`s. Label values are bounded: target names, table labels, AWS operation names and error
codes, never object keys or bucket paths. A process registers the groups it uses (`metrics.capture`, ...)
on first use, so a capture process exposes no ingest families.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import cached_property
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

if TYPE_CHECKING:
    from s3events.backfill.model import BackfillReport
    from s3events.capture.cycle import CycleResult
    from s3events.ingest.cycle import IngestCycle
    from s3events.maintenance.model import TableReport

# Seconds: from a quick commit to a batch of large files read on a cluster.
_DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)
_PASS_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0)

# How ingest's skip reasons (`ingest.files.objects`) read, as bounded label values.
SKIP_KINDS = (("object not found", "missing"), ("object changed", "changed"))


def skip_kind(reason: str) -> str:
    """missing | changed | unreadable (access denied, archived, not Parquet, ...)."""
    return next((kind for prefix, kind in SKIP_KINDS if reason.startswith(prefix)), "unreadable")


class CaptureMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, doc: str) -> Counter:
            return Counter(f"s3events_capture_{name}", doc, registry=registry)

        self.received = counter("messages_received", "SQS messages received")
        self.deleted = counter("messages_deleted", "SQS messages deleted after their commit")
        self.delete_failed = counter(
            "messages_delete_failed", "committed messages whose delete failed (redelivered, deduplicated)"
        )
        self.written = counter("events_written", "object events written to the metadata table")
        self.duplicates = counter("duplicates_dropped", "events the metadata table already held")
        self.poison = counter("poison_quarantined", "poison messages written to the quarantine table")
        self.ignored = counter("ignored_records", "records of no interest (not object events)")
        self.test_events = counter("test_events", "s3:TestEvent messages dropped")
        self.conflicts = counter("commit_conflicts", "metadata commit conflicts retried on fresh state")
        self.cycles = counter("cycles", "cycles that received messages")
        self.failures = counter("cycle_failures", "cycles that failed (nothing deleted; retried)")
        self.aws_retries = Counter(
            "s3events_capture_aws_retries",
            "SQS calls retried by the AWS SDK, by operation and error code",
            ["operation", "code"],
            registry=registry,
        )
        self.cycle_seconds = Histogram(
            "s3events_capture_cycle_duration_seconds",
            "duration of cycles that received messages (receive, parse, commit, delete)",
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self.commit_seconds = Histogram(
            "s3events_capture_commit_duration_seconds",
            "duration of the metadata (and quarantine) commit of a cycle",
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self.in_hand = Gauge(
            "s3events_capture_messages_in_hand",
            "messages received and not yet deleted or released (kept invisible by the heartbeat)",
            registry=registry,
        )
        self.last_success = Gauge(
            "s3events_capture_last_success_timestamp_seconds",
            "unix time of the last cycle that succeeded (committed its batch, or found the queue empty)",
            registry=registry,
        )
        self.table_version = Gauge(
            "s3events_capture_metadata_table_version",
            "metadata table version after capture's last commit",
            registry=registry,
        )

    def record(self, result: CycleResult, *, now: float) -> None:
        self.last_success.set(now)
        if not result.received:
            return
        self.cycles.inc()
        self.received.inc(result.received)
        self.deleted.inc(result.deleted)
        self.delete_failed.inc(result.delete_failed)
        self.written.inc(result.written)
        self.duplicates.inc(result.duplicates)
        self.poison.inc(result.poison)
        self.ignored.inc(result.ignored)
        self.test_events.inc(result.test_events)
        self.conflicts.inc(result.commit_conflicts)
        self.cycle_seconds.observe(result.elapsed_seconds)
        self.commit_seconds.observe(result.commit_seconds)
        if result.table_version is not None:
            self.table_version.set(result.table_version)

    def track_in_hand(self, count: Callable[[], int]) -> None:
        self.in_hand.set_function(lambda: float(count()))

    def record_retry(self, operation: str, code: str) -> None:
        self.aws_retries.labels(operation=operation, code=code).inc()


class IngestMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(f"s3events_ingest_{name}", doc, ["target", *labels], registry=registry)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(f"s3events_ingest_{name}", doc, ["target"], registry=registry)

        self.batches = counter("batches", "batches committed (data and checkpoint in one commit)")
        self.files = counter("files", "input files read")
        self.fast_path_files = counter(
            "fast_path_files", "input files read on the JSON fast path (the rest take Spark's line path)"
        )
        self.skipped = counter(
            "skipped_files", "input files not read, by kind: missing, changed, unreadable", "kind"
        )
        self.rows = counter("rows", "rows written to the target table")
        self.bytes = counter("bytes", "bytes of the input files read (object sizes from their events)")
        self.error_rows = counter("error_rows", "rows written to the target's error table")
        self.rows_deleted = counter("rows_deleted", "rows removed from a mirroring target")
        self.failures = counter("target_failures", "batches that failed (the target retries them)")
        self.batch_seconds = Histogram(
            "s3events_ingest_batch_duration_seconds",
            "duration of one batch: plan, read on Spark, commit",
            ["target"],
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self.checkpoint = gauge("checkpoint_version", "metadata version the target has read through")
        self.lag_versions = gauge("lag_versions", "metadata versions the target has still to read")
        self.lag_seconds = gauge(
            "lag_seconds",
            "age of the oldest change routed to the target not yet ingested, as of its latest batch; "
            "0 when caught up",
        )
        self.last_success = gauge(
            "last_success_timestamp_seconds",
            "unix time the target last committed a batch or was found caught up",
        )

    def record(self, cycle: IngestCycle, *, now: float) -> None:
        for name, progress in cycle.progress.items():
            self.checkpoint.labels(name).set(progress.checkpoint_version)
            self.lag_versions.labels(name).set(progress.lag_versions)
            self.lag_seconds.labels(name).set(progress.lag_seconds)
            if name not in cycle.failed:
                self.last_success.labels(name).set(now)
        for name in cycle.failed:
            self.failures.labels(name).inc()
        for batch in cycle.batches:
            target = batch.target
            self.batches.labels(target).inc()
            self.files.labels(target).inc(batch.files)
            self.fast_path_files.labels(target).inc(batch.fast_path_files)
            self.rows.labels(target).inc(batch.rows)
            self.bytes.labels(target).inc(batch.bytes)
            self.error_rows.labels(target).inc(batch.errors)
            self.rows_deleted.labels(target).inc(batch.deleted)
            self.batch_seconds.labels(target).observe(batch.seconds)
            for reason in batch.skipped.values():
                self.skipped.labels(target, skip_kind(reason)).inc()

    def declare(self, targets: Iterable[str]) -> None:
        """Expose every target's counters at 0 from the start: rate() and alerts see the first batch."""
        for target in targets:
            for counter in (
                self.batches,
                self.files,
                self.fast_path_files,
                self.rows,
                self.bytes,
                self.error_rows,
                self.rows_deleted,
                self.failures,
            ):
                counter.labels(target)


class BackfillMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, doc: str) -> Counter:
            return Counter(f"s3events_backfill_{name}", doc, registry=registry)

        self.passes = counter("passes", "backfill passes run (completed or interrupted)")
        self.listed = counter("objects_listed", "objects listed")
        self.known = counter("objects_already_known", "listed objects the metadata table already held")
        self.injected = counter("objects_injected", "events written for objects the table did not know")
        self.pass_seconds = Histogram(
            "s3events_backfill_pass_duration_seconds",
            "duration of one backfill pass",
            buckets=_PASS_BUCKETS,
            registry=registry,
        )
        self.last_complete = Gauge(
            "s3events_backfill_last_complete_pass_timestamp_seconds",
            "unix time recorded by the last full pass that completed",
            registry=registry,
        )

    def record(self, report: BackfillReport) -> None:
        self.passes.inc()
        self.listed.inc(report.listed)
        self.known.inc(report.already_known)
        self.injected.inc(report.injected)
        self.pass_seconds.observe(report.elapsed_seconds)
        if report.completed_at is not None:
            self.last_complete.set(report.completed_at)


class MaintenanceMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(f"s3events_maintenance_{name}", doc, ["table", *labels], registry=registry)

        self.passes = counter("passes", "maintenance passes per table, by kind: full or compaction", "kind")
        self.failures = counter("failures", "maintenance passes that failed")
        self.compacted = counter("files_compacted", "small files rewritten by compaction")
        self.rewritten = counter("bytes_rewritten", "bytes of the small files compaction rewrote")
        self.vacuumed = counter("files_vacuumed", "files deleted by vacuum")

    def record(self, reports: Iterable[TableReport]) -> None:
        for report in reports:
            if not report.exists or report.dry_run:
                continue
            if report.error:
                self.failures.labels(report.label).inc()
                continue
            kind = "compaction" if report.compaction_only else "full"
            self.passes.labels(report.label, kind).inc()
            self.compacted.labels(report.label).inc(report.compacted_from)
            self.rewritten.labels(report.label).inc(report.compacted_bytes)
            self.vacuumed.labels(report.label).inc(report.vacuumed)


class Metrics:
    """All metrics of one process. Tests create as many as they like; each has its own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()

    @cached_property
    def capture(self) -> CaptureMetrics:
        return CaptureMetrics(self.registry)

    @cached_property
    def ingest(self) -> IngestMetrics:
        return IngestMetrics(self.registry)

    @cached_property
    def backfill(self) -> BackfillMetrics:
        return BackfillMetrics(self.registry)

    @cached_property
    def maintenance(self) -> MaintenanceMetrics:
        return MaintenanceMetrics(self.registry)


def now() -> float:
    """Wall-clock unix time for the *_timestamp_seconds gauges."""
    return time.time()
