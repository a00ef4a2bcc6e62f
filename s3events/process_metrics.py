"""All metrics of one s3events process: each flow's metric group, in one registry (`observe` serves it).

A process registers the groups it uses on first use, so a capture process exposes no ingest families.
Maintenance's group is here until it moves beside its flow.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property

from prometheus_client import CollectorRegistry, Counter

from s3events.backfill.metrics import BackfillMetrics
from s3events.capture.metrics import CaptureMetrics
from s3events.catalog.metrics import CatalogMetrics
from s3events.ingest.metrics import IngestMetrics
from s3events.maintenance.model import TableReport


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

    @cached_property
    def catalog(self) -> CatalogMetrics:
        return CatalogMetrics(self.registry)
