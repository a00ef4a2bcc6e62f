"""A transformed batch's `src` straight from the fast path's parsers: no scratch files, no second parse.

Each task fetches and parses its files as a fast-path task does (`fast_task`: the same parsers, the same
`post_parse.finish`), but keeps their rows instead of writing them: a row per part of a file's rows, as
Arrow IPC, which Spark caches (`MEMORY_AND_DISK`, in the executors; recomputed from the objects, whose
etags the fetch holds, if a block is lost). The driver collects only the small columns: what every task
saw (the files it was given, the declined files, the CSV headers, each part's schema), and from them
decides the batch's `src` schema as the fast path does (`fast_path.table_schema`). `src` is the cached
parts decoded under that schema (a `mapInArrow` in the transform's own session), filtered by file before
decoding, so the halving search of `transform.isolate` decodes only the files it tries.

A batch small enough to read on the driver's threads (`driver.read.max.bytes`, as the fast path
decides) is parsed there by the same task function and held as one Arrow table (`held_src`): the
transform then takes it into Spark once (`createDataFrame` of Arrow, no Python worker) and its rows come
back as Arrow (`toArrow`) for the driver's threads to write, where the executors' route runs three
Python stages (parse, decode, write) around the SQL, measured 2-4 times slower for such batches
(docs/transforms.md).

A batch the fast path cannot take whole (a declined file, types or CSV headers that differ, a key that
gives no columns) returns None: the caller reads it by the normal paths into a scratch directory instead
(`transform_path`), which splits such batches between the paths exactly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from s3events.errors import TransientError
from s3events.infra.aws import AwsOptions
from s3events.ingest.files import post_parse
from s3events.ingest.files.fast_path import (
    last_columns,
    run_in_driver,
    table_schema,
    task_count,
    unsplittable,
)
from s3events.ingest.files.fast_task import fetched_ahead
from s3events.ingest.files.formats.base import FileDeclined, FileParser, parse_or_decline
from s3events.ingest.files.frames import collected, files_frame
from s3events.ingest.files.lineage import FIXED
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec

_SAMPLE_BYTES = 16 << 20  # the file `sample_schema` parses on the driver, when one is this small
_PART_BYTES = 32 << 20  # Arrow bytes per cached row: far below Spark's and Arrow's 2 GiB bounds
_PARTS = pa.schema(
    [
        pa.field("uri", pa.string()),  # the source file of a part ...
        pa.field("data", pa.binary()),  # ... its rows (Arrow IPC stream)
        pa.field("schema", pa.binary()),  # ... and their schema, null-typed columns included
        pa.field("rows", pa.int64()),
        pa.field("declined", pa.string()),  # a file the fast path cannot read exactly: why
        pa.field("header", pa.string()),  # a CSV header line the task saw
        pa.field("files", pa.int64()),  # the files a task was given (one row per task)
    ]
)
_SMALL = [name for name in _PARTS.names if name != "data"]


@dataclass(frozen=True, slots=True)
class ParsedSrc:
    """A batch's parsed rows, cached by Spark; `release` when done."""

    parts: DataFrame
    schema: pa.Schema  # src's schema: lineage, data columns, `_ingested_at`
    rows_by_file: dict[str, int]

    def frame(self, files: list[str]) -> DataFrame:
        """`src` for the rows of `files` (a DataFrame of the session the parts were read in)."""
        chosen = self.parts.where(F.col("uri").isin(files) & F.col("data").isNotNull()).select("data")
        decode = partial(_decoded, schema=self.schema)
        return chosen.mapInArrow(decode, from_arrow_schema(self.schema))

    def release(self) -> None:
        self.parts.unpersist()


@dataclass(frozen=True, slots=True)
class HeldSrc:
    """A small batch's parsed rows, held by the driver as one Arrow table."""

    rows: pa.Table  # under `schema`
    schema: pa.Schema
    rows_by_file: dict[str, int]

    def table(self, files: list[str]) -> pa.Table:
        """The rows of `files`."""
        return self.rows.filter(pc.is_in(self.rows["_source_file"], value_set=pa.array(files, pa.string())))

    def frame(self, session: SparkSession, files: list[str]) -> DataFrame:
        """`src` for the rows of `files`, a DataFrame of `session` (the transform's)."""
        part = self.table(files)
        return session.createDataFrame(part if part.num_rows else [], schema=from_arrow_schema(self.schema))

    def release(self) -> None:
        """Nothing to release: the table goes with this object."""


def parsed_src(
    spark: SparkSession,
    files: tuple[FileRef, ...],
    target: TargetSpec,
    *,
    parser: FileParser,
    aws: AwsOptions,
    ingested_at: datetime,
) -> ParsedSrc | None:
    """The batch's rows parsed by the fast path's `parser` in Spark tasks of `spark` (the transform's),
    cached; None when the fast path cannot take the whole batch. TransientError when the tasks' results
    do not account for every file (see `fast_path.ensure_accounted`)."""
    if post_parse.key_failures(files, target.key_columns):
        return None
    task = _task(target, parser, aws, ingested_at)
    parts = files_frame(spark, files, task_count(spark, files)).map(task, from_arrow_schema(_PARTS))
    parts = parts.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        found = _decided(collected(parts.select(*_SMALL)), files, target, parser)
    except BaseException:
        parts.unpersist()
        raise
    if found is None:
        parts.unpersist()
        return None
    schema, rows = found
    return ParsedSrc(parts, schema, rows)


def held_src(
    spark: SparkSession,
    files: tuple[FileRef, ...],
    target: TargetSpec,
    *,
    parser: FileParser,
    aws: AwsOptions,
    ingested_at: datetime,
) -> HeldSrc | None:
    """The batch's rows parsed by the fast path's `parser` on the driver's threads, sliced as
    `parsed_src`'s tasks would be; None when the fast path cannot take the whole batch."""
    if post_parse.key_failures(files, target.key_columns):
        return None
    task = _task(target, parser, aws, ingested_at)
    slices = min(len(files), task_count(spark, files))
    results = run_in_driver(lambda refs: pa.concat_batches(list(task(iter(refs)))), files, slices)
    found = _decided([r for b in results for r in b.select(_SMALL).to_pylist()], files, target, parser)
    if found is None:
        return None
    schema, rows = found
    data = [d for b in results for d in b.column("data").to_pylist() if d is not None]
    tables = [conformed(pa.ipc.open_stream(pa.py_buffer(d)).read_all(), schema) for d in data]
    return HeldSrc(pa.concat_tables(tables) if tables else schema.empty_table(), schema, rows)


def sample_schema(
    spark: SparkSession,
    files: tuple[FileRef, ...],
    target: TargetSpec,
    *,
    parser: FileParser,
    aws: AwsOptions,
    ingested_at: datetime,
) -> pa.Schema | None:
    """src's schema as a batch of one of `files` alone would have it (parsed on the driver): the largest
    of up to `_SAMPLE_BYTES` (the likeliest to hold every column), else the smallest. None when the fast
    path declines that file."""
    small = [f for f in files if (f.size or 0) <= _SAMPLE_BYTES]
    sample = max(small, key=lambda f: f.size or 0) if small else min(files, key=lambda f: f.size or 0)
    if post_parse.key_failures((sample,), target.key_columns):
        return None
    task = _task(target, parser, aws, ingested_at)
    meta = [r for b in task(iter([sample])) for r in b.select(_SMALL).to_pylist()]
    if any(r["declined"] is not None for r in meta):
        return None
    schemas = [pa.ipc.read_schema(pa.py_buffer(r["schema"])) for r in meta if r["schema"] is not None]
    return table_schema(None, parser.known, schemas, last_columns(target), sort_new=parser.new_columns_sorted)


def _task(
    target: TargetSpec, parser: FileParser, aws: AwsOptions, ingested_at: datetime
) -> partial[Iterator[pa.RecordBatch]]:
    finish = partial(
        post_parse.finish,
        key_columns=target.key_columns,
        ingested_at=ingested_at,
        rescued=target.rescued_column,
    )
    return partial(_parse_task, aws=aws, parser=parser, finish=finish)


def _decided(
    meta: list[dict[str, object]], files: tuple[FileRef, ...], target: TargetSpec, parser: FileParser
) -> tuple[pa.Schema, dict[str, int]] | None:
    """src's schema and each file's row count from what the tasks saw; None when the batch cannot be
    read by the fast path whole."""
    accounted = sum(int(r["files"] or 0) for r in meta)  # type: ignore[call-overload]
    if accounted != len(files):
        raise TransientError(
            f"target {target.name}: the transform's parse covers {accounted} of {len(files)} files; "
            "the batch is not committed and will be retried"
        )
    if any(r["declined"] is not None for r in meta):
        return None
    schemas = [pa.ipc.read_schema(pa.py_buffer(r["schema"])) for r in meta if r["schema"] is not None]
    schema = table_schema(
        None, parser.known, schemas, last_columns(target), sort_new=parser.new_columns_sorted
    )
    headers = {str(r["header"]) for r in meta if r["header"] is not None}
    if unsplittable(schema, None, headers, False, parser) is not None:
        return None
    assert schema is not None
    rows: dict[str, int] = {f.uri: 0 for f in files}
    for r in meta:
        if r["uri"] is not None:
            rows[str(r["uri"])] += int(r["rows"] or 0)  # type: ignore[call-overload]
    return schema, rows


def _parse_task(
    refs: Iterator[FileRef], *, aws: AwsOptions, parser: FileParser, finish: partial[pa.Table]
) -> Iterator[pa.RecordBatch]:
    """Inside a task: each file fetched ahead, parsed, finished, and handed on in parts."""
    given = list(refs)
    hints: dict[str, pa.DataType] = {}
    with contextlib.closing(fetched_ahead(given, aws)) as objects:
        for ref, fetched in objects:
            if fetched.data is None:
                yield _row(declined=fetched.reason or "unreadable")
                continue
            parsed = parse_or_decline(parser, fetched.data, ref, fetched.etag, hints)
            if parsed.header is not None:
                yield _row(header=parsed.header)
            tables = (
                parsed.parts
                if parsed.parts is not None
                else [parsed.table]
                if parsed.table is not None
                else None
            )
            if tables is None or parsed.errors:  # error rows: the normal paths record them
                yield _row(declined=parsed.reason or "declined")
                continue
            try:  # a part that fails after others were handed on: the file is declined, and so the batch
                for table in tables:
                    yield from _part_rows(finish(table, ref.uri), ref.uri, parser)
            except FileDeclined as exc:
                yield _row(declined=exc.reason)
    yield _row(files=len(given))


def _part_rows(table: pa.Table, uri: str, parser: FileParser) -> Iterator[pa.RecordBatch]:
    odd = [f.name for f in table.schema if f.name not in FIXED and not parser.keeps_type(f.type)]
    if odd:
        yield _row(declined=f"types of {', '.join(odd)} differ from Spark's inference")
        return
    if not table.num_rows:  # no rows, no columns: as the fast path writes no file for it
        yield _row(uri=uri, rows=0)
        return
    schema = table.schema.serialize().to_pybytes()
    per_part = max(1, table.num_rows * _PART_BYTES // max(table.nbytes, 1))
    for part in table.to_batches(max_chunksize=per_part):
        yield _row(uri=uri, data=_ipc(part), schema=schema, rows=part.num_rows)


def _row(**values: object) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([values], schema=_PARTS)


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def _decoded(batches: Iterator[pa.RecordBatch], *, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for data in batch.column(0).to_pylist():
            yield from conformed(pa.ipc.open_stream(pa.py_buffer(data)).read_all(), schema).to_batches()


def conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table`'s rows under `schema`: a column it lacks is null, a null-typed one takes its type."""
    columns = [
        table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)
