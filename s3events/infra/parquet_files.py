"""Executors write Parquet data files into a Delta table's directory; the driver commits them.

`write_data_file` runs inside Spark executors (in a task's function): a picklable top-level
function over plain data that never imports deltalake or pyspark. It returns a WrittenFile, which
travels back to the driver as one row of WRITTEN_FILE_SCHEMA (`to_row` / `from_row`), where
`delta_commit.commit_files` turns it into a Delta add action.

The layout follows what delta-rs itself writes: partition directories are Hive style,
`col=<value percent-encoded like urllib.parse.quote(v, safe="")>`, a null (or empty) value is
`__HIVE_DEFAULT_PARTITION__`; typed values are serialized as the protocol and delta-rs do
(`partition_value`: `true`, `2026-03-01 12:00:00.250000` in UTC), not by str(). WrittenFile.path is the
file's real path relative to the table root, which is what deltalake's AddAction takes: delta-rs
URI-encodes it once more when it writes the log (a '%' in the directory name is '%25' in the JSON), as
the protocol wants. Each file's statistics are exact or absent (`file_stats`).
"""

from __future__ import annotations

import contextlib
import json
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
from s3events.infra.file_stats import FileStats, leaf_paths

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_DICTIONARY_SAMPLE = 1024  # rows that choose each column's encoding
STAGING_DIR = "_s3events_staging"  # beside _delta_log: what executors hand the driver through storage
STAGING_LEFTOVER_AGE = timedelta(days=1)

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
    relative = _new_file(values)
    target = f"{root}/{relative}"
    stats = FileStats(file_schema)
    sink: Any = None
    writer: pq.ParquetWriter | None = None
    written: list[pq.FileMetaData] = []
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            batch = _conform(batch, file_schema, schema)
            if writer is None:
                sink = _open_sink(filesystem, target)
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


def _new_file(values: Mapping[str, str | None]) -> str:
    """A new data file's path relative to the table root: `<partition path>/part-<uuid4>.parquet`."""
    directory = partition_path(values)
    return f"{directory}/part-{uuid.uuid4()}.parquet" if directory else f"part-{uuid.uuid4()}.parquet"


def _open_sink(filesystem: pafs.FileSystem, target: str) -> Any:
    if isinstance(filesystem, pafs.LocalFileSystem):
        filesystem.create_dir(target.rsplit("/", 1)[0], recursive=True)
    return filesystem.open_output_stream(target)


def write_partitioned(
    table: pa.Table,
    *,
    table_uri: str,
    schema: pa.Schema,
    options: AwsOptions,
    partition_by: tuple[str, ...],
) -> list[WrittenFile]:
    """`table` as one file per distinct combination of partition values (one file when unpartitioned).
    A partition column `table` lacks (its rows hold no value of it: a task's files where the field is
    absent or null throughout) is null in every row."""
    if table.num_rows == 0:
        return []
    groups: list[tuple[dict[str, str | None], pa.Table]] = []
    held = [column for column in partition_by if column in table.column_names]
    keys = table.select(held).group_by(held).aggregate([]).to_pylist() if held else [{}]
    for values in keys:
        part, rows = {column: partition_value(values.get(column)) for column in partition_by}, table
        for column, value in values.items():
            rows = rows.filter(pc.is_null(rows[column]) if value is None else pc.equal(rows[column], value))
        groups.append((part, rows))
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
    # Region, endpoint and (only when the AWS SDK cannot find them itself) credentials: the same
    # decision delta-rs gets, from the same boto3 credential chain.
    storage = aws.delta_storage_options(options) if table_uri.startswith("s3://") else {}
    return filesystem_for(table_uri, storage)


def filesystem_for(table_uri: str, storage: Mapping[str, str]) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and root path for a table, from the storage options delta-rs opens it with."""
    if not table_uri.startswith("s3://"):
        return pafs.LocalFileSystem(), os.path.abspath(table_uri.removeprefix("file://"))
    kwargs: dict[str, Any] = {"region": storage.get("AWS_REGION")}
    if endpoint_url := storage.get("AWS_ENDPOINT_URL"):
        endpoint = urlparse(endpoint_url)
        kwargs["endpoint_override"] = endpoint.netloc or endpoint.path
        kwargs["scheme"] = endpoint.scheme or "https"
    if "AWS_ACCESS_KEY_ID" in storage:
        kwargs["access_key"] = storage["AWS_ACCESS_KEY_ID"]
        kwargs["secret_key"] = storage["AWS_SECRET_ACCESS_KEY"]
        kwargs["session_token"] = storage.get("AWS_SESSION_TOKEN")
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
            chosen.extend(leaf_paths(f.name, f.type))
        elif pa.types.is_dictionary(f.type) or (
            not pa.types.is_boolean(f.type)  # Parquet encodes booleans as bits, never as a dictionary
            and 2 * len(pc.unique(column)) <= len(column)
        ):
            chosen.append(f.name)
    return chosen


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
