"""One maintenance pass over one Delta table, through delta-rs (steps in the package docstring).

delta-rs behaviour this is built on (deltalake 1.6, measured): `optimize.compact` bin-packs files under
its target size and commits them with `dataChange=false`, which `load_cdf` skips; a compaction that
loses a race with another writer raises CommitFailedError and is tried again on a fresh snapshot.
`cleanup_metadata` honours the table property `delta.logRetentionDuration` and removes only commit files
older than the newest checkpoint. `vacuum` deletes files no longer referenced whose removal is older than
its retention, and untracked files (a killed writer's) older than it.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable
from deltalake.exceptions import CommitFailedError
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from s3events.infra import aws, delta, delta_commit
from s3events.maintenance.model import (
    APP_ID,
    Keep,
    MaintenanceOptions,
    TableReport,
    TableToMaintain,
    log_retention_days,
    vacuum_retention_hours,
)

log = logging.getLogger(__name__)

CHECKPOINTED_AT = f"{APP_ID}/checkpoint"  # app transaction: the version of the last pass's checkpoint
_WRITER = {"s3events.writer": "maintenance"}
_LOG_RETENTION = "delta.logRetentionDuration"


def last_pass(path: str, storage: aws.StorageOptions) -> int | None:
    """Epoch seconds of the last completed pass on the table, None when there was none (or no table)."""
    return delta_commit.transaction_versions(path, [APP_ID], aws.resolve(storage))[APP_ID]


def maintain(
    table: TableToMaintain,
    storage: aws.StorageOptions,
    options: MaintenanceOptions,
    *,
    now: datetime,
    keep: Keep | None = None,
) -> TableReport:
    """One pass over `table`; `keep` protects what a lagging reader of its change feed still needs."""
    started = time.monotonic()
    report = TableReport(table.label, table.path, dry_run=options.dry_run)
    opened = delta.open_table(table.path, aws.resolve(storage))
    if opened is None:
        report.exists = False
        return report
    sizes = _file_sizes(opened)
    report.files_before, report.bytes_before = len(sizes), sum(sizes)
    report.small_files_before = sum(1 for s in sizes if s < options.small_file_bytes)
    report.version_before = int(opened.version())
    if keep is not None:
        since = f"{keep.since:%Y-%m-%dT%H:%M:%SZ}"
        report.notes.append(f"keeping the change feed since {since} for {keep.reader}")
    # 1. compact
    if options.dry_run:
        report.compacted_from = report.small_files_before if report.small_files_before > 1 else 0
    elif report.small_files_before > 1:
        metrics = _compact(table.path, storage, options)
        report.compacted_from = int(metrics.get("numFilesRemoved", 0))
        report.compacted_into = int(metrics.get("numFilesAdded", 0))
    current = _open(table.path, storage)
    # 2. checkpoint, when enough commits followed the last one
    checkpointed = current.transaction_version(CHECKPOINTED_AT)
    version = int(current.version())
    report.checkpoint = checkpointed is None or version - checkpointed >= options.checkpoint_interval
    if report.checkpoint and not options.dry_run:
        current.create_checkpoint()
    # 3. log cleanup behind the checkpoint, keeping what a lagging reader needs
    days = log_retention_days(options.log_retention_days, now=now, keep=keep)
    report.logs_kept_days = days
    if not options.dry_run:
        wanted = f"interval {days} days"
        if current.metadata().configuration.get(_LOG_RETENTION) != wanted:
            current.alter.set_table_properties({_LOG_RETENTION: wanted}, raise_if_not_exists=False)
            current = _open(table.path, storage)
        current.cleanup_metadata()
    # 4. vacuum
    hours = vacuum_retention_hours(options.vacuum_retention_hours, now=now, keep=keep)
    report.vacuum_retention_hours = hours
    removed = current.vacuum(
        retention_hours=hours,
        dry_run=options.dry_run,
        enforce_retention_duration=False,  # our floor (7 days) is the key's; `hours` never goes below it
        commit_properties=CommitProperties(custom_metadata=_WRITER),
    )
    report.vacuumed = len(removed)
    # 5. record the pass (and the checkpoint's version) as app transactions
    if not options.dry_run:
        current = _open(table.path, storage)
        marks = {APP_ID: int(now.timestamp())}
        if report.checkpoint:
            marks[CHECKPOINTED_AT] = int(current.version()) + 1  # the version this commit becomes
        _record(table.path, storage, marks)
    final = _open(table.path, storage)
    after = _file_sizes(final)
    report.files_after, report.bytes_after = len(after), sum(after)
    report.version_after = int(final.version())
    report.elapsed_seconds = time.monotonic() - started
    return report


def _open(path: str, storage: aws.StorageOptions) -> DeltaTable:
    table = delta.open_table(path, aws.resolve(storage))
    if table is None:
        raise FileNotFoundError(f"{path} disappeared during maintenance")
    return table


def _file_sizes(table: DeltaTable) -> list[int]:
    return [int(s) for s in table.get_add_actions(flatten=True).column("size_bytes").to_pylist()]


@retry(
    retry=retry_if_exception_type(CommitFailedError),
    wait=wait_exponential_jitter(multiplier=0.2, max=5.0),
    stop=stop_after_attempt(5),
    reraise=True,
)
def _compact(path: str, storage: aws.StorageOptions, options: MaintenanceOptions) -> dict[str, int]:
    """Bin-pack small files on a fresh snapshot; another writer winning the race costs a retry."""
    metrics = _open(path, storage).optimize.compact(
        target_size=options.target_file_bytes,
        commit_properties=CommitProperties(custom_metadata=_WRITER),
    )
    return {k: int(v) for k, v in metrics.items() if isinstance(v, int | float)}


def _record(path: str, storage: aws.StorageOptions, marks: dict[str, int]) -> None:
    table = _open(path, storage)
    delta_commit.commit_files(
        path,
        [],
        schema=pa.schema(table.schema()),
        partition_by=list(table.metadata().partition_columns),
        storage_options=aws.resolve(storage),
        transactions=marks,
        custom_metadata=_WRITER,
    )
