"""Backfill's metric group: what its passes listed and injected, recorded from each `BackfillReport`."""

from __future__ import annotations

from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from s3events.backfill.model import BackfillReport
from s3events.observe.metrics import PASS_BUCKETS


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
            buckets=PASS_BUCKETS,
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


class BackfillObserved(Protocol):
    """The metric group a backfill records into."""

    @property
    def backfill(self) -> BackfillMetrics: ...
