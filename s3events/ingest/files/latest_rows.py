"""Merge mode's rule for the record a batch keeps per record key, on Arrow tables: the row with the
largest ordering field (nulls lose), then the latest event, then the last file and line: the order of
Spark's window `row_number() OVER (PARTITION BY key ORDER BY ordering DESC NULLS LAST, ...)`, nested and
floating-point values included, and a total order, so the latest rows of parts of a batch reduce to the
batch's own: tasks reduce their files, the driver the tasks' rows, the line path each key partition.

Pure pyarrow: no Spark, no storage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

import pyarrow as pa
import pyarrow.compute as pc

_LINEAGE_ORDER = ("_event_time", "_source_file", "_source_line")
_INDEX = "__s3events_row"
_NAN = "__s3events_nan"
_NESTED = "__s3events_order"


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
        if _holds_a_map(kind):  # Spark has no order of maps either
            return f"the ordering field {ordering_field} is of type {kind}"
    return None


def _groups_as_spark_does(kind: pa.DataType) -> bool:
    # Floating point groups by a normalized copy, nested values by their rank (`_grouping_keys`).
    if pa.types.is_struct(kind) or _is_list(kind):
        return not _holds_a_map(kind)
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


def _is_list(kind: pa.DataType) -> bool:
    return pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)


def _holds_a_map(kind: pa.DataType) -> bool:
    if pa.types.is_map(kind):
        return True
    if pa.types.is_struct(kind):
        return any(_holds_a_map(kind.field(i).type) for i in range(kind.num_fields))
    return _is_list(kind) and _holds_a_map(kind.value_type)


def latest(table: pa.Table, record_key: Sequence[str], ordering_field: str | None) -> pa.Table:
    """One row per distinct record key (null is a key of its own): the first in the merge order."""
    if table.num_rows == 0 or keys_distinct(table, record_key):
        return table  # each row is its key's only one: no sort (a batch of new keys, most often)
    order = [(name, "descending") for name in _LINEAGE_ORDER]
    keys = table
    if ordering_field is not None and ordering_field in table.column_names:  # absent: null, orders nothing
        order.insert(0, (ordering_field, "descending"))
        if pa.types.is_nested(table.schema.field(ordering_field).type):  # Arrow's sort has no order of these
            keys = table.append_column(_NESTED, nested_ranks(table[ordering_field]))
            order[0] = (_NESTED, "descending")  # a null value ranks below every other: last, as Spark's
        elif pa.types.is_floating(table.schema.field(ordering_field).type):
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
        if pa.types.is_nested(column.type):  # Arrow hashes no nested value: equal values share a rank
            names.append(f"__s3events_key{i}")
            table = table.append_column(names[-1], nested_ranks(column))
            continue
        if not pa.types.is_floating(column.type):
            names.append(name)
            continue
        nan, zero = pa.scalar(float("nan"), column.type), pa.scalar(0.0, column.type)
        normal = pc.if_else(pc.is_nan(column), nan, pc.if_else(pc.equal(column, zero), zero, column))
        names.append(f"__s3events_key{i}")
        table = table.append_column(names[-1], normal)
    return table, names


def nested_ranks(column: pa.ChunkedArray) -> pa.Array:
    """Each value's dense rank in Spark's order of nested values (struct fields in turn, list elements in
    turn with a shorter prefix first; a null, at any depth, below every value; NaN above every number,
    -0.0 equal to 0.0): equal values share a rank, so the ranks group and order rows as Spark's window
    does. Python values: a nested record key or ordering field is rare, and Arrow has neither a hash nor
    an order of these types."""
    keys = [_spark_order(value) for value in column.to_pylist()]
    ranks = [0] * len(keys)
    ordered = sorted(range(len(keys)), key=keys.__getitem__)
    rank = 0
    for before, i in zip([None, *ordered], ordered, strict=False):
        if before is not None and keys[before] != keys[i]:
            rank += 1
        ranks[i] = rank
    return pa.array(ranks, pa.int64())


def _spark_order(value: object) -> tuple[object, ...]:
    """A Python value as a tuple that compares as Spark compares the value (see `nested_ranks`)."""
    if value is None:
        return (0,)
    if isinstance(value, dict):  # a struct: its fields in the type's order (to_pylist keeps it)
        return (1, tuple(_spark_order(v) for v in value.values()))
    if isinstance(value, list):
        return (1, tuple(_spark_order(v) for v in value))
    if isinstance(value, float):
        return (2,) if math.isnan(value) else (1, value + 0.0)  # + 0.0: -0.0 becomes 0.0
    return (1, value)


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
