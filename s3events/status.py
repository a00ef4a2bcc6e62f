"""`s3events status`: a health check and an operator's view of the whole pipeline.

```bash
s3events status --props conf/s3events.properties           # aligned table on stdout
s3events status --props conf/s3events.properties --json    # one JSON document on stdout
```

It reads, never writes: the queue's depth (SQS attributes), the metadata and quarantine tables' version,
row count (from file statistics, no data scan) and newest commit time, and per target
(`s3events.ingest.targets`) the checkpoint stored in the target table's Delta app transactions, the lag
behind the metadata table, the target and error tables' version and row count, and the newest error row.
Spark is not started. A table that does not exist yet is reported as such ("does not exist yet").

Lag of a target: its oldest pending version O is the first metadata version after its stored checkpoint
(version V, position P) that holds an entry routed to it. Ingest commits only real batches, so a quiet
target's stored V can be old while nothing is pending: the change feed after V is read to find O.
- `lag_versions` = latest metadata version - O + 1 (0 when nothing is pending; a target with no
  checkpoint starts from V = -1, or is caught up under `s3events.ingest.missing.checkpoint.strategy=latest`,
  which starts it at whatever is latest when it first runs and records that point in its error table);
- `lag_seconds` = now - the commit time of metadata version O (0 when nothing is pending). If the log
  no longer holds that commit, the oldest commit it still holds is used: a lower bound.

Exit code (`Status.exit_code`): 1 when there is any problem — a target's `lag_seconds` exceeds
`s3events.status.max.lag.seconds`, a checkpoint is ahead of the metadata table, or the queue or a table
cannot be read — else 0. A table that does not exist yet is not a problem. Configuration errors exit 2
as for every command.

JSON document (`--json`); times are ISO 8601 UTC strings ending in `Z`, absent values are `null`:

```
{
  "generated_at": "2025-06-01T12:00:00.000000Z",
  "healthy": false,                      # false exactly when "problems" is not empty (exit code 1)
  "max_lag_seconds": 3600.0,
  "problems": ["target b: 5400.0 s behind the metadata table (max 3600.0 s)"],
  "queue": null | {"url": "...", "visible": 3, "in_flight": 0, "error": null},
  "metadata": TABLE,
  "quarantine": null | TABLE,
  "targets": [
    {
      "name": "a",
      "checkpoint": null | {"version": 7, "position": 0},
      "lag_versions": 0,                 # null when the metadata table or the checkpoint is unreadable
      "lag_seconds": 0.0,                # idem
      "oldest_pending_version": null,    # V + 1 while the target is behind
      "oldest_pending_commit_at": null,  # its commit time
      "lagging": false,                  # lag_seconds > max_lag_seconds
      "table": TABLE,
      "error_table": TABLE,
      "last_error": null | {"error": "not valid JSON", "file": "s3://bucket/key", "line": 12,
                            "ingested_at": "..."},
      "error": null                      # why the checkpoint could not be read
    }
  ]
}
TABLE = {"path": "...", "exists": true, "version": 12, "rows": 3400, "rows_exact": true,
         "last_commit_at": "...", "error": null}
```
`rows_exact` is false when some data file carries no row count in its statistics (`rows` is then a lower
bound); `exists` is false (and the numbers null) for a table that does not exist yet; `error` holds why a
table could not be read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from s3events.adapters import aws, table_info
from s3events.adapters.metadata_feed import MetadataFeed
from s3events.adapters.sqs import SqsQueue
from s3events.adapters.target_table import ErrorTable, TargetTable
from s3events.config import Settings, keys
from s3events.ingest.model import Checkpoint
from s3events.ingest.plan import caught_up_to
from s3events.ingest.target import TargetSpec, target_specs

__all__ = [
    "LastError",
    "QueueStatus",
    "Status",
    "TableStatus",
    "TargetStatus",
    "gather_status",
    "pending_after",
    "render_json",
    "render_text",
]

T = TypeVar("T")

_ERROR_COLUMNS = ("error", "_source_file", "_source_line", "_ingested_at")


# ------------------------------------------------------------------------------------------------ model


@dataclass(frozen=True, slots=True)
class TableStatus:
    path: str
    exists: bool
    version: int | None = None
    rows: int | None = None
    rows_exact: bool = True
    last_commit_at: datetime | None = None
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


# ------------------------------------------------------------------------------------------- gathering


def pending_after(checkpoint: Checkpoint | None, latest: int, *, start_latest: bool = False) -> int | None:
    """The oldest metadata version a target with `checkpoint` has not fully ingested, or None when it is
    caught up with the metadata table at version `latest`. `start_latest`: a target without a
    checkpoint starts at the latest version (missing.checkpoint.strategy=latest)."""
    if checkpoint is None:
        return None if start_latest or latest < 0 else 0
    return checkpoint.version + 1 if checkpoint.version < latest else None


def _attempt(read: Callable[[], T]) -> tuple[T | None, str | None]:
    """A status read never crashes the report: its failure becomes the text shown in its place."""
    try:
        return read(), None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}".strip()


def _table(path: str, storage: dict[str, str]) -> TableStatus:
    snapshot, error = _attempt(lambda: table_info.describe(path, storage))
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
    )


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


def _stored_checkpoint(spec: TargetSpec, storage: dict[str, str]) -> Checkpoint | None:
    """The target's checkpoint; before its first batch, the starting point its first run recorded."""
    stored = TargetTable(spec.path, spec.app_id, storage_options=storage).checkpoint()
    if stored is None:
        stored = ErrorTable(spec.error_table_path, spec.app_id, storage_options=storage).origin()
    return stored


def _utc(moment: Any) -> datetime | None:
    return moment.astimezone(UTC) if isinstance(moment, datetime) else None


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

    metadata = _table(settings.require(keys.METADATA_TABLE_PATH), storage)
    if metadata.error:
        problems.append(f"metadata table {metadata.path}: cannot read it: {metadata.error}")
    quarantine_path = settings.get(keys.QUARANTINE_TABLE_PATH)
    quarantine = _table(quarantine_path, storage) if quarantine_path else None
    if quarantine is not None and quarantine.error:
        problems.append(f"quarantine table {quarantine.path}: cannot read it: {quarantine.error}")

    specs = target_specs(settings)
    checkpoints: dict[str, tuple[Checkpoint | None, str | None]] = {
        spec.name: _attempt(partial(_stored_checkpoint, spec, storage)) for spec in specs
    }
    latest = metadata.version if metadata.exists else (None if metadata.error else -1)
    pending: dict[str, int | None] = {}
    if latest is not None:
        for spec in specs:
            stored, error = checkpoints[spec.name]
            if error is None:
                pending[spec.name] = pending_after(stored, latest, start_latest=start_latest)
    # A target whose routes saw nothing new keeps an old stored checkpoint (ingest commits only real
    # batches), so look at what is actually routed to it after its checkpoint: one feed read for all.
    lagging = {name: v for name, v in pending.items() if v is not None}
    if lagging and latest is not None:
        feed = MetadataFeed(metadata.path, storage_options=storage)
        changes, error = _attempt(lambda: feed.changes_after(min(lagging.values()) - 1, up_to=latest))
        if error is not None:
            problems.append(f"metadata table {metadata.path}: cannot read its change feed: {error}")
        elif changes is not None:
            for spec in specs:
                if spec.name in lagging:
                    start = checkpoints[spec.name][0] or Checkpoint(lagging[spec.name] - 1, 0)
                    rows = [r for r in changes.rows if r.commit_version > start.version]
                    reach = caught_up_to(
                        start,
                        rows,
                        route=spec.route,
                        latest_version=latest,
                        mirror=spec.on_object_removed == "delete",
                    )
                    pending[spec.name] = reach.version + 1 if reach.version < latest else None
    # One read of the metadata log serves every target: from the oldest pending version to the latest.
    oldest = min((v for v in pending.values() if v is not None), default=None)
    times: dict[int, datetime] = {}
    if oldest is not None:
        read_times, error = _attempt(lambda: table_info.commit_times(metadata.path, storage, since=oldest))
        if error is not None:
            problems.append(f"metadata table {metadata.path}: cannot read its history: {error}")
        times = read_times or {}

    targets = []
    for spec in specs:
        target = _target(spec, storage, checkpoints[spec.name], latest, pending, times, now, max_lag)
        targets.append(target)
        problems.extend(_target_problems(target, latest, max_lag))
    return Status(
        generated_at=now,
        max_lag_seconds=max_lag,
        queue=queue,
        metadata=metadata,
        quarantine=quarantine,
        targets=tuple(targets),
        problems=tuple(problems),
    )


def _target(
    spec: TargetSpec,
    storage: dict[str, str],
    checkpoint: tuple[Checkpoint | None, str | None],
    latest: int | None,
    pending: dict[str, int | None],
    times: dict[int, datetime],
    now: datetime,
    max_lag: float,
) -> TargetStatus:
    stored, error = checkpoint
    table = _table(spec.path, storage)
    error_table = _table(spec.error_table_path, storage)
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
    )


def _target_problems(target: TargetStatus, latest: int | None, max_lag: float) -> list[str]:
    name = f"target {target.name}"
    problems = []
    if target.error:
        problems.append(f"{name}: cannot read its checkpoint: {target.error}")
    for kind, table in (("table", target.table), ("error table", target.error_table)):
        if table.error and not (kind == "table" and target.error):
            problems.append(f"{name}: cannot read its {kind} {table.path}: {table.error}")
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


# ------------------------------------------------------------------------------------------- rendering


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _table_json(table: TableStatus) -> dict[str, Any]:
    return {
        "path": table.path,
        "exists": table.exists,
        "version": table.version,
        "rows": table.rows,
        "rows_exact": table.rows_exact,
        "last_commit_at": _iso(table.last_commit_at),
        "error": table.error,
    }


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def status_document(status: Status) -> dict[str, Any]:
    """The JSON document of the module docstring, as Python values."""
    queue = status.queue
    return {
        "generated_at": _iso(status.generated_at),
        "healthy": status.healthy,
        "max_lag_seconds": status.max_lag_seconds,
        "problems": list(status.problems),
        "queue": None
        if queue is None
        else {"url": queue.url, "visible": queue.visible, "in_flight": queue.in_flight, "error": queue.error},
        "metadata": _table_json(status.metadata),
        "quarantine": None if status.quarantine is None else _table_json(status.quarantine),
        "targets": [
            {
                "name": t.name,
                "checkpoint": None
                if t.checkpoint is None
                else {"version": t.checkpoint.version, "position": t.checkpoint.position},
                "lag_versions": t.lag_versions,
                "lag_seconds": _seconds(t.lag_seconds),
                "oldest_pending_version": t.oldest_pending_version,
                "oldest_pending_commit_at": _iso(t.oldest_pending_commit_at),
                "lagging": t.lagging,
                "table": _table_json(t.table),
                "error_table": _table_json(t.error_table),
                "last_error": None
                if t.last_error is None
                else {
                    "error": t.last_error.error,
                    "file": t.last_error.file,
                    "line": t.last_error.line,
                    "ingested_at": _iso(t.last_error.ingested_at),
                },
                "error": t.error,
            }
            for t in status.targets
        ],
    }


def render_json(status: Status) -> str:
    return json.dumps(status_document(status), indent=2, ensure_ascii=False)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.0f}s" if seconds >= 1 or seconds == 0 else f"{seconds:.1f}s"
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s"


def _when(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "-"
    stamp = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{stamp} ({_duration(max(0.0, (now - moment).total_seconds()))} ago)"


def _table_line(label: str, table: TableStatus, now: datetime) -> list[str]:
    if table.error:
        return [label, f"cannot read: {table.error}", table.path]
    if not table.exists:
        return [label, "does not exist yet", table.path]
    rows = f"{table.rows}" if table.rows_exact else f">={table.rows}"
    return [
        label,
        f"version {table.version}  rows {rows}  last commit {_when(table.last_commit_at, now)}",
        table.path,
    ]


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(max(map(len, rows)))]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def render_text(status: Status) -> str:
    """A compact aligned report for people: the sections, one row per target, then the problems."""
    now = status.generated_at
    verdict = "healthy" if status.healthy else f"UNHEALTHY ({len(status.problems)} problem(s))"
    at = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [f"s3events status at {at}: {verdict}; max lag {_duration(status.max_lag_seconds)}", ""]
    sections: list[list[str]] = []
    if status.queue is None:
        sections.append(["queue", "no queue configured (s3events.source.queue.url)", ""])
    elif status.queue.error:
        sections.append(["queue", f"cannot read: {status.queue.error}", status.queue.url])
    else:
        depth = f"visible {status.queue.visible}  in flight {status.queue.in_flight}"
        sections.append(["queue", depth, status.queue.url])
    sections.append(_table_line("metadata", status.metadata, now))
    if status.quarantine is not None:
        sections.append(_table_line("quarantine", status.quarantine, now))
    lines.extend(_aligned(sections))
    if status.targets:
        rows = [
            ["TARGET", "CHECKPOINT", "LAG VERSIONS", "LAG", "VERSION", "ROWS", "ERROR ROWS", "LAST ERROR"]
        ]
        notes = []
        for t in status.targets:
            checkpoint = "-" if t.checkpoint is None else f"{t.checkpoint.version}:{t.checkpoint.position}"
            last = "-"
            if t.last_error is not None:
                where = t.last_error.file or "?"
                if t.last_error.line is not None:
                    where += f":{t.last_error.line}"
                last = f"{_one_line(t.last_error.error)} ({where})"
            lag = "-" if t.lag_seconds is None and t.lag_versions is None else _duration(t.lag_seconds)
            if t.lagging:
                lag += " !"
            rows.append(
                [
                    t.name,
                    checkpoint,
                    _cell(t.lag_versions),
                    lag,
                    _cell(t.table.version),
                    _cell(t.table.rows),
                    _cell(t.error_table.rows if t.error_table.exists else None),
                    last,
                ]
            )
            for kind, table in (("table", t.table), ("error table", t.error_table)):
                if not table.exists and not table.error:
                    notes.append(f"  {t.name}: {kind} {table.path} does not exist yet")
        lines.append("")
        lines.extend(_aligned(rows))
        lines.extend(notes)
    if status.problems:
        lines.append("")
        lines.append("problems:")
        lines.extend(f"  {problem}" for problem in status.problems)
    return "\n".join(lines)


def _one_line(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
