"""Reading everything `s3events status` reports (reads only; every failure is reported, not raised)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from s3events.capture.queue import SqsQueue
from s3events.config import Settings, keys
from s3events.infra import aws, table_info
from s3events.ingest import refusal
from s3events.ingest.feed import MetadataFeed
from s3events.ingest.model import Checkpoint
from s3events.ingest.notify.lag import notify_problems
from s3events.ingest.notify.model import BatchSummary
from s3events.ingest.progress import first_unread, pending_after, stored_position
from s3events.ingest.target import TargetSpec, target_specs
from s3events.maintenance.model import APP_ID as MAINTAINED
from s3events.maintenance.model import SMALL_FRACTION
from s3events.metadata.schema import BUCKET_FILE_BYTES
from s3events.setup.command import static_links
from s3events.status.catalog import catalog_problems
from s3events.status.model import LastError, QueueStatus, Status, TableStatus, TargetStatus, TransformStatus

T = TypeVar("T")
_TRANSFORM_COMMITS = 20  # newest commits searched for a batch's record of its transform

_ERROR_COLUMNS = ("error", "_source_file", "_source_line", "_ingested_at")


def _attempt(read: Callable[[], T]) -> tuple[T | None, str | None]:
    """A status read never crashes the report: its failure becomes the text shown in its place."""
    try:
        return read(), None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}".strip()


def _table(path: str, storage: dict[str, str], small_file_bytes: int) -> TableStatus:
    snapshot, error = _attempt(
        lambda: table_info.describe(path, storage, small_file_bytes=small_file_bytes, app_ids=[MAINTAINED])
    )
    if error is not None:
        return TableStatus(path, exists=False, error=error)
    if snapshot is None:
        return TableStatus(path, exists=False)
    return TableStatus(
        path,
        exists=True,
        version=snapshot.version,
        rows=snapshot.rows,
        rows_exact=snapshot.rows_exact,
        last_commit_at=snapshot.last_commit_at,
        files=snapshot.files,
        small_files=snapshot.small_files,
        last_maintained_at=_epoch(snapshot.transactions.get(MAINTAINED)),
    )


def _epoch(seconds: int | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def _queue(settings: Settings, options: aws.AwsOptions) -> QueueStatus | None:
    url = settings.get(keys.QUEUE_URL)
    if not url:
        return None

    def read() -> tuple[int, int]:
        return SqsQueue(options, url, wait_seconds=0, visibility_timeout=0).depth()

    depth, error = _attempt(read)
    if depth is None:
        return QueueStatus(url, error=error)
    return QueueStatus(url, visible=depth[0], in_flight=depth[1])


def _last_error(path: str, storage: dict[str, str]) -> tuple[LastError | None, str | None]:
    row, error = _attempt(
        lambda: table_info.latest_row(path, storage, order_by="_ingested_at", columns=_ERROR_COLUMNS)
    )
    if row is None:
        return None, error
    line = row.get("_source_line")
    return (
        LastError(
            error=str(row.get("error")),
            file=row.get("_source_file"),
            line=None if line is None else int(line),
            ingested_at=_utc(row.get("_ingested_at")),
        ),
        None,
    )


def _utc(moment: Any) -> datetime | None:
    return moment.astimezone(UTC) if isinstance(moment, datetime) else None


def _link_problems(settings: Settings) -> list[str]:
    """The notification path `s3events setup` made (when configured): a broken link is silence, not
    errors."""
    links, error = _attempt(lambda: static_links(settings))
    if error is not None:
        return [f"notification path: cannot check it: {error}"]
    return [f"notification path: {link.name}: {link.problem}" for link in links or [] if not link.ok]


def gather_status(settings: Settings, *, now: datetime) -> Status:
    """Read everything `s3events status` reports. Reads only; every failure is reported, not raised
    (configuration errors excepted: ConfigError for an incomplete target)."""
    options = aws.options_from(settings)
    storage = aws.delta_storage_options(options)
    max_lag = settings.get(keys.STATUS_MAX_LAG_SECONDS)
    start_latest = settings.get(keys.INGEST_MISSING_CHECKPOINT_STRATEGY) == "latest"
    problems: list[str] = []

    queue = _queue(settings, options)
    if queue is not None and queue.error:
        problems.append(f"queue {queue.url}: cannot read its depth: {queue.error}")

    small = settings.get(keys.MAINTENANCE_TARGET_FILE_BYTES) // SMALL_FRACTION
    # The metadata table's identity buckets are compacted towards BUCKET_FILE_BYTES, so "small" is by
    # that size there (a table of schema version 1, compacted towards the target, is counted the same).
    bucket_small = min(small, BUCKET_FILE_BYTES // SMALL_FRACTION)
    metadata = _table(settings.require(keys.METADATA_TABLE_PATH), storage, bucket_small)
    # One feed (one table handle) serves the version check and the lag computation below.
    feed = MetadataFeed(metadata.path, storage_options=storage)
    if metadata.error:
        problems.append(f"metadata table {metadata.path}: cannot read it: {metadata.error}")
    elif metadata.exists:
        # Written by a newer s3events (or not ours): nothing read from it could be trusted. Exit 3.
        feed.check()
    quarantine_path = settings.get(keys.QUARANTINE_TABLE_PATH)
    quarantine = _table(quarantine_path, storage, small) if quarantine_path else None
    if quarantine is not None and quarantine.error:
        problems.append(f"quarantine table {quarantine.path}: cannot read it: {quarantine.error}")

    max_stall = settings.get(keys.STATUS_MAX_CAPTURE_STALL_SECONDS)
    problems.extend(_capture_problems(queue, metadata, quarantine, now, max_stall))
    problems.extend(_link_problems(settings))
    problems.extend(catalog_problems(settings, storage))  # entries missing, elsewhere or behind

    specs = target_specs(settings)
    checkpoints: dict[str, tuple[Checkpoint | None, str | None]] = {
        spec.name: _attempt(partial(stored_position, spec, storage)) for spec in specs
    }
    latest = metadata.version if metadata.exists else (None if metadata.error else -1)
    pending, times = _lag_inputs(specs, checkpoints, latest, feed, metadata, storage, start_latest, problems)

    targets = []
    for spec in specs:
        target = _target(spec, storage, checkpoints[spec.name], latest, pending, times, now, max_lag, small)
        targets.append(target)
        problems.extend(_target_problems(target, latest, max_lag))
    problems.extend(notify_problems(settings, specs, storage))
    return Status(
        generated_at=now,
        max_lag_seconds=max_lag,
        queue=queue,
        metadata=metadata,
        quarantine=quarantine,
        targets=tuple(targets),
        problems=tuple(problems),
    )


def _lag_inputs(
    specs: list[TargetSpec],
    checkpoints: dict[str, tuple[Checkpoint | None, str | None]],
    latest: int | None,
    feed: MetadataFeed,
    metadata: TableStatus,
    storage: dict[str, str],
    start_latest: bool,
    problems: list[str],
) -> tuple[dict[str, int | None], dict[int, datetime]]:
    """Each readable target's first pending metadata version, and the commit times from the oldest of
    them on; what cannot be read is added to `problems`."""
    readable = [spec for spec in specs if checkpoints[spec.name][1] is None]
    pending: dict[str, int | None] = {}
    if latest is not None and readable:
        # A target whose routes saw nothing new may keep an older stored checkpoint: what is actually
        # routed to it after that point decides (one feed read for all).
        stored = {spec.name: checkpoints[spec.name][0] for spec in readable}
        found, error = _attempt(
            lambda: first_unread(readable, stored, feed, latest, start_latest=start_latest)
        )
        if error is not None:
            problems.append(f"metadata table {metadata.path}: cannot read its change feed: {error}")
            found = {
                spec.name: pending_after(stored[spec.name], latest, start_latest=start_latest)
                for spec in readable
            }
        pending = dict(found or {})
    # One read of the metadata log serves every target: from the oldest pending version to the latest.
    oldest = min((v for v in pending.values() if v is not None), default=None)
    times: dict[int, datetime] = {}
    if oldest is not None:
        read_times, error = _attempt(lambda: table_info.commit_times(metadata.path, storage, since=oldest))
        if error is not None:
            problems.append(f"metadata table {metadata.path}: cannot read its history: {error}")
        times = read_times or {}

    return pending, times


def _capture_problems(
    queue: QueueStatus | None,
    metadata: TableStatus,
    quarantine: TableStatus | None,
    now: datetime,
    max_stall: float,
) -> list[str]:
    """A queue with visible messages beside tables nobody has committed to for a while: capture is down
    (or cannot commit). A working capture commits within seconds of a message arriving."""
    if queue is None or not queue.visible:
        return []
    commits = [t.last_commit_at for t in (metadata, quarantine) if t is not None and t.last_commit_at]
    if not commits:
        return []  # no table yet (a fresh setup), or unreadable (reported already): nothing to tell by
    idle = (now - max(commits)).total_seconds()
    if idle <= max_stall:
        return []
    return [
        f"capture: {queue.visible} message(s) wait in the queue and the last commit was {idle:.0f} s ago "
        f"(max {max_stall:g} s, s3events.status.max.capture.stall.seconds): is capture running?"
    ]


def _target(
    spec: TargetSpec,
    storage: dict[str, str],
    checkpoint: tuple[Checkpoint | None, str | None],
    latest: int | None,
    pending: dict[str, int | None],
    times: dict[int, datetime],
    now: datetime,
    max_lag: float,
    small: int,
) -> TargetStatus:
    stored, error = checkpoint
    table = _table(spec.path, storage, small)
    error_table = _table(spec.error_table_path, storage, small)
    last_error, last_error_problem = (
        _last_error(spec.error_table_path, storage) if error_table.exists else (None, None)
    )
    if last_error_problem and not error_table.error:
        error_table = replace(error_table, error=last_error_problem)
    lag_versions: int | None = None
    lag_seconds: float | None = None
    oldest = pending.get(spec.name)
    oldest_at: datetime | None = None
    if latest is not None and spec.name in pending:
        if oldest is None:
            lag_versions, lag_seconds = 0, 0.0
        else:
            lag_versions = latest - oldest + 1
            # The log may no longer hold that commit: the oldest one it holds bounds the lag from below.
            known = [v for v in times if v >= oldest]
            if known:
                oldest_at = times[min(known)]
                lag_seconds = max(0.0, (now - oldest_at).total_seconds())
    return TargetStatus(
        name=spec.name,
        checkpoint=stored,
        lag_versions=lag_versions,
        lag_seconds=lag_seconds,
        oldest_pending_version=oldest,
        oldest_pending_commit_at=oldest_at,
        lagging=lag_seconds is not None and lag_seconds > max_lag,
        table=table,
        error_table=error_table,
        last_error=last_error,
        error=error,
        transform=_transform(spec, storage) if spec.transform_sql or spec.transform_sql_file else None,
        refused=_refused(spec, storage, stored),
    )


def _refused(spec: TargetSpec, storage: dict[str, str], stored: Checkpoint | None) -> str | None:
    """A `fail` target's refusal while its checkpoint stands at the refused batch (`ingest.refusal`)."""
    if spec.schema_evolution != "fail":
        return None
    found, error = _attempt(lambda: refusal.read(spec.path, storage))
    if error is not None:
        return f"cannot read its refusal note: {error}"
    return found.reason if found is not None and found.holds(stored) else None


def _transform(spec: TargetSpec, storage: dict[str, str]) -> TransformStatus:
    """The newest batch commit's record of the transform, among the table's newest commits (maintenance
    and error-table commits carry none)."""
    commits, error = _attempt(lambda: table_info.recent_commits(spec.path, storage, limit=_TRANSFORM_COMMITS))
    if error is not None:
        return TransformStatus(None, None, None, error=error)
    for info in commits or []:
        summary = BatchSummary.from_commit(info)
        if summary is not None and summary.transform is not None:
            version = info.get("version")
            return TransformStatus(
                summary.transform, summary.rows_filtered, version if isinstance(version, int) else None
            )
    return TransformStatus(None, None, None)


def _target_problems(target: TargetStatus, latest: int | None, max_lag: float) -> list[str]:
    name = f"target {target.name}"
    problems = []
    if target.error:
        problems.append(f"{name}: cannot read its checkpoint: {target.error}")
    for kind, table in (("table", target.table), ("error table", target.error_table)):
        if table.error and not (kind == "table" and target.error):
            problems.append(f"{name}: cannot read its {kind} {table.path}: {table.error}")
    if target.refused:
        problems.append(f"{name}: failed: {target.refused.removeprefix(f'{name}: ')}")
    if target.lagging:
        problems.append(
            f"{name}: {target.lag_seconds:.1f} s behind the metadata table (max {max_lag:g} s; "
            f"{target.lag_versions} version(s) not fully ingested)"
        )
    elif target.oldest_pending_version is not None and target.lag_seconds is None and latest is not None:
        problems.append(
            f"{name}: cannot tell its lag: the commit time of metadata version "
            f"{target.oldest_pending_version} is not in the table's history"
        )
    if target.checkpoint is not None and latest is not None and target.checkpoint.version > latest:
        where = "does not exist" if latest < 0 else f"is at version {latest}"
        problems.append(
            f"{name}: its checkpoint (metadata version {target.checkpoint.version}) is ahead of the metadata "
            f"table, which {where}: was the metadata table replaced? Nothing will be ingested until it "
            f"catches up"
        )
    return problems
