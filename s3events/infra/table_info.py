"""Read-only facts about a Delta table for `s3events status`, through delta-rs, without scanning its data.

- `describe`: version, row count (summed from the add actions' statistics, no data read) and the time
  of the newest commit.
- `commit_times`: commit timestamps (commitInfo) of versions from a given one up to the latest.
- `data_files`: size, row count and partition values of each data file, from one read of the add actions.
- `latest_row`: the row with the greatest value of one column, reading only the files whose min/max
  statistics may hold it.

delta-rs 1.6 behaviour this module relies on (measured): `DeltaTable.history(limit)` returns the commits
from `loaded version - limit + 1` up to the newest commit *in the log*, newest first, but numbers them
from the version the table object loaded; commits made after the table was opened therefore show up as
extra entries at the front. `commit_times` drops those extras so every timestamp gets its true version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from s3events.infra.delta import open_table

__all__ = [
    "DataFiles",
    "TableSnapshot",
    "commit_times",
    "data_files",
    "describe",
    "latest_row",
    "recent_commits",
]


@dataclass(frozen=True, slots=True)
class DataFiles:
    """The current version's data files, one entry per file in every list."""

    sizes: list[int]
    rows: list[int | None]  # None: the file's statistics carry no row count
    partitions: dict[str, list[Any]]  # partition column -> each file's value (None: null)

    def small(self, below: int) -> int:
        return sum(1 for size in self.sizes if size < below)


def data_files(table: DeltaTable) -> DataFiles:
    actions = pa.table(table.get_add_actions(flatten=True))
    columns = list(table.metadata().partition_columns)
    return DataFiles(
        sizes=[int(s) for s in actions.column("size_bytes").to_pylist()],
        rows=[None if n is None else int(n) for n in actions.column("num_records").to_pylist()],
        partitions={c: actions.column(f"partition.{c}").to_pylist() for c in columns},
    )


@dataclass(frozen=True, slots=True)
class TableSnapshot:
    version: int
    rows: int  # from file statistics; a lower bound when `rows_exact` is False
    rows_exact: bool  # every data file carries a row count in its statistics
    last_commit_at: datetime | None  # commitInfo timestamp of the newest commit
    files: int = 0  # data files of the current version
    small_files: int = 0  # of those, smaller than the `small_file_bytes` asked for
    transactions: Mapping[str, int | None] = field(default_factory=dict)  # the app ids asked for


def describe(
    path: str,
    storage_options: Mapping[str, str],
    *,
    small_file_bytes: int = 32 << 20,
    app_ids: Sequence[str] = (),
) -> TableSnapshot | None:
    """The table's version, row count, files, newest commit time and the versions of `app_ids`; None
    when there is no table at `path`."""
    table = open_table(path, storage_options)
    if table is None:
        return None
    files = data_files(table)
    history = table.history(1)
    return TableSnapshot(
        version=int(table.version()),
        rows=sum(n for n in files.rows if n is not None),
        rows_exact=all(n is not None for n in files.rows),
        last_commit_at=_commit_time(history[0]) if history else None,
        files=len(files.sizes),
        small_files=files.small(small_file_bytes),
        transactions={app_id: table.transaction_version(app_id) for app_id in app_ids},
    )


def commit_times(path: str, storage_options: Mapping[str, str], *, since: int) -> dict[int, datetime]:
    """Commit time of every version from `since` to the latest that the log still holds.

    Reads one commit file per version (delta-rs `history`), so the cost grows with the number of
    versions asked for, not with the table's size. Versions whose commit files were cleaned up (log
    retention) are absent from the result.
    """
    table = open_table(path, storage_options)
    if table is None:
        return {}
    latest = int(table.version())
    since = max(since, 0)
    if since > latest:
        return {}
    limit = latest - since + 1
    history = table.history(limit)
    newer = len(history) - min(limit, latest + 1)  # commits made after the table was opened
    if newer > 0:
        history = history[newer:]
    times = {}
    for offset, info in enumerate(history):
        moment = _commit_time(info)
        if moment is not None:
            times[latest - offset] = moment
    return times


def recent_commits(path: str, storage_options: Mapping[str, str], *, limit: int) -> list[dict[str, Any]]:
    """The commitInfo of the newest `limit` commits, newest first, each with its "version" (empty
    without a table). Reads one commit file per commit."""
    table = open_table(path, storage_options)
    if table is None:
        return []
    return [dict(info) for info in table.history(limit)]


def latest_row(
    path: str, storage_options: Mapping[str, str], *, order_by: str, columns: Sequence[str]
) -> dict[str, Any] | None:
    """The row with the greatest non-null `order_by` value (ties: the last one read), projected to
    `columns`; None when there is no table or no such row.

    The newest value is found in the add actions' max statistics, and only files whose statistics may
    hold it are read (files without statistics are always read).
    """
    table = open_table(path, storage_options)
    if table is None:
        return None
    names = {field.name for field in table.schema().fields}
    if order_by not in names:
        return None
    wanted = [c for c in dict.fromkeys([*columns, order_by]) if c in names]
    newest = _max_statistic(table, order_by)
    if newest is not None:
        # Delta statistics of timestamps are truncated to milliseconds: `>=` keeps the true maximum.
        dataset = table.to_pyarrow_dataset(file_pruning_predicate=[(order_by, ">=", newest)])
        rows = dataset.to_table(columns=wanted, filter=pc.field(order_by) >= pa.scalar(newest))
    else:
        rows = table.to_pyarrow_dataset().to_table(columns=wanted)
    rows = rows.filter(pc.is_valid(rows[order_by]))
    if rows.num_rows == 0:
        return None
    best = pc.max(rows[order_by])
    candidates = rows.filter(pc.equal(rows[order_by], best))
    row: dict[str, Any] = candidates.slice(candidates.num_rows - 1).to_pylist()[0]
    return {c: row.get(c) for c in columns}


def _max_statistic(table: DeltaTable, column: str) -> Any:
    """The greatest `max.<column>` statistic over the table's files, or None when any file lacks it."""
    actions = pa.table(table.get_add_actions(flatten=True))
    name = f"max.{column}"
    if name not in actions.column_names or actions.num_rows == 0:
        return None
    values = actions[name]
    if values.null_count:
        return None
    return pc.max(values).as_py()


def _commit_time(info: Mapping[str, Any]) -> datetime | None:
    millis = info.get("timestamp")
    return None if millis is None else datetime.fromtimestamp(int(millis) / 1000, tz=UTC)
