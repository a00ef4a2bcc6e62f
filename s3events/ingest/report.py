"""What an ingest cycle reports: one line per batch, each target's progress, the cycle's whole result."""

from __future__ import annotations

from dataclasses import dataclass, field

from s3events.ingest.model import Checkpoint


@dataclass(slots=True)
class BatchReport:
    target: str
    files: int
    rows: int
    errors: int
    deleted: int
    start: Checkpoint
    end: Checkpoint
    version: int | None
    seconds: float
    bytes: int = 0  # of the files read, as their events give their sizes
    fast_path_files: int = 0  # of `files`: read on the JSON fast path (the rest through Spark's line path)
    skipped: dict[str, str] = field(default_factory=dict)  # files not read: uri -> reason
    filtered: int = 0  # input rows the target's transform removed
    deletes: int = 0  # merge mode: target rows removed by a delete record (delete.field)
    deletes_noop: int = 0  # delete records that removed nothing (key absent, or held with a newer value)
    rescued: int = 0  # rows written with data in the rescued column
    ignored_fields: int = 0  # new fields schema.evolution=ignore dropped (distinct names)

    def log_line(self) -> str:
        return (
            f"ingest batch: target={self.target} files={self.files} rows={self.rows} errors={self.errors} "
            f"deleted={self.deleted} "
            f"{f'filtered={self.filtered} ' if self.filtered else ''}"
            f"{f'rescued={self.rescued} ' if self.rescued else ''}"
            f"{f'ignored_fields={self.ignored_fields} ' if self.ignored_fields else ''}"
            f"{self._deletes()}"
            f"checkpoint={self.start.label}->{self.end.label} "
            f"table_version={self.version} elapsed={self.seconds:.2f}s"
        )

    def _deletes(self) -> str:
        if not (self.deletes or self.deletes_noop):
            return ""
        return f"deletes={self.deletes} deletes_noop={self.deletes_noop} "


@dataclass(frozen=True, slots=True)
class TargetProgress:
    """Where a target stands after a cycle: the metadata version it has read through, how many versions it
    still has to read, and the age of the oldest change routed to it that it had not ingested when its
    latest batch was planned (0 once caught up)."""

    checkpoint_version: int
    lag_versions: int
    lag_seconds: float


@dataclass(slots=True)
class IngestCycle:
    batches: list[BatchReport] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    progress: dict[str, TargetProgress] = field(default_factory=dict)

    @property
    def idle(self) -> bool:
        return not self.batches
