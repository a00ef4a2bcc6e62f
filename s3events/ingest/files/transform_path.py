"""Step 2 for a target with a SQL transform (`ingest/files/transform.py`). `src` is the batch's rows parsed
by the fast path, held by the driver for a batch of up to `driver.read.max.bytes` (then the transform's
rows come back to the driver and its threads write them, as the fast path's driver threads do) or by
Spark for a larger one (`transform_src`), or, for a batch the fast path cannot take whole,
read by the same paths as any batch (fast and line, `dispatch.run_batch`) into a scratch directory
under the target's staging prefix (`src-<id>`), never committed and removed after (or by the next
start, `scratch.remove_left`, when the process died first). The transform's rows, shaped by the
post-parse stage (`_ingested_at`, the table's column order), are written by the executors into the
target or reduced per record key for a MERGE.

A file whose rows make the transform fail at run time is found by halving the batch's files until it
stands alone: it becomes one error row and the other files are written (`transform.first_line` of
Spark's message). A failure about the SQL itself, or one every file of the batch has, fails the batch.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from s3events.infra.aws import AwsOptions
from s3events.infra.parquet_files import (
    WrittenFile,
    from_row,
    read_data_files,
    remove_data_files,
    write_partitioned,
    written_files_batch,
)
from s3events.ingest.files import latest_rows, post_parse
from s3events.ingest.files.dispatch import fast_parser, run_batch
from s3events.ingest.files.fast_path import reads_in_driver
from s3events.ingest.files.line_parse import arrow_schema, declared_schema
from s3events.ingest.files.line_path import staged_rows, write_rows
from s3events.ingest.files.merge_input import MergeInput
from s3events.ingest.files.post_parse import ERROR_SCHEMA
from s3events.ingest.files.read_output import ReadOutput
from s3events.ingest.files.scratch import new_scratch
from s3events.ingest.files.transform import (
    Transform,
    TransformFailed,
    isolate,
    quiet_spark_errors,
    rows_without_output,
)
from s3events.ingest.files.transform_arrow_route import run_arrow
from s3events.ingest.files.transform_src import HeldSrc, ParsedSrc, conformed, held_src, parsed_src
from s3events.ingest.model import Batch
from s3events.ingest.target import TargetSpec

log = logging.getLogger(__name__)

_SHARED_BYTES = 32 << 20  # source bytes per driver thread writing a small batch's transformed rows
_KEY_ROWS = "__s3events_key_rows"  # a MERGE's latest row: how many transformed rows share its key


def run_transformed(
    spark: SparkSession,
    batch: Batch,
    target: TargetSpec,
    transform: Transform,
    *,
    existing_schema: pa.Schema | None,
    aws: AwsOptions,
    ingested_at: datetime,
) -> ReadOutput:
    try:
        return _run(spark, batch, target, transform, existing_schema, aws, ingested_at)
    finally:
        transform.release()  # the batch's rows leave the JVM's heap with its views


def _run(
    spark: SparkSession,
    batch: Batch,
    target: TargetSpec,
    transform: Transform,
    existing_schema: pa.Schema | None,
    aws: AwsOptions,
    ingested_at: datetime,
) -> ReadOutput:
    by_arrow = run_arrow(
        spark, batch, target, transform, existing_schema=existing_schema, aws=aws, ingested_at=ingested_at
    )
    if by_arrow is not None:
        return by_arrow
    scratch = new_scratch(target.path)
    as_src = replace(target, path=scratch, mode="append", partition_by=(), record_key=(), ordering_field=None)
    size = sum(f.size or 0 for f in batch.files)
    parsed = _parsed(transform, batch, as_src, aws, ingested_at)
    if parsed is not None:
        try:
            read = ReadOutput(parsed.schema, ERROR_SCHEMA.empty_table(), fast_path_files=len(batch.files))
            if isinstance(parsed, HeldSrc):
                src = partial(parsed.frame, transform.session)
                job = _Job(transform, target, read, src, existing_schema, aws, ingested_at, size, held=parsed)
            else:
                job = _Job(transform, target, read, parsed.frame, existing_schema, aws, ingested_at, size)
            job.rows_by_file = parsed.rows_by_file
            return _transformed(job, sorted(parsed.rows_by_file))
        finally:
            parsed.release()
    read = run_batch(spark, batch, as_src, existing_schema=None, aws=aws, ingested_at=ingested_at)
    try:
        src = partial(_scratch_src, transform.session, read, scratch, aws)
        job = _Job(transform, target, read, src, existing_schema, aws, ingested_at, size)
        return _transformed(job, _sources(batch, read))
    finally:
        remove_data_files(scratch, read.files, aws)


def _parsed(
    transform: Transform, batch: Batch, as_src: TargetSpec, aws: AwsOptions, ingested_at: datetime
) -> ParsedSrc | HeldSrc | None:
    """The batch's rows as the fast path parsed them, when it can read the whole batch: held by the
    driver for a small batch, else by Spark."""
    declared = declared_schema(as_src)
    parser = fast_parser(as_src, arrow_schema(declared) if declared is not None else None, None)
    if parser is None:
        return None
    hold = held_src if reads_in_driver(batch.files, as_src) else parsed_src
    return hold(transform.session, batch.files, as_src, parser=parser, aws=aws, ingested_at=ingested_at)


def _transformed(job: _Job, sources: list[str]) -> ReadOutput:
    with quiet_spark_errors():
        results, failed = isolate(sources, job.run, key=job.transform.spec.key)
    written = [f for files, _ in results for f in files]
    merged = [table for _, tables in results for table in tables]
    return job.output(written, merged, failed)


def _sources(batch: Batch, read: ReadOutput) -> list[str]:
    """The source files the batch's `src` holds rows of (a file that failed to parse has none)."""
    return sorted({f.uri for f in batch.files} - set(read.failed_files))


@dataclass
class _Job:
    transform: Transform
    target: TargetSpec
    read: ReadOutput
    src: Callable[[list[str]], DataFrame]  # `src` for the rows of these source files
    existing: pa.Schema | None
    aws: AwsOptions
    ingested_at: datetime
    size: int  # the batch's source bytes (sizes the files written)
    held: HeldSrc | None = None  # src held by the driver: the transform's rows are written there too
    rows_by_file: dict[str, int] | None = None  # src's rows per source file, when known
    schema: pa.Schema | None = None  # the target's schema after this batch
    filtered: int = 0

    def run(self, files: list[str]) -> tuple[list[WrittenFile], list[pa.Table]]:
        src = self.src(files)
        out = self.transform.frame_of(src)
        shaped = post_parse.finish_rows(out, ingested_at=self.ingested_at, existing=self.existing)
        schema = arrow_schema(shaped.schema)
        missing = [c for c in (*self.target.record_key, *self.target.partition_by) if c not in schema.names]
        if missing:
            raise TransformFailed(
                f"{self.transform.spec.key}: the transform's rows have no column {', '.join(missing)}, "
                "which record.key / partition.by name"
            )
        self.schema = schema
        if self.held is not None:
            return self._run_held(shaped, schema, files)
        if self.target.mode == "merge":
            latest = staged_rows(
                post_parse.latest_per_key(_key_rows(shaped, self.target), self.target), self.target, self.aws
            )
            self.filtered += self._removed(src, out, files, int(pc.sum(latest[_KEY_ROWS]).as_py() or 0))
            return [], [latest.drop_columns([_KEY_ROWS]).cast(schema)]
        written = write_rows(shaped, self.target, schema, self.aws, self.size)
        self.filtered += self._removed(src, out, files, sum(f.num_records for f in written))
        return written, []

    def _run_held(
        self, shaped: DataFrame, schema: pa.Schema, files: list[str]
    ) -> tuple[list[WrittenFile], list[pa.Table]]:
        """The transform's rows back in the driver (one Spark job, no Python worker), written there, or
        held for the MERGE (`output` keeps the latest row per key)."""
        assert self.held is not None
        rows = shaped.toArrow().cast(schema)
        if self.transform.removes_rows:
            src = self.held.table(files)
            by_lineage = self.transform.fans_out  # an input row may give several rows
            self.filtered += rows_without_output(src, rows) if by_lineage else src.num_rows - rows.num_rows
        if self.target.mode == "merge":
            return [], [rows]
        return _written_in_driver(rows, self.target, schema, self.aws, self.size), []

    def _removed(self, src: DataFrame, out: DataFrame, files: list[str], output_rows: int) -> int:
        """Input rows no output row came from (the batch's `filtered`, on every route): src's rows less
        the transform's when each input row gives at most one (`fans_out`) and src's counts are known;
        else one more Spark job. `output_rows` counts the transform's rows before a MERGE keeps the
        latest per key: that reduction is not filtering."""
        if not self.transform.removes_rows:
            return 0
        if self.rows_by_file is not None and not self.transform.fans_out:
            return sum(self.rows_by_file[f] for f in files) - output_rows
        keys = ["_source_file", "_source_line"]
        return int(src.select(*keys).join(out.select(*keys).distinct(), keys, "left_anti").count())

    def output(
        self, written: list[WrittenFile], merged: list[pa.Table], failed: dict[str, str]
    ) -> ReadOutput:
        schema = self.schema or self._schema_only()
        errors = pa.concat_tables([self.read.errors, _error_rows(failed, self.ingested_at)])
        out = ReadOutput(schema=schema, errors=errors, failed_files={**self.read.failed_files, **failed})
        out.fast_path_files, out.filtered = self.read.fast_path_files, self.filtered
        out.transform = self.transform.spec.identity
        if self.target.mode == "merge":
            rows = pa.concat_tables(merged) if merged else schema.empty_table()
            rows = latest_rows.latest(rows, self.target.record_key, self.target.ordering_field)
            out.merge, out.rows = MergeInput.held(rows), rows.num_rows
        else:
            out.files, out.rows = written, sum(f.num_records for f in written)
        return out

    def _schema_only(self) -> pa.Schema:
        """The target's schema after a batch none of whose rows were written (no Spark job)."""
        out = self.transform.frame_of(self.src([]).limit(0))
        shaped = post_parse.finish_rows(out, ingested_at=self.ingested_at, existing=self.existing)
        return arrow_schema(shaped.schema)


def _key_rows(rows: DataFrame, target: TargetSpec) -> DataFrame:
    """`rows` with how many share each one's record key: summed over the latest rows it is the number of
    transformed rows before the reduction, counted in the reduction's own job (its partitioning)."""
    keys = Window.partitionBy(*[F.col(f"`{k}`") for k in target.record_key])
    return rows.withColumn(_KEY_ROWS, F.count(F.lit(1)).over(keys))


def _written_in_driver(
    rows: pa.Table, target: TargetSpec, schema: pa.Schema, aws: AwsOptions, total_bytes: int
) -> list[WrittenFile]:
    """`rows` written as data files on the driver's threads: a slice per `_SHARED_BYTES` of the batch's
    source, up to one per core (as `line_path.write_rows` shares a write between tasks)."""
    slices = max(1, min(os.cpu_count() or 1, math.ceil(total_bytes / _SHARED_BYTES), rows.num_rows))
    size = math.ceil(rows.num_rows / slices) if rows.num_rows else 0
    parts = [rows.slice(i * size, size) for i in range(slices)] if size else []
    write = partial(
        write_partitioned, table_uri=target.path, schema=schema, options=aws, partition_by=target.partition_by
    )
    with ThreadPoolExecutor(max_workers=max(1, len(parts)), thread_name_prefix="s3events-write") as pool:
        return [f for written in pool.map(write, parts) for f in written]


def _scratch_src(
    session: SparkSession, read: ReadOutput, scratch: str, aws: AwsOptions, files: list[str]
) -> DataFrame:
    """The scratch files' rows of source `files` as a DataFrame of the transform's `session`, read by
    the executors."""
    listing = written_files_batch(read.files)
    frame = session.createDataFrame(
        pa.Table.from_batches([listing]) if listing.num_rows else [], schema=from_arrow_schema(listing.schema)
    )
    scan = partial(_read_scratch, table_uri=scratch, aws=aws, schema=read.schema)
    tasks = max(1, min(len(read.files), session.sparkContext.defaultParallelism * 2))
    rows = frame.repartition(tasks).mapInArrow(scan, from_arrow_schema(read.schema))
    return rows.where(F.col("_source_file").isin(files))


def _read_scratch(
    batches: Iterator[pa.RecordBatch], *, table_uri: str, aws: AwsOptions, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        files = [from_row(row) for row in batch.to_pylist()]
        for table in read_data_files(table_uri, files, aws, schema=schema):
            yield from conformed(table, schema).to_batches()


def _error_rows(failed: dict[str, str], ingested_at: datetime) -> pa.Table:
    """One whole-file error row per file the transform failed for."""
    return pa.Table.from_pylist(
        [
            {"_source_file": uri, "error": f"transform: {why}", "_ingested_at": ingested_at}
            for uri, why in sorted(failed.items())
        ],
        schema=ERROR_SCHEMA,
    )
