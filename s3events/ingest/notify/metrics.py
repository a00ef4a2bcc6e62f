"""Notification metrics, per target and destination kind (sns | sqs | eventbridge)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class NotifyMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["target", "destination"]
        self.published = Counter(
            "s3events_ingest_notify_published",
            "commit notices a destination accepted",
            labels,
            registry=registry,
        )
        self.failures = Counter(
            "s3events_ingest_notify_failures",
            "commit notices a destination did not take after retries (retried next cycle; data goes on)",
            labels,
            registry=registry,
        )
        self.lost = Counter(
            "s3events_ingest_notify_lost_versions",
            "target versions whose commit the log no longer held when due (log cleanup): not announced",
            ["target"],
            registry=registry,
        )
        self.lag = Gauge(
            "s3events_ingest_notify_lag_versions",
            "data commits of the target not yet announced to every destination",
            ["target"],
            registry=registry,
        )
