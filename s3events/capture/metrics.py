"""Capture's metric group: what its cycles did, recorded from each `CycleResult`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from s3events.backfill.metrics import BackfillObserved
from s3events.capture.cycle import CycleResult
from s3events.observe.metrics import DURATION_BUCKETS


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
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.commit_seconds = Histogram(
            "s3events_capture_commit_duration_seconds",
            "duration of the metadata (and quarantine) commit of a cycle",
            buckets=DURATION_BUCKETS,
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


class CaptureObserved(BackfillObserved, Protocol):
    """The metric groups a capture process records into (its periodic backfill's too)."""

    @property
    def capture(self) -> CaptureMetrics: ...
