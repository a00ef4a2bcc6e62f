"""Merge mode's rule for the record a batch keeps per record key, on Arrow tables: the row with the
largest ordering field (nulls lose), then the latest event, then the last file and line. It is the order
the Spark path's window (`read._latest_per_key`) uses, and a total order, so the latest rows of parts of
a batch reduce to the batch's own: tasks reduce their files, the driver reduces the tasks' rows.

Pure pyarrow: no Spark, no storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import pyarrow as pa
import pyarrow.compute as pc

_LINEAGE_ORDER = ("_event_time", "_source_file", "_source_line")
_INDEX = "__s3events_row"
_NAN = "__s3events_nan"


def reducible(schema: pa.Schema, record_key: Sequence[str], ordering_field: str | None) -> str | None:
    """None when `latest` gives exactly the Spark path's rows for tables of `schema`; else why not."""
    missing = [name for name in record_key if name not in schema.names]
    if missing:
        return f"the record key {', '.join(missing)} is in no row"
    for name in record_key:
        kind = schema.field(name).type
        if not _groups_as_spark_does(kind):
            return f"the record key {name} is of type {kind}"
    if ordering_field is not None and ordering_field in schema.names:
        kind = schema.field(ordering_field).type
        # Nested values have no order in Arrow's sort (floating point: see `latest`).
        if pa.types.is_nested(kind):
            return f"the ordering field {ordering_field} is of type {kind}"
    return None


def _groups_as_spark_does(kind: pa.DataType) -> bool:
    # Floating point groups by `_grouping_keys`' normalized copy. Nested values do not hash in Arrow.
    return any(
        check(kind)
        for check in (
            pa.types.is_integer,
            pa.types.is_floating,
            pa.types.is_string,
            pa.types.is_large_string,
            pa.types.is_boolean,
            pa.types.is_temporal,
            pa.types.is_decimal,
            pa.types.is_null,
        )
    )


def latest(table: pa.Table, record_key: Sequence[str], ordering_field: str | None) -> pa.Table:
    """One row per distinct record key (null is a key of its own): the first in the merge order."""
    if table.num_rows == 0 or keys_distinct(table, record_key):
        return table  # each row is its key's only one: no sort (a batch of new keys, most often)
    order = [(name, "descending") for name in _LINEAGE_ORDER]
    keys = table
    if ordering_field is not None and ordering_field in table.column_names:  # absent: null, orders nothing
        order.insert(0, (ordering_field, "descending"))
        if pa.types.is_floating(table.schema.field(ordering_field).type):
            # Spark orders NaN above every number (and -0.0 equal to 0.0, as Arrow does); Arrow's sort
            # puts NaN with the nulls, last: a flag column sorts it first.
            keys = table.append_column(_NAN, pc.is_nan(table[ordering_field]))
            order.insert(0, (_NAN, "descending"))
    ranked = table.take(pc.sort_indices(keys, sort_keys=order))  # nulls last: the default placement
    ranked = ranked.append_column(_INDEX, pa.array(range(ranked.num_rows), pa.int64()))
    grouped, names = _grouping_keys(ranked, record_key)
    firsts = grouped.group_by(names, use_threads=False).aggregate([(_INDEX, "min")])
    keep = pc.sort_indices(firsts[f"{_INDEX}_min"])
    return ranked.take(pc.take(firsts[f"{_INDEX}_min"], keep)).drop_columns([_INDEX])


def _grouping_keys(table: pa.Table, record_key: Sequence[str]) -> tuple[pa.Table, list[str]]:
    """`table` with the record key as Spark groups it, and the names to group by. Spark's window makes one
    key of every NaN and of 0.0 and -0.0 (its NormalizeFloatingNumbers), while Arrow hashes their bits:
    a floating-point key is grouped by a normalized copy, and the row keeps its own value."""
    names = []
    for i, name in enumerate(record_key):
        column = table[name]
        if not pa.types.is_floating(column.type):
            names.append(name)
            continue
        nan, zero = pa.scalar(float("nan"), column.type), pa.scalar(0.0, column.type)
        normal = pc.if_else(pc.is_nan(column), nan, pc.if_else(pc.equal(column, zero), zero, column))
        names.append(f"__s3events_key{i}")
        table = table.append_column(names[-1], normal)
    return table, names


def keys_distinct(table: pa.Table, record_key: Sequence[str]) -> bool:
    """Whether no two rows share a record key (two nulls are one key, as in `latest`'s grouping)."""
    if len(record_key) == 1:
        column = table[record_key[0]]
        if _increasing_runs_apart(column):  # new ids, each file's in order: no hash table
            return True
    grouped, names = _grouping_keys(table, record_key)
    if len(names) == 1:
        return bool(pc.count_distinct(grouped[names[0]], mode="all").as_py() == table.num_rows)
    return bool(grouped.group_by(names, use_threads=False).aggregate([]).num_rows == table.num_rows)


def _increasing_runs_apart(column: pa.ChunkedArray) -> bool:
    """Whether every chunk's values increase strictly and the chunks' ranges do not overlap: then no two
    values are equal. A comparison pass costs a fraction of hashing the keys (measured:
    docs/architecture.md). False for a column with nulls (comparisons skip them) or of a type Arrow does
    not order."""
    if column.null_count:
        return False
    ranges = []
    try:
        for chunk in column.chunks:
            if len(chunk) > 1 and pc.all(pc.greater(chunk[1:], chunk[:-1])).as_py() is False:
                return False
            if len(chunk):
                ranges.append((chunk[0].as_py(), chunk[-1].as_py()))
    except (pa.ArrowNotImplementedError, ValueError):  # no order; a value Python cannot hold exactly
        return False
    ranges.sort(key=lambda r: r[0])  # as Python values: UTF-8 bytes and code points order alike
    return all(high < low for (_, high), (low, _) in pairwise(ranges))


def latest_if_reducible(table: pa.Table, record_key: Sequence[str], ordering_field: str | None) -> pa.Table:
    """A part's rows as a task sends them back: reduced when `reducible`, else all of them, so that the
    driver, which sees every part, decides (one part may lack the key column that others have)."""
    if reducible(table.schema, record_key, ordering_field) is not None:
        return table
    return latest(table, record_key, ordering_field)
