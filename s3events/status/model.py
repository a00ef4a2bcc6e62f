"""What `s3events status` reports: plain frozen records, filled by `gather`, shown by `render`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from s3events.ingest.model import Checkpoint


@dataclass(frozen=True, slots=True)
class TableStatus:
    path: str
    exists: bool
    version: int | None = None
    rows: int | None = None
    rows_exact: bool = True
    last_commit_at: datetime | None = None
    files: int | None = None
    small_files: int | None = None  # under a quarter of the compaction target (metadata: of 1 MiB)
    last_maintained_at: datetime | None = None
    error: str | None = None  # why it could not be read


@dataclass(frozen=True, slots=True)
class QueueStatus:
    url: str
    visible: int | None = None
    in_flight: int | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LastError:
    error: str
    file: str | None
    line: int | None
    ingested_at: datetime | None


@dataclass(frozen=True, slots=True)
class TransformStatus:
    """A target's transform as its newest batch commit records it (None fields: no such commit read)."""

    identity: str | None  # the SQL's hash (`transform.TransformSpec.identity`)
    rows_filtered: int | None  # input rows that batch's SQL removed
    version: int | None  # that commit's table version
    error: str | None = None  # why the table's history could not be read


@dataclass(frozen=True, slots=True)
class TargetStatus:
    name: str
    checkpoint: Checkpoint | None
    lag_versions: int | None
    lag_seconds: float | None
    oldest_pending_version: int | None
    oldest_pending_commit_at: datetime | None
    lagging: bool
    table: TableStatus
    error_table: TableStatus
    last_error: LastError | None = None
    error: str | None = None  # why the checkpoint could not be read
    transform: TransformStatus | None = None  # targets with transform.sql / transform.sql.file
    refused: str | None = None  # schema.evolution=fail: why the batch at its checkpoint was refused


@dataclass(frozen=True, slots=True)
class Status:
    generated_at: datetime
    max_lag_seconds: float
    queue: QueueStatus | None
    metadata: TableStatus
    quarantine: TableStatus | None
    targets: tuple[TargetStatus, ...] = ()
    problems: tuple[str, ...] = field(default=())

    @property
    def healthy(self) -> bool:
        return not self.problems

    @property
    def exit_code(self) -> int:
        return 0 if self.healthy else 1
