"""Ingest's metric group: per target, what its batches read and wrote, recorded from each `IngestCycle`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from s3events.ingest.cycle import IngestCycle
from s3events.ingest.notify.metrics import NotifyMetrics
from s3events.observe.metrics import DURATION_BUCKETS

# How ingest's skip reasons (`ingest.files.objects`) read, as bounded label values.
SKIP_KINDS = (("object not found", "missing"), ("object changed", "changed"))


def skip_kind(reason: str) -> str:
    """missing | changed | unreadable (access denied, archived, not Parquet, ...)."""
    return next((kind for prefix, kind in SKIP_KINDS if reason.startswith(prefix)), "unreadable")


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
        self.deletes = counter("deletes", "merge target rows removed by a delete record (delete.field)")
        self.deletes_noop = counter(
            "deletes_noop",
            "delete records that removed nothing: the key was absent (or held with a newer ordering.field)",
        )
        self.rows_filtered = counter(
            "rows_filtered", "input rows the target's transform removed (a WHERE: not errors)"
        )
        self.rescued_rows = counter("rescued_rows", "rows written with data in the rescued column")
        self.ignored_fields = counter(
            "ignored_fields", "new fields schema.evolution=ignore dropped (distinct field names per batch)"
        )
        self.failures = counter("target_failures", "batches that failed (the target retries them)")
        self.batch_seconds = Histogram(
            "s3events_ingest_batch_duration_seconds",
            "duration of one batch: plan, read on Spark, commit",
            ["target"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.checkpoint = gauge("checkpoint_version", "metadata version the target has read through")
        self.lag_versions = gauge("lag_versions", "metadata versions the target has still to read")
        self.lag_seconds = gauge(
            "lag_seconds",
            "age of the oldest change routed to the target not yet ingested, as of its latest batch; "
            "0 when caught up",
        )
        self.notify = NotifyMetrics(registry)
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
            self.rows_filtered.labels(target).inc(batch.filtered)
            self.deletes.labels(target).inc(batch.deletes)
            self.deletes_noop.labels(target).inc(batch.deletes_noop)
            self.rescued_rows.labels(target).inc(batch.rescued)
            self.ignored_fields.labels(target).inc(batch.ignored_fields)
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
                self.rows_filtered,
                self.deletes,
                self.deletes_noop,
                self.rescued_rows,
                self.ignored_fields,
                self.failures,
            ):
                counter.labels(target)


class IngestObserved(Protocol):
    """The metric group an ingest process records into."""

    @property
    def ingest(self) -> IngestMetrics: ...
