"""Statistics in the commits delta-rs builds for us, kept exact or absent; restating files whose are not.

delta-rs 1.6.6 (measured) takes a file's min/max from its Parquet statistics in `write_deltalake`, MERGE
and `optimize.compact`. It writes decimals as JSON doubles (above 15 digits a bound lands on the wrong
side of a value), float bounds that leave NaN out (Spark orders NaN above every number), and bounds for
fields inside structs with the same faults. Its timestamps are cut to the millisecond as the protocol
says (readers add the millisecond back to a max), and its integers, booleans, dates and strings are
exact. So every delta-rs write of ours passes `writer_properties(schema)`: Parquet statistics off by
default and on only for the top-level columns whose delta-rs bounds hold (`exact_in_delta_rs`). A
column-level setting names a top-level column only (delta-rs ignores a nested path such as `st.x`),
which is why the default is off.

A file already holding a bound that may be lossy is *restated* (`restate`): its statistics computed from
its data by `file_stats` and committed as a new add of the same path with dataChange=false, which the
protocol reconciles as the newer add of that file and change-feed readers skip. delta-rs refuses a remove
and an add of one path in one commit; a lone add is fine. That commit must never bring back a file that
another writer removed meanwhile (a MERGE rewriting it): it is made only as the very next version of the
snapshot its files were read from (no rebase), and planned again on a fresh snapshot when it loses.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import ColumnProperties, CommitProperties, DeltaTable, WriterProperties
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import AddAction, RemoveAction

from s3events.errors import CommitConflict
from s3events.infra.delta import AFTER_COMMIT, committing, open_table
from s3events.infra.file_stats import EXACT_DECIMAL_DIGITS, stats_of
from s3events.infra.parquet_files import filesystem_for, partition_path, partition_value

log = logging.getLogger(__name__)

# Our writer's file names (parquet_files.write_data_file); delta-rs names its own
# `part-00000-<uuid>-c000.<codec>.parquet`.
_OURS = re.compile(r"(^|/)part-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.parquet$")
RESTATE_ATTEMPTS = 5


def exact_in_delta_rs(t: pa.DataType) -> bool:
    """Whether delta-rs writes exact bounds for a top-level column of type `t` (a test holds it to it)."""
    return (
        pa.types.is_integer(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)  # cut to the millisecond, as the protocol says
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_string_view(t)
        or (pa.types.is_decimal(t) and t.precision <= EXACT_DECIMAL_DIGITS)
    )


def writer_properties(*schemas: pa.Schema | Any) -> WriterProperties:
    """What every delta-rs write of ours (append, MERGE, DELETE, compaction) is given, for the columns of
    `schemas` (pyarrow or delta-rs schemas: a MERGE's target and source): statistics for the columns whose
    delta-rs bounds are exact, none for the others; snappy, as delta-rs's default writer uses."""
    exact = {
        f.name: ColumnProperties(statistics_enabled="PAGE")
        for schema in schemas
        for f in pa.schema(schema)
        if exact_in_delta_rs(f.type)
    }
    return WriterProperties(
        compression="SNAPPY",
        default_column_properties=ColumnProperties(statistics_enabled="NONE"),
        column_properties=exact or None,
    )


def arrow_schema(table: DeltaTable) -> pa.Schema:
    return pa.schema(table.schema())


def suspect_files(table: DeltaTable, stats: Mapping[str, str | None]) -> list[str]:
    """Paths of the files whose statistics (`stats`: log path -> the log's JSON, `delta_log.live_stats`)
    may hold a lossy bound: any bound on a decimal of more than 15 digits (no writer of ours makes one
    now), and any bound a delta-rs file holds on a column delta-rs does not bound exactly (written
    before `writer_properties`)."""
    partitions = set(table.metadata().partition_columns)
    columns = [f for f in arrow_schema(table) if f.name not in partitions]
    suspect = []
    for path, text in stats.items():
        parsed = json.loads(text) if text else {}
        bounded = set(parsed.get("minValues") or {}) | set(parsed.get("maxValues") or {})
        ours = _OURS.search(unquote(path)) is not None
        if any(
            f.name in bounded and (_has_wide_decimal(f.type) or not (ours or exact_in_delta_rs(f.type)))
            for f in columns
        ):
            suspect.append(path)
    return sorted(suspect)


def restate(
    table_uri: str,
    storage: Mapping[str, str],
    choose: Callable[[DeltaTable], Sequence[str]],
    *,
    label: str = "",
) -> int:
    """Restate the files `choose(table) -> paths` picks, in one commit as the next version of the
    snapshot they were read from; planned again (up to RESTATE_ATTEMPTS times) when another writer
    commits first. Returns how many files were restated."""
    for attempt in range(1, RESTATE_ATTEMPTS + 1):
        table = open_table(table_uri, storage)
        if table is None:
            return 0
        paths = list(choose(table))
        if not paths:
            return 0
        actions = _restated(table, table_uri, storage, paths)
        try:
            _commit_next(table, table_uri, actions)
        except CommitConflict as exc:
            log.info("%s: restating statistics lost to another commit (attempt %d): %s", label, attempt, exc)
            continue
        log.info(
            "%s: restated the statistics of %d file(s) from their data", label or table_uri, len(actions)
        )
        return len(actions)
    raise CommitConflict(f"{table_uri}: other writers kept committing while file statistics were restated")


def _restated(
    table: DeltaTable, table_uri: str, storage: Mapping[str, str], paths: Sequence[str]
) -> list[AddAction]:
    """Add actions of `paths` (as the log names them) with statistics computed from their data."""
    schema = arrow_schema(table)
    partitions = list(table.metadata().partition_columns)
    file_schema = pa.schema([f for f in schema if f.name not in partitions])
    filesystem, root = filesystem_for(table_uri, storage)
    adds = {row["path"]: row for row in pa.table(table.get_add_actions(flatten=False)).to_pylist()}
    actions = []
    for logged in paths:
        add = adds[logged]
        path = unquote(logged)  # the log holds the path URI-encoded; AddAction takes the real one
        values = _partition_values(add, partitions, path)
        if values is None:
            log.warning(
                "%s: %s: partition values not as its directory names them; left as it is", table_uri, path
            )
            continue
        data = _conform(pq.read_table(f"{root}/{path}", filesystem=filesystem), file_schema)
        actions.append(
            AddAction(path, add["size_bytes"], values, add["modification_time"], False, stats_of(data))
        )
    return actions


def _partition_values(
    add: Mapping[str, Any], partitions: Sequence[str], path: str
) -> dict[str, str | None] | None:
    """The file's partition values as the log serializes them; None unless its Hive-style directory
    names say the same (delta-rs gives them typed, and a re-add must not change them)."""
    values = {c: partition_value((add.get("partition") or {}).get(c)) for c in partitions}
    expected = partition_path({c: (v if v else None) for c, v in values.items()})
    return values if not partitions or path.startswith(expected + "/") else None


def _conform(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """A file's rows under the table's columns: a column added after the file was written is null."""
    columns = []
    for f in schema:
        if f.name in data.column_names:
            column = data[f.name]
            columns.append(column if column.type == f.type else column.cast(f.type))
        else:
            columns.append(pa.nulls(data.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _commit_next(table: DeltaTable, table_uri: str, actions: list[AddAction]) -> None:
    """Commit `actions` as exactly the version after `table`'s snapshot, or raise CommitConflict."""
    if not actions:
        return
    properties = CommitProperties(
        custom_metadata={"s3events.writer": "restate-statistics"}, max_commit_retries=0
    )
    try:
        with committing(table_uri):
            table.create_write_transaction(
                list[AddAction | RemoveAction](actions),
                mode="append",
                schema=table.schema(),
                partition_by=list(table.metadata().partition_columns) or None,
                commit_properties=properties,
                post_commithook_properties=AFTER_COMMIT,
            )
    except CommitFailedError as exc:
        raise CommitConflict(f"{table_uri}: another writer committed first") from exc


def _has_wide_decimal(t: pa.DataType) -> bool:
    if pa.types.is_decimal(t):
        return t.precision > EXACT_DECIMAL_DIGITS
    if pa.types.is_struct(t):
        return any(_has_wide_decimal(t.field(i).type) for i in range(t.num_fields))
    return False


def _names_column(flat: str, column: str) -> bool:
    """Whether a flattened statistics column (`min.st.x`) belongs to top-level `column`."""
    rest = flat.split(".", 1)[1]
    return rest == column or rest.startswith(column + ".")
