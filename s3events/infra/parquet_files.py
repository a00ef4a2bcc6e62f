"""Executors write Parquet data files into a Delta table's directory; the driver commits them.

`write_data_file` runs inside Spark executors (in a task's function): a picklable top-level
function over plain data that never imports deltalake or pyspark. It returns a WrittenFile, which
travels back to the driver as one row of WRITTEN_FILE_SCHEMA (`to_row` / `from_row`), where
`delta_commit.commit_files` turns it into a Delta add action.

Layout and statistics follow what delta-rs itself writes, so its readers skip files by statistics:
- partition directories are Hive style, `col=<value percent-encoded like urllib.parse.quote(v, safe="")>`,
  a null (or empty) value is `__HIVE_DEFAULT_PARTITION__`; typed values are serialized as the protocol
  and delta-rs do (`partition_value`: `true`, `2026-03-01 12:00:00.250000` in UTC), not by str().
  WrittenFile.path is the file's real path relative to the table root, which is what deltalake's
  AddAction takes: delta-rs URI-encodes it once more when it writes the log (a '%' in the directory name
  is '%25' in the JSON), as the protocol wants;
- statistics hold numRecords, and minValues / maxValues / nullCount for top-level primitive columns
  (strings cut to 32 characters, from the Parquet writer's own statistics, none when a string bound
  there would pass 4 KiB; timestamps at millisecond precision rounded outwards so the bounds stay
  bounds; nothing for binary columns or float columns holding NaN); nested columns get nullCount only.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from s3events.infra import aws
from s3events.infra.aws import AwsOptions

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_DICTIONARY_SAMPLE = 1024  # rows that choose each column's encoding
STAGING_DIR = "_s3events_staging"  # beside _delta_log: what executors hand the driver through storage
STAGING_LEFTOVER_AGE = timedelta(days=1)
STRING_STATS_PREFIX = 32

WRITTEN_FILE_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("num_records", pa.int64(), nullable=False),
        pa.field("partition_values", pa.string(), nullable=False),  # JSON object: column -> value|null
        pa.field("modification_time", pa.int64(), nullable=False),
        pa.field("stats", pa.string(), nullable=False),
    ]
)


@dataclass(frozen=True, slots=True)
class WrittenFile:
    path: str  # the real path relative to the table root (deltalake's AddAction encodes it for the log)
    size: int
    num_records: int
    partition_values: Mapping[str, str | None] = field(default_factory=dict)
    modification_time: int = 0  # milliseconds since the epoch
    stats: str = "{}"  # Delta statistics JSON


def to_row(f: WrittenFile) -> dict[str, Any]:
    return {
        "path": f.path,
        "size": f.size,
        "num_records": f.num_records,
        "partition_values": json.dumps(dict(f.partition_values), sort_keys=True),
        "modification_time": f.modification_time,
        "stats": f.stats,
    }


def from_row(row: Mapping[str, Any]) -> WrittenFile:
    values = row["partition_values"]
    return WrittenFile(
        path=str(row["path"]),
        size=int(row["size"]),
        num_records=int(row["num_records"]),
        partition_values=json.loads(values) if isinstance(values, str) else dict(values or {}),
        modification_time=int(row["modification_time"]),
        stats=str(row["stats"]),
    )


def written_files_batch(files: Iterable[WrittenFile]) -> pa.RecordBatch:
    """WrittenFiles as one WRITTEN_FILE_SCHEMA batch: what a mapInArrow function yields."""
    return pa.RecordBatch.from_pylist([to_row(f) for f in files], schema=WRITTEN_FILE_SCHEMA)


def partition_path(partition_values: Mapping[str, str | None]) -> str:
    """`col=value/...` as delta-rs names partition directories (no trailing slash; '' when none)."""
    return "/".join(
        f"{col}={quote(v, safe='') if v else NULL_PARTITION}" for col, v in partition_values.items()
    )


def write_data_file(
    batches: Iterable[pa.RecordBatch | pa.Table],
    *,
    table_uri: str,
    schema: pa.Schema,
    options: AwsOptions,
    partition_values: Mapping[str, str | None] | None = None,
    compression: str = "snappy",
) -> WrittenFile | None:
    """Write one Parquet file `<table>/<partition path>/part-<uuid4>.parquet`; None when no rows came.

    `schema` is the table schema. Partition columns (the keys of `partition_values`) are not stored in
    the file, as Delta wants; the batches may carry them or not. Batch columns are matched to `schema`
    by name and cast; columns the batches lack are written as nulls (they must be nullable), columns the
    schema lacks are an error (ValueError). An empty or null partition value is stored as null (Delta
    has no empty-string partition values). A failed write removes its partial file (best effort).
    A table becomes row groups of up to a million rows whatever its chunks; a batch is one row group.
    """
    values = {col: (v if v else None) for col, v in (partition_values or {}).items()}
    file_schema = pa.schema([f for f in schema if f.name not in values])
    filesystem, root = _filesystem(table_uri, options)
    directory = partition_path(values)
    relative = f"{directory}/part-{uuid.uuid4()}.parquet" if directory else f"part-{uuid.uuid4()}.parquet"
    target = f"{root}/{relative}"
    stats = _Stats(file_schema)
    sink: Any = None
    writer: pq.ParquetWriter | None = None
    written: list[pq.FileMetaData] = []
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            batch = _conform(batch, file_schema, schema)
            if writer is None:
                if isinstance(filesystem, pafs.LocalFileSystem):
                    filesystem.create_dir(target.rsplit("/", 1)[0], recursive=True)
                sink = filesystem.open_output_stream(target)
                writer = pq.ParquetWriter(
                    sink,
                    file_schema,
                    compression=compression,
                    use_dictionary=dictionary_columns(batch),
                    metadata_collector=written,
                )
            writer.write(batch)
            stats.update(batch)
        if writer is None:
            return None
        writer.close()
        size = int(sink.tell())
        sink.close()
        stats.take_string_bounds(written[0])
    except BaseException:
        _abandon(filesystem, target, writer, sink)
        raise
    return WrittenFile(
        path=relative,
        size=size,
        num_records=stats.rows,
        partition_values=values,
        modification_time=int(time.time() * 1000),
        stats=stats.to_json(),
    )


def write_partitioned(
    table: pa.Table,
    *,
    table_uri: str,
    schema: pa.Schema,
    options: AwsOptions,
    partition_by: tuple[str, ...],
) -> list[WrittenFile]:
    """`table` as one file per distinct combination of partition values (one file when unpartitioned)."""
    if table.num_rows == 0:
        return []
    groups: list[tuple[dict[str, str | None], pa.Table]] = []
    if partition_by:
        keys = table.select(list(partition_by)).group_by(list(partition_by)).aggregate([]).to_pylist()
        for values in keys:
            mask = None
            for column, value in values.items():
                cond = pc.is_null(table[column]) if value is None else pc.equal(table[column], value)
                mask = cond if mask is None else pc.and_(mask, cond)
            part = {k: partition_value(v) for k, v in values.items()}
            groups.append((part, table.filter(mask)))
    else:
        groups.append(({}, table))
    files = []
    for values, part in groups:
        written = write_data_file(
            [part], table_uri=table_uri, schema=schema, options=options, partition_values=values
        )
        if written is not None:
            files.append(written)
    return files


def partition_value(value: Any) -> str | None:
    """A partition value as the Delta protocol serializes it, and as delta-rs writes it: booleans
    `true`/`false`, timestamps `YYYY-MM-DD HH:MM:SS.ffffff` in UTC, decimals without an exponent."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def partition_column(value: str | None, t: pa.DataType, rows: int) -> pa.Array:
    """`rows` values of a partition column of type `t` as Delta readers see them: the log's `value`
    (`partition_value`'s string) read back. ArrowInvalid when it does not read as `t`."""
    if value is None:
        return pa.nulls(rows, t)
    text = pa.array([value], pa.string())
    if pa.types.is_timestamp(t):  # written in UTC without a zone, to the microsecond
        typed = text.cast(pa.timestamp("us")).cast(pa.timestamp(t.unit)).cast(t)
    else:
        typed = text.cast(t)
    return pa.repeat(typed[0], rows)


def stage_table(table: pa.Table, *, table_uri: str, options: AwsOptions) -> str:
    """Write `table` as an Arrow IPC file under the table's staging directory, for the driver to take
    (`take_staged`); returns its path relative to the table root. Delta readers see only the files the
    log names, so a staged file is invisible to them."""
    filesystem, root = _filesystem(table_uri, options)
    relative = f"{STAGING_DIR}/{uuid.uuid4()}.arrow"
    target = f"{root}/{relative}"
    if isinstance(filesystem, pafs.LocalFileSystem):
        filesystem.create_dir(f"{root}/{STAGING_DIR}", recursive=True)
    try:
        with filesystem.open_output_stream(target) as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    except BaseException:
        with contextlib.suppress(Exception):
            filesystem.delete_file(target)
        raise
    return relative


def take_staged(
    table_uri: str, paths: Iterable[str], options: AwsOptions, *, now: datetime | None = None
) -> list[pa.Table]:
    """Read staged tables and remove them, with any staged file older than STAGING_LEFTOVER_AGE: one a
    task attempt wrote before Spark ran it again, or that a driver stopped before taking."""
    filesystem, root = _filesystem(table_uri, options)
    paths = list(paths)
    tables = []
    for relative in paths:
        with filesystem.open_input_file(f"{root}/{relative}") as source:
            tables.append(pa.ipc.open_file(source).read_all())
    cutoff = (now or datetime.now(UTC)) - STAGING_LEFTOVER_AGE
    selector = pafs.FileSelector(f"{root}/{STAGING_DIR}", allow_not_found=True)
    leftovers = [
        info.path
        for info in filesystem.get_file_info(selector)
        if info.mtime is not None and info.mtime.astimezone(UTC) < cutoff
    ]
    for path in [*(f"{root}/{r}" for r in paths), *leftovers]:
        with contextlib.suppress(Exception):  # best effort: a file left is removed by a later batch
            filesystem.delete_file(path)
    return tables


def read_data_files(
    table_uri: str, files: Iterable[WrittenFile], options: AwsOptions, *, schema: pa.Schema
) -> list[pa.Table]:
    """The rows of written data files as Delta readers would see them once committed: the partition
    columns (not stored in the files) from the files' partition values, typed by the table `schema`."""
    filesystem, root = _filesystem(table_uri, options)
    tables = []
    for f in files:
        table = pq.read_table(f"{root}/{f.path}", filesystem=filesystem)
        for name, value in f.partition_values.items():
            column = partition_column(value, schema.field(name).type, table.num_rows)
            table = table.append_column(name, column)
        tables.append(table)
    return tables


def remove_data_files(table_uri: str, files: Iterable[WrittenFile], options: AwsOptions) -> None:
    """Best effort: delete written but never committed files (readers never see them either way)."""
    filesystem, root = _filesystem(table_uri, options)
    for f in files:
        with contextlib.suppress(Exception):
            filesystem.delete_file(f"{root}/{f.path}")


def _filesystem(table_uri: str, options: AwsOptions) -> tuple[pafs.FileSystem, str]:
    if not table_uri.startswith("s3://"):
        return pafs.LocalFileSystem(), os.path.abspath(table_uri.removeprefix("file://"))
    # Region, endpoint and (only when the AWS SDK cannot find them itself) credentials: the same
    # decision delta-rs gets, from the same boto3 credential chain.
    resolved = aws.delta_storage_options(options)
    kwargs: dict[str, Any] = {"region": resolved.get("AWS_REGION")}
    if options.endpoint_url:
        endpoint = urlparse(options.endpoint_url)
        kwargs["endpoint_override"] = endpoint.netloc or endpoint.path
        kwargs["scheme"] = endpoint.scheme or "https"
    if "AWS_ACCESS_KEY_ID" in resolved:
        kwargs["access_key"] = resolved["AWS_ACCESS_KEY_ID"]
        kwargs["secret_key"] = resolved["AWS_SECRET_ACCESS_KEY"]
        kwargs["session_token"] = resolved.get("AWS_SESSION_TOKEN")
    return pafs.S3FileSystem(**kwargs), table_uri.removeprefix("s3://").rstrip("/")


def _abandon(filesystem: pafs.FileSystem, target: str, writer: Any, sink: Any) -> None:
    """Best effort after a failure: an unreferenced file is harmless (vacuum removes it) but untidy."""
    # Already failing: the original error is what matters, so cleanup errors are dropped.
    for closeable in (writer, sink):
        with contextlib.suppress(Exception):
            if closeable is not None:
                closeable.close()
    with contextlib.suppress(Exception):
        if sink is not None:
            filesystem.delete_file(target)


def dictionary_columns(data: pa.RecordBatch | pa.Table) -> list[str]:
    """The Parquet columns (leaf paths) worth a dictionary, judged on the first rows: those whose
    sampled values repeat (at most half of them distinct), and every leaf of a nested column. Arrow's
    writer otherwise tries a dictionary for every column until it outgrows its page (1 MiB): a column of
    unique values (ids, amounts, timestamps as text) then pays for hashing each value and for a
    dictionary page it throws away, and its file grows."""
    sample = data.slice(0, _DICTIONARY_SAMPLE)
    chosen = []
    for f, column in zip(sample.schema, sample.columns, strict=True):
        if pa.types.is_nested(f.type):
            chosen.extend(_leaf_paths(f.name, f.type))
        elif pa.types.is_dictionary(f.type) or (
            not pa.types.is_boolean(f.type)  # Parquet encodes booleans as bits, never as a dictionary
            and 2 * len(pc.unique(column)) <= len(column)
        ):
            chosen.append(f.name)
    return chosen


def _leaf_paths(path: str, t: pa.DataType) -> list[str]:
    """The Parquet column paths under an Arrow column, as pyarrow names them (compliant lists)."""
    if pa.types.is_struct(t):
        return [
            p for i in range(t.num_fields) for p in _leaf_paths(f"{path}.{t.field(i).name}", t.field(i).type)
        ]
    if pa.types.is_map(t):
        return [
            *_leaf_paths(f"{path}.key_value.key", t.key_type),
            *_leaf_paths(f"{path}.key_value.value", t.item_type),
        ]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_paths(f"{path}.list.element", t.value_type)
    return [path]


def _conform(batch: pa.RecordBatch | pa.Table, schema: pa.Schema, table_schema: pa.Schema) -> Any:
    if batch.schema.equals(schema):
        return batch
    unknown = sorted(set(batch.schema.names) - set(table_schema.names))
    if unknown:  # dropping them silently would lose data without a trace
        raise ValueError(f"the batch has column(s) {', '.join(unknown)} that the table schema lacks")
    columns = []
    for f in schema:
        index = batch.schema.get_field_index(f.name)
        if index < 0:
            if not f.nullable:
                raise ValueError(f"the batch has no column {f.name!r}, which is not nullable")
            columns.append(pa.nulls(batch.num_rows, f.type))
        else:
            column = batch.column(index)
            columns.append(column if column.type == f.type else column.cast(f.type))
    return type(batch).from_arrays(columns, schema=schema)


class _Stats:
    """Delta file statistics accumulated over the batches of one file. String bounds come from the
    Parquet writer's own statistics (`take_string_bounds`): the writer computes them anyway, and a second
    pass over every string was a fifth of a file's write."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.rows = 0
        self.nulls: dict[str, Any] = {}
        self.mins: dict[str, Any] = {}
        self.maxs: dict[str, Any] = {}
        self.no_bounds: set[str] = set()

    def update(self, batch: pa.RecordBatch | pa.Table) -> None:
        self.rows += batch.num_rows
        for f, column in zip(self.schema, batch.columns, strict=True):
            self.nulls[f.name] = _add_nulls(self.nulls.get(f.name), column)
            if f.name in self.no_bounds or not _has_bounds(f.type):
                continue
            if pa.types.is_floating(f.type) and pc.any(pc.is_nan(column)).as_py():
                self.no_bounds.add(f.name)
                continue
            if _is_string(f.type):
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
            if _is_string(f.type):
                strings[leaves] = f.name
            leaves += len(_leaf_paths(f.name, f.type))
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


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _has_bounds(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
    )


def _add_nulls(current: Any, column: pa.Array) -> Any:
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
        return float(value) if t.precision <= 15 else None  # exact in a JSON double up to 15 digits
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
