"""The catalog's metric group: registrations made, syncs that failed, how far each entry lags its table."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge


class CatalogMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registrations = Counter(
            "s3events_catalog_registrations",
            "catalog entries written: action=create (a target's first commit) or update (its schema or "
            "partition columns changed)",
            ["target", "action"],
            registry=registry,
        )
        self.failures = Counter(
            "s3events_catalog_sync_failures",
            "catalog syncs that failed (retried next cycle; the data commit stands)",
            ["target"],
            registry=registry,
        )
        self.behind_versions = Gauge(
            "s3events_catalog_behind_versions",
            "Delta versions a target's catalog entry lags its table by (0 when in step)",
            ["target"],
            registry=registry,
        )

    def declare(self, targets: Iterable[str]) -> None:
        for target in targets:
            self.failures.labels(target)
            self.behind_versions.labels(target).set(0)

    # SyncObserver
    def registered(self, target: str, action: str) -> None:
        self.registrations.labels(target, action).inc()

    def failed(self, target: str) -> None:
        self.failures.labels(target).inc()

    def behind(self, target: str, versions: int) -> None:
        self.behind_versions.labels(target).set(versions)
