"""A maintenance pass's statistics step: no file of the table keeps a bound a reader could be misled by.

- Repair: files written before every delta-rs write of ours was given `delta_stats.writer_properties`
  hold lossy bounds (decimals over 15 digits as doubles, floats without their NaN, struct fields). The
  first pass reads the log's statistics (`delta_log`), restates every such file from its data and then
  records `STATISTICS` on the table; later passes have nothing to look for, since no writer of ours
  makes such a bound any more (every process must run this release or later by then).
- Compaction: delta-rs writes no bounds for floats (it would leave NaN out); the files a compaction made
  are restated from their data so that they get exact ones, when the table has such columns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pyarrow as pa
from deltalake import DeltaTable

from s3events.infra import aws, delta_log, delta_stats
from s3events.infra.file_stats import has_bounds
from s3events.maintenance.model import APP_ID

STATISTICS = f"{APP_ID}/statistics"  # app transaction: 1 once every file's statistics were repaired


def repair_marks(table: DeltaTable) -> dict[str, int]:
    """The app transaction a pass records once its repair has run (empty when already recorded)."""
    return {} if _repaired(table) else {STATISTICS: 1}


def lossy_files(path: str, storage: aws.StorageOptions) -> Callable[[DeltaTable], Sequence[str]]:
    """What to restate in a snapshot of the table at `path`: its files whose statistics may mislead a
    reader, until its repair is recorded (nothing after)."""

    def choose(table: DeltaTable) -> Sequence[str]:
        if _repaired(table):
            return []
        stats = delta_log.live_stats(path, aws.resolve(storage), int(table.version()))
        return delta_stats.suspect_files(table, stats)

    return choose


def restate_lossy(path: str, storage: aws.StorageOptions, table: DeltaTable, *, dry_run: bool) -> int:
    """Restate every lossy file of the table at `path` (`table`: its snapshot now); how many were (with
    `dry_run`, would be)."""
    choose = lossy_files(path, storage)
    if dry_run:
        return len(choose(table))
    return delta_stats.restate(path, aws.resolve(storage), choose, label=path)


def _repaired(table: DeltaTable) -> bool:
    return table.transaction_version(STATISTICS) == 1


def files_of(table: DeltaTable) -> set[str]:
    return set(pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist())


def restate_new(
    path: str, storage: Mapping[str, str], table: DeltaTable, before: set[str], *, label: str
) -> int:
    """Restate the files added since `before` (a compaction's; `table`: the table after it), when
    restating gives them bounds that delta-rs left out."""
    if not gains_bounds(pa.schema(table.schema())):
        return 0
    return delta_stats.restate(path, storage, _added_since(before), label=label)


def gains_bounds(schema: pa.Schema) -> bool:
    """Whether our statistics bound a column that delta-rs's (as we configure it) leave unbounded."""
    return any(has_bounds(f.type) and not delta_stats.exact_in_delta_rs(f.type) for f in schema)


def _added_since(before: set[str]) -> Callable[[DeltaTable], Sequence[str]]:
    def choose(table: DeltaTable) -> Sequence[str]:
        return sorted(files_of(table) - before)

    return choose
