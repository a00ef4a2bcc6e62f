"""Delta file statistics that are exact or absent: what readers may skip a file by.

A reader (delta-spark, delta-rs, Trino, Athena) skips a file whose statistics exclude the value it looks
for, so a bound on the wrong side of one value loses that row silently. The rule, per column type:
- integers, booleans, dates: exact min / max;
- strings: cut to a 32-character prefix, the max raised to a string greater than every value with that
  prefix (none when no such string exists); bounds come from the Parquet writer's own statistics
  (`take_string_bounds`, which keeps them exact) or from the data (`update(strings=True)`);
- timestamps: milliseconds, as Delta writes them, the min rounded down and the max rounded UP (Delta
  truncates a max down and readers that follow the protocol add 1 ms back; readers that do not would
  skip rows: a rounded-up max is a bound for both);
- floats: exact min / max, none for a column holding NaN (Spark orders NaN above every number, so a max
  that leaves it out is wrong for `x > c`), none for ±inf (JSON has no literal for them);
- decimals: exact up to 15 digits of precision, written as a JSON number; none above (readers parse
  these numbers as doubles, and a double holds 15 digits exactly, no more);
- binary, and nested columns: no bounds; nested struct fields get a nullCount.

Pure pyarrow: it runs inside Spark executors (parquet_files.write_data_file) and on the driver
(delta_stats.restate), and imports no deltalake or pyspark.
"""

from __future__ import annotations

import json
import math
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

STRING_STATS_PREFIX = 32
EXACT_DECIMAL_DIGITS = 15  # a JSON double holds this many decimal digits exactly


class FileStats:
    """Delta statistics accumulated over the batches of one file (`schema`: the file's columns)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.rows = 0
        self.nulls: dict[str, Any] = {}
        self.mins: dict[str, Any] = {}
        self.maxs: dict[str, Any] = {}
        self.no_bounds: set[str] = set()

    def update(self, batch: pa.RecordBatch | pa.Table, *, strings: bool = False) -> None:
        """Count `batch`; string bounds too when `strings` (else `take_string_bounds` gives them: the
        Parquet writer computes them anyway, and a second pass over every string was a fifth of a
        file's write)."""
        self.rows += batch.num_rows
        for f, column in zip(self.schema, batch.columns, strict=True):
            self.nulls[f.name] = _add_nulls(self.nulls.get(f.name), column)
            if f.name in self.no_bounds or not has_bounds(f.type):
                continue
            if pa.types.is_floating(f.type) and pc.any(pc.is_nan(column)).as_py():
                self.no_bounds.add(f.name)
                continue
            if is_string(f.type) and not strings:
                continue
            if pa.types.is_timestamp(f.type):  # compare raw ticks: no precision lost to datetime
                column = column.cast(pa.int64())
            low, high = pc.min_max(column).values()
            if low.is_valid:
                self._bound(f.name, low.as_py(), high.as_py())

    def take_string_bounds(self, written: pq.FileMetaData) -> None:
        """The string columns' bounds from the written file's row group statistics. Parquet compares
        strings byte by byte, as Arrow does, and keeps them exact (a test holds it to that); a row group
        with values but no bounds (the writer leaves out a min or max longer than 4,096 bytes) leaves its
        column without bounds."""
        strings: dict[int, str] = {}  # Parquet column (leaf) index -> top-level string column
        leaves = 0
        for f in self.schema:
            if is_string(f.type):
                strings[leaves] = f.name
            leaves += len(leaf_paths(f.name, f.type))
        if leaves != written.num_columns:  # not the layout assumed: no string bounds rather than wrong ones
            self.no_bounds.update(strings.values())
        for group in (written.row_group(i) for i in range(written.num_row_groups)):
            for index, name in strings.items():
                if name in self.no_bounds:
                    continue
                found = group.column(index).statistics
                if found is not None and found.has_min_max:
                    self._bound(name, found.min, found.max)
                elif not (found is not None and found.has_null_count and found.null_count == group.num_rows):
                    self.no_bounds.add(name)

    def _bound(self, name: str, low: Any, high: Any) -> None:
        self.mins[name] = min(self.mins.get(name, low), low)
        self.maxs[name] = max(self.maxs.get(name, high), high)

    def to_json(self) -> str:
        mins, maxs = {}, {}
        for f in self.schema:
            if f.name in self.mins and f.name not in self.no_bounds:
                low, high = (
                    _stat_value(self.mins[f.name], f.type, "min"),
                    _stat_value(self.maxs[f.name], f.type, "max"),
                )
                if low is not None and high is not None:
                    mins[f.name], maxs[f.name] = low, high
        return json.dumps(
            {"numRecords": self.rows, "minValues": mins, "maxValues": maxs, "nullCount": self.nulls},
            separators=(",", ":"),
            allow_nan=False,
        )


def stats_of(data: pa.Table) -> str:
    """The statistics JSON of a whole file's rows (its columns, partition columns left out)."""
    stats = FileStats(data.schema)
    stats.update(data, strings=True)
    return stats.to_json()


def is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def has_bounds(t: pa.DataType) -> bool:
    """Whether a top-level column of type `t` gets a min and max (when its values allow one)."""
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or (pa.types.is_decimal(t) and t.precision <= EXACT_DECIMAL_DIGITS)
        or is_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
    )


def leaf_paths(path: str, t: pa.DataType) -> list[str]:
    """The Parquet column paths under an Arrow column, as pyarrow names them (compliant lists)."""
    if pa.types.is_struct(t):
        return [
            p for i in range(t.num_fields) for p in leaf_paths(f"{path}.{t.field(i).name}", t.field(i).type)
        ]
    if pa.types.is_map(t):
        return [
            *leaf_paths(f"{path}.key_value.key", t.key_type),
            *leaf_paths(f"{path}.key_value.value", t.item_type),
        ]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return leaf_paths(f"{path}.list.element", t.value_type)
    return [path]


def _add_nulls(current: Any, column: pa.Array | pa.ChunkedArray) -> Any:
    if pa.types.is_struct(column.type):
        current = current or {}
        children = column.flatten()  # child validity combined with the struct's own
        for child_field, child in zip(column.type, children, strict=True):
            current[child_field.name] = _add_nulls(current.get(child_field.name), child)
        return current
    return (current or 0) + column.null_count


def _stat_value(value: Any, t: pa.DataType, side: str) -> Any:
    """A min or max as Delta's statistics JSON holds it; None when no safe bound can be written."""
    if pa.types.is_timestamp(t):
        return _timestamp_bound(value, t, side)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value) if t.precision <= EXACT_DECIMAL_DIGITS else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str) and len(value) > STRING_STATS_PREFIX:
        return value[:STRING_STATS_PREFIX] if side == "min" else _string_upper_bound(value)
    return value


_TICKS_PER_MS = {"s": 0, "ms": 1, "us": 1000, "ns": 1_000_000}


def _timestamp_bound(ticks: int, t: pa.TimestampType, side: str) -> str:
    """Milliseconds, as Delta writes them, rounded down for a min and up for a max."""
    per_ms = _TICKS_PER_MS[t.unit]
    if per_ms == 0:  # seconds
        return _format_millis(ticks * 1000, t)
    return _format_millis(ticks // per_ms if side == "min" else -(-ticks // per_ms), t)


def _format_millis(millis: int, t: pa.TimestampType) -> str:
    text = (datetime(1970, 1, 1) + timedelta(milliseconds=millis)).isoformat(timespec="milliseconds")
    return f"{text}Z" if t.tz is not None else text


def _string_upper_bound(value: str) -> str | None:
    """A string of at most 32 characters that is greater than every string starting like `value`."""
    prefix = value[:STRING_STATS_PREFIX]
    for i in range(len(prefix) - 1, -1, -1):
        code = ord(prefix[i]) + 1
        if 0xD800 <= code <= 0xDFFF:
            code = 0xE000
        if code <= 0x10FFFF:
            return prefix[:i] + chr(code)
    return None
