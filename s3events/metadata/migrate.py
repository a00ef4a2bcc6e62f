"""`s3events migrate`: rewrite a metadata table of schema version 1 (unpartitioned) into identity buckets.

Why it is safe for ingest: the rewrite is one data-changing overwrite (delta-rs cannot change a table's
partitioning otherwise), so its change feed deletes every row and inserts it again, with the same event
id and event time; the feed drops such moved rows (`ingest.feed.new_rows`), and ingest checkpoints are
metadata versions, which go on counting. Files of earlier versions are only removed, so a lagging
target still reads them (vacuum keeps them as long as it needs, `maintenance.model.keep_since`).

Writers should be stopped (the command refuses a table committed to within the last minute unless
forced): delta-rs does not make a concurrent append conflict with an overwrite, so rows a writer
commits meanwhile land unbucketed. They are bucketed by a MERGE right after (their change feed is moved
rows too), but a writer of the new layout would not have seen them for its duplicate check.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, write_deltalake

from s3events.errors import CommitConflict, FatalError
from s3events.infra import aws, delta, delta_stats
from s3events.infra.table_info import data_files
from s3events.metadata.schema import (
    ID_BUCKET,
    METADATA_PARTITION_BY,
    METADATA_SCHEMA,
    METADATA_SCHEMA_VERSION,
    id_buckets,
    is_bucketed,
)

log = logging.getLogger(__name__)

QUIET = timedelta(minutes=1)  # a table committed to more recently probably has a writer running
_WRITER = {"s3events.writer": "migrate"}
_STRAGGLER_ROUNDS = 5


@dataclass(slots=True)
class MigrationReport:
    path: str
    dry_run: bool
    state: str = ""  # absent | bucketed | migrated | would migrate
    rows: int = 0
    files_before: int = 0
    files_after: int = 0
    version_before: int | None = None
    version_after: int | None = None
    stragglers: int = 0  # rows a concurrent writer added meanwhile, bucketed afterwards
    elapsed_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        if self.state in ("absent", "bucketed"):
            what = "no table yet" if self.state == "absent" else "already in identity buckets, nothing to do"
            return f"metadata {self.path}: {what}"
        text = (
            f"metadata {self.path}: {self.state}: {self.rows} rows, files {self.files_before}"
            f" -> {self.files_after}, version {self.version_before} -> {self.version_after}"
            f", {self.elapsed_seconds:.1f} s"
        )
        if self.stragglers:
            text += f", {self.stragglers} rows committed meanwhile bucketed after"
        return "; ".join([text, *self.notes])


def migrate(
    path: str, storage: aws.StorageOptions, *, now: datetime, dry_run: bool = False, force: bool = False
) -> MigrationReport:
    started = time.monotonic()
    report = MigrationReport(path, dry_run)
    table = delta.open_table(path, aws.resolve(storage), kind="metadata")
    if table is None:
        report.state = "absent"
        return report
    delta.check_schema_version(table, path=path, kind="metadata", supported=METADATA_SCHEMA_VERSION)
    if is_bucketed(table) and not _unbucketed_files(table):
        report.state = "bucketed"
        return report
    report.version_before = int(table.version())
    report.files_before = len(table.file_uris())
    report.rows = int(table.count())
    if dry_run:
        report.state = "would migrate"
        report.files_after = report.files_before
        return report
    if not force:
        _refuse_if_busy(table, path, now=now)
    if not is_bucketed(table):
        _mark_schema_version(table, path)
        _rewrite(path, storage)
    report.stragglers = _bucket_stragglers(path, storage)
    after = _open(path, storage)
    report.state = "migrated"
    report.version_after = int(after.version())
    report.files_after = len(after.file_uris())
    report.elapsed_seconds = time.monotonic() - started
    log.info("%s", report.line())
    return report


def _open(path: str, storage: aws.StorageOptions) -> DeltaTable:
    table = delta.open_table(path, aws.resolve(storage), kind="metadata")
    if table is None:
        raise FatalError(f"the metadata table {path} disappeared during the migration")
    return table


def _refuse_if_busy(table: DeltaTable, path: str, *, now: datetime) -> None:
    last = table.history(1)[0].get("timestamp")
    if last is None:
        return
    committed = datetime.fromtimestamp(int(last) / 1000, UTC)
    if now - committed < QUIET:
        raise FatalError(
            f"the metadata table {path} was committed to at {committed:%Y-%m-%dT%H:%M:%SZ}, "
            f"less than {int(QUIET.total_seconds())} s ago: stop capture and backfill before migrating it "
            "(rows they commit during the rewrite would miss its duplicate check), or pass --force"
        )


def _mark_schema_version(table: DeltaTable, path: str) -> None:
    """Schema version 2 first: an s3events that only knows version 1 refuses the table from its next open
    on, instead of writing rows without a bucket. A run killed after this resumes where it stopped."""
    with delta.committing(path, kind="metadata"):
        table.alter.set_table_properties(
            {delta.SCHEMA_VERSION_PROPERTY: str(METADATA_SCHEMA_VERSION)},
            raise_if_not_exists=False,
            commit_properties=CommitProperties(custom_metadata=_WRITER),
        )


def _with_bucket(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield batch.append_column(ID_BUCKET, id_buckets(batch.column("event_id"))).cast(METADATA_SCHEMA)


@delta.retry_conflicts(5)
def _rewrite(path: str, storage: aws.StorageOptions) -> None:
    """One overwrite of the table with itself, bucketed, streamed (the table never sits in memory)."""
    table = _open(path, storage)
    columns = [name for name in METADATA_SCHEMA.names if name != ID_BUCKET]
    batches = table.to_pyarrow_dataset().to_batches(columns=columns)
    reader = pa.RecordBatchReader.from_batches(METADATA_SCHEMA, _with_bucket(batches))
    with delta.committing(path, kind="metadata"):
        write_deltalake(
            table,
            reader,
            mode="overwrite",
            schema_mode="overwrite",
            partition_by=METADATA_PARTITION_BY,
            writer_properties=delta_stats.writer_properties(METADATA_SCHEMA),
            commit_properties=CommitProperties(custom_metadata=_WRITER),
        )


def _unbucketed_files(table: DeltaTable) -> int:
    """Files without a bucket value (0 for an unpartitioned table: it has no bucket column)."""
    return sum(1 for bucket in data_files(table).partitions.get(ID_BUCKET, []) if bucket is None)


def _bucket_stragglers(path: str, storage: aws.StorageOptions) -> int:
    """Move rows without a bucket (a writer's commit that raced the rewrite) into theirs, by a MERGE that
    changes only `id_bucket`: a conflicting writer costs a retry, never a row."""
    moved = 0
    for _ in range(_STRAGGLER_ROUNDS):
        table = _open(path, storage)
        if not _unbucketed_files(table):
            return moved
        rows = table.to_pyarrow_dataset().to_table(columns=["event_id"], filter=pc.field(ID_BUCKET).is_null())
        source = rows.append_column("bucket", id_buckets(rows.column("event_id")))
        try:
            with delta.committing(path, kind="metadata"):
                metrics = (
                    table.merge(
                        source,
                        predicate=f"t.event_id = s.event_id AND t.{ID_BUCKET} IS NULL",
                        source_alias="s",
                        target_alias="t",
                        writer_properties=delta_stats.writer_properties(table.schema()),
                        commit_properties=CommitProperties(custom_metadata=_WRITER),
                    )
                    .when_matched_update(updates={ID_BUCKET: "s.bucket"})
                    .execute()
                )
        except CommitConflict:
            continue  # a writer committed meanwhile: the next round reads its rows too
        moved += int(metrics.get("num_target_rows_updated", 0))
    raise FatalError(
        f"the metadata table {path} keeps receiving rows without an identity bucket: an s3events older "
        "than schema version 2 is still writing it; stop it and run `s3events migrate` again"
    )
