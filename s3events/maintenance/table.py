"""One maintenance pass over one Delta table, through delta-rs (steps in the package docstring).

delta-rs behaviour this is built on (deltalake 1.6, measured): `optimize.compact` bin-packs files under
its target size and commits them with `dataChange=false`, which `load_cdf` skips; a compaction that
loses a race with another writer raises CommitFailedError and is tried again on a fresh snapshot.
`cleanup_metadata` honours the table property `delta.logRetentionDuration` and removes only commit files
older than the newest checkpoint. `vacuum(full=True)` deletes files no longer referenced whose removal is
older than its retention, and untracked files (a killed writer's, and change data files) whose
modification time is older than it; the default (lite) vacuum never sees untracked files.

Two compactions racing on one table both commit (delta-rs raises no conflict when a file a compaction
removes was already removed by another `dataChange=false` commit), leaving every compacted row twice; a
compaction racing any data-changing writer (MERGE, DELETE) conflicts and is retried. So compaction runs
only under a lease: an app transaction `LEASE` holding the epoch second it expires, taken by a commit that
expects the value it read (delta-rs refuses one of two concurrent commits of one app id) and released by
the compaction commit itself. A pass killed while holding it delays compaction until it expires.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import CommitFailedError
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from s3events.errors import CommitConflict
from s3events.infra import aws, delta, delta_commit, delta_stats
from s3events.infra.delta import TableHandle
from s3events.infra.parquet_files import partition_value
from s3events.infra.table_info import DataFiles, data_files
from s3events.maintenance import statistics
from s3events.maintenance.model import (
    APP_ID,
    LEASE_SECONDS,
    Keep,
    MaintenanceOptions,
    TableReport,
    TableToMaintain,
    log_retention_days,
    vacuum_retention_hours,
)
from s3events.metadata.schema import BUCKET_FILE_BYTES, is_bucketed

log = logging.getLogger(__name__)

CHECKPOINTED_AT = f"{APP_ID}/checkpoint"  # app transaction: the version of the last pass's checkpoint
LEASE = f"{APP_ID}/compaction"  # app transaction: epoch second until which one pass may compact (0: free)
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
    options = _for_layout(opened, options)
    files = data_files(opened)
    _measure_before(report, opened, files, options)
    if keep is not None:
        since = f"{keep.since:%Y-%m-%dT%H:%M:%SZ}"
        report.notes.append(f"keeping the change feed since {since} for {keep.reader}")
    # 1. restate the files whose statistics could mislead a reader (see maintenance/statistics.py)
    report.restated = statistics.restate_lossy(table.path, storage, opened, dry_run=options.dry_run)
    # 2. compact every partition (or the unpartitioned table) where two small files can become one
    crowded = _crowded(files, options, min_small=2)
    if options.dry_run:
        report.compacted_from = crowded.small_files
    elif crowded.small_files:
        handle = handle_for(table.path, storage)
        _compact_under_lease(handle, options, now=now, report=report, crowded=crowded)
    current = _open(table.path, storage)
    # 3. checkpoint, when enough commits followed the last one
    checkpointed = current.transaction_version(CHECKPOINTED_AT)
    version = int(current.version())
    report.checkpoint = checkpointed is None or version - checkpointed >= options.checkpoint_interval
    if report.checkpoint and not options.dry_run:
        current.create_checkpoint()
    # 4. log cleanup behind the checkpoint and 5. vacuum, keeping what a lagging reader needs
    _clean(table.path, storage, options, now=now, keep=keep, report=report)
    # 6. record the pass (the checkpoint's version, the statistics repaired) as app transactions
    if not options.dry_run:
        current = _open(table.path, storage)
        marks = {APP_ID: int(now.timestamp()), **statistics.repair_marks(current)}
        if report.checkpoint:
            marks[CHECKPOINTED_AT] = int(current.version()) + 1  # the version this commit becomes
        _record(table.path, storage, marks)
    _measure_after(report, _open(table.path, storage), started)
    return report


def _clean(
    path: str,
    storage: aws.StorageOptions,
    options: MaintenanceOptions,
    *,
    now: datetime,
    keep: Keep | None,
    report: TableReport,
) -> None:
    """Steps 4 and 5 of a pass: log cleanup behind the checkpoint, then vacuum."""
    days = log_retention_days(options.log_retention_days, now=now, keep=keep)
    report.logs_kept_days = days
    if not options.dry_run:
        _set_log_retention(path, storage, f"interval {days} days")
        _open(path, storage).cleanup_metadata()
    hours = vacuum_retention_hours(options.vacuum_retention_hours, now=now, keep=keep)
    report.vacuum_retention_hours = hours
    removed = _open(path, storage).vacuum(
        retention_hours=hours,
        dry_run=options.dry_run,
        full=True,  # also untracked files: a killed writer's, change data past retention
        enforce_retention_duration=False,  # our floor (7 days) is the key's; `hours` never goes below it
        commit_properties=CommitProperties(custom_metadata=_WRITER),
    )
    report.vacuumed = len(removed)


def handle_for(path: str, storage: aws.StorageOptions) -> TableHandle:
    """A handle on the table for the steps of one compaction (or the checks of a process): opened once,
    then brought up to date commit by commit. Each open reads the last checkpoint, which holds every
    file removed within the tombstone retention (a week by default), so it grows with the table's
    history while the updates between steps read a commit or two."""
    return TableHandle(path, lambda: aws.resolve(storage))


def compact_if_crowded(
    table: TableToMaintain,
    storage: aws.StorageOptions,
    options: MaintenanceOptions,
    *,
    small_files: int,
    now: datetime,
    handle: TableHandle | None = None,
) -> TableReport | None:
    """Compaction alone, of the partitions (or the unpartitioned table) holding at least `small_files`
    small files (between full passes, so commit cost stays flat); None when none does (or no table).
    `handle`: the caller's kept handle on the table (a periodic check), else one for this call."""
    handle = handle or handle_for(table.path, storage)
    opened = handle.latest()
    if opened is None:
        return None
    started = time.monotonic()
    options = _for_layout(opened, options)
    files = data_files(opened)
    crowded = _crowded(files, options, min_small=small_files)
    if not crowded.small_files:
        return None
    report = TableReport(table.label, table.path, compaction_only=True)
    _measure_before(report, opened, files, options)
    _compact_under_lease(handle, options, now=now, report=report, crowded=crowded)
    _measure_after(report, _latest(handle), started)
    return report


def _for_layout(table: DeltaTable, options: MaintenanceOptions) -> MaintenanceOptions:
    """The metadata table's identity buckets are compacted towards BUCKET_FILE_BYTES (see there)."""
    if is_bucketed(table) and options.target_file_bytes > BUCKET_FILE_BYTES:
        return replace(options, target_file_bytes=BUCKET_FILE_BYTES)
    return options


def _measure_before(
    report: TableReport, table: DeltaTable, files: DataFiles, options: MaintenanceOptions
) -> None:
    report.files_before, report.bytes_before = len(files.sizes), sum(files.sizes)
    report.small_files_before = files.small(options.small_file_bytes)
    report.version_before = int(table.version())


def _measure_after(report: TableReport, table: DeltaTable, started: float) -> None:
    sizes = data_files(table).sizes
    report.files_after, report.bytes_after = len(sizes), sum(sizes)
    report.version_after = int(table.version())
    report.elapsed_seconds = time.monotonic() - started


@dataclass(frozen=True, slots=True)
class _Crowded:
    """What to compact: `filters` for delta-rs (None: the whole table) and the small files they hold."""

    filters: list[tuple[str, str, Any]] | None
    small_files: int


def _crowded(files: DataFiles, options: MaintenanceOptions, *, min_small: int) -> _Crowded:
    """The partitions holding at least `min_small` small files. One partition column gives an `in`
    filter of their values; other layouts (a target partitioned by several columns, a null value) are
    compacted whole, as delta-rs bins each partition apart anyway."""
    columns = list(files.partitions)
    values = [files.partitions[c] for c in columns]
    keys = list(zip(*values, strict=True)) if columns else [()] * len(files.sizes)
    small = Counter(
        key for key, size in zip(keys, files.sizes, strict=True) if size < options.small_file_bytes
    )
    chosen = {key: n for key, n in small.items() if n >= min_small}
    total = sum(chosen.values())
    if not chosen or len(columns) != 1 or any(key[0] is None for key in chosen):
        return _Crowded(None, total)
    return _Crowded([(columns[0], "in", sorted(str(partition_value(key[0])) for key in chosen))], total)


def _compact_under_lease(
    handle: TableHandle,
    options: MaintenanceOptions,
    *,
    now: datetime,
    report: TableReport,
    crowded: _Crowded,
) -> None:
    lease = _take_lease(handle, now=int(now.timestamp()))
    if isinstance(lease, str):
        report.notes.append(lease)
        return
    before = statistics.files_of(_latest(handle))
    try:
        metrics = _compact(handle, options, crowded.filters)
    finally:
        _release_lease(handle, lease)
    statistics.restate_new(handle.path, handle.storage_options(), _latest(handle), before, label=report.label)
    report.compacted_from = int(metrics.get("numFilesRemoved", 0))
    report.compacted_into = int(metrics.get("numFilesAdded", 0))
    report.compacted_bytes = int(metrics.get("bytesRemoved", 0))


def _open(path: str, storage: aws.StorageOptions) -> DeltaTable:
    table = delta.open_table(path, aws.resolve(storage))
    if table is None:
        raise FileNotFoundError(f"{path} disappeared during maintenance")
    return table


def _latest(handle: TableHandle) -> DeltaTable:
    table = handle.latest()
    if table is None:
        raise FileNotFoundError(f"{handle.path} disappeared during maintenance")
    return table


_retry_conflicts = retry(
    retry=retry_if_exception_type((CommitFailedError, CommitConflict)),
    wait=wait_exponential_jitter(multiplier=0.2, max=5.0),
    stop=stop_after_attempt(5),
    reraise=True,
)


def _take_lease(handle: TableHandle, *, now: int) -> int | str:
    """The epoch second our compaction lease expires, or why another pass holds it."""
    held = _latest(handle).transaction_version(LEASE)
    if held is not None and held > now:
        return (
            f"compaction skipped: another maintenance pass holds this table's compaction lease until "
            f"{datetime.fromtimestamp(held, UTC):%Y-%m-%dT%H:%M:%SZ} (a pass killed while compacting "
            "holds it until then)"
        )
    until = now + LEASE_SECONDS
    try:
        _commit_marks(handle, {LEASE: until}, expected={LEASE: held})
    except CommitConflict:
        return "compaction skipped: another maintenance pass took this table's compaction lease first"
    return until


def _release_lease(handle: TableHandle, lease: int) -> None:
    """Free the lease unless the compaction commit did (or the lease expired and another pass took it)."""
    if _latest(handle).transaction_version(LEASE) == lease:
        try:
            _commit_marks(handle, {LEASE: 0}, expected={LEASE: lease})
        except CommitConflict:
            log.info("%s: the compaction lease changed hands meanwhile; leaving it", handle.path)


@_retry_conflicts
def _compact(
    handle: TableHandle,
    options: MaintenanceOptions,
    filters: list[tuple[str, str, Any]] | None,
) -> dict[str, int]:
    """Bin-pack small files on a fresh snapshot, releasing the lease in the same commit; another
    writer winning the race costs a retry."""
    table = _latest(handle)
    metrics = table.optimize.compact(
        partition_filters=filters,
        target_size=options.target_file_bytes,
        writer_properties=delta_stats.writer_properties(table.schema()),
        commit_properties=CommitProperties(custom_metadata=_WRITER, app_transactions=[Transaction(LEASE, 0)]),
    )
    counts = {k: int(v) for k, v in metrics.items() if isinstance(v, int | float)}
    # delta-rs reports the removed files' sizes as a JSON string: {"totalSize": ..., ...}
    removed = metrics.get("filesRemoved")
    stats = json.loads(removed) if isinstance(removed, str) else removed
    counts["bytesRemoved"] = int(stats.get("totalSize", 0)) if isinstance(stats, dict) else 0
    return counts


@_retry_conflicts
def _set_log_retention(path: str, storage: aws.StorageOptions, wanted: str) -> None:
    table = _open(path, storage)
    if table.metadata().configuration.get(_LOG_RETENTION) != wanted:
        table.alter.set_table_properties({_LOG_RETENTION: wanted}, raise_if_not_exists=False)


@_retry_conflicts
def _record(path: str, storage: aws.StorageOptions, marks: dict[str, int]) -> None:
    """The pass's marks; absolute values, so a commit lost to a concurrent pass is simply made again."""
    _commit_marks(handle_for(path, storage), marks)


def _commit_marks(
    handle: TableHandle,
    marks: dict[str, int],
    *,
    expected: dict[str, int | None] | None = None,
) -> None:
    table = _latest(handle)
    delta_commit.commit_files(
        handle.path,
        [],
        schema=pa.schema(table.schema()),
        partition_by=list(table.metadata().partition_columns),
        storage_options=handle.storage_options(),
        transactions=marks,
        expected_transactions=expected,
        custom_metadata=_WRITER,
        handle=handle,
    )
