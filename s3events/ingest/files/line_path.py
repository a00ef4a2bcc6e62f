"""The line path: every format with two paths, through Spark (text and Parquet have one: their
`formats/` modules). A JSON, CSV or XML object is split into lines or records on the executors
(`objects.read_lines`), parsed line by line by the format's Spark parser (from_json, from_csv), and an
Avro, ORC or binary batch is read file by file (`formats/whole_spark`); the fast path's post-parse stage
(`post_parse.finish`, in a mapInArrow) then shapes the rows, which the executors write as Parquet
(append) or hand to the driver (merge).

It reads any file the fast path declined, and records bad lines one by one as error rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime
from functools import partial

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from s3events.infra.aws import AwsOptions
from s3events.infra.parquet_files import (
    WRITTEN_FILE_SCHEMA,
    WrittenFile,
    from_row,
    stage_table,
    take_staged,
    write_partitioned,
    written_files_batch,
)
from s3events.ingest.files import post_parse
from s3events.ingest.files.formats import (
    avro_format,
    csv_lines,
    json_lines,
    orc_format,
    records,
)
from s3events.ingest.files.formats.whole_file import WholeFileReader, binary_reader
from s3events.ingest.files.formats.whole_spark import read_on_spark
from s3events.ingest.files.frames import collected, files_frame, files_where, without_files
from s3events.ingest.files.line_parse import arrow_schema
from s3events.ingest.files.lineage import LINEAGE
from s3events.ingest.files.merge_input import MergeInput
from s3events.ingest.files.objects import LINE_SCHEMA, read_lines
from s3events.ingest.files.read_output import ReadOutput
from s3events.ingest.files.schema_contract import enforce_contract, kept_columns
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec

_TARGET_FILE_BYTES = 256 << 20  # aim for output files of about this size
_MIN_SHARED_BYTES = 32 << 20  # below this per core, one task writes (no tiny files for small batches)
_LINE_PARSERS = {
    "json": json_lines.parse_lines,
    "csv": csv_lines.parse_lines,
    "xml": json_lines.parse_lines,  # its records come as JSON objects (formats/xml_format.py)
}


def run_line_path(
    spark: SparkSession,
    files: tuple[FileRef, ...],
    target: TargetSpec,
    existing_schema: pa.Schema | None,
    aws: AwsOptions,
    ingested_at: datetime,
) -> ReadOutput:
    """The general path: every line through Spark (from_json / from_csv), or every whole file."""
    frame = files_frame(spark, files)
    cached: list[DataFrame] = []  # read once, used by inference, errors and the write: unpersisted below
    whole = _whole_file_reader(target)
    if whole is not None:
        good, bad = read_on_spark(spark, frame, aws, existing_schema, cached, whole)
    else:
        split = records.splitter(target.format, target.reader_options)
        read = partial(_read_lines_partition, aws=aws, split=split)
        lines = frame.map(read, from_arrow_schema(LINE_SCHEMA))
        cached.append(lines.persist(StorageLevel.MEMORY_AND_DISK))
        good, bad = _parse_lines(spark, cached[0], target, existing_schema, cached)
    try:
        unkeyed = post_parse.key_failures(files, target.key_columns)
        good, bad = post_parse.without_files(good, bad, unkeyed)
        given = [*good.columns, *(target.key_columns.names if target.key_columns is not None else ())]
        keep = kept_columns(target, existing_schema)
        parsed = post_parse.finish_parsed(
            good, target=target, existing=existing_schema, ingested_at=ingested_at, keep=keep
        )
        good = parsed.finished()  # a plan: run only by schema.evolution=fail's query
        ignored = enforce_contract(good, given, existing_schema, target)
        schema = arrow_schema(good.schema)
        errors, failed = post_parse.error_rows(bad, ingested_at)
        if unkeyed:
            errors = pa.concat_tables([errors, post_parse.key_error_rows(files, unkeyed, ingested_at)])
            failed.update(unkeyed)
        out = ReadOutput(schema=schema, errors=errors, failed_files=failed, ignored_fields=tuple(ignored))
        if target.mode == "merge":
            latest = post_parse.latest_per_key(parsed, target)
            out.merge = MergeInput.held(staged_rows(latest, target, aws).cast(schema))
            out.rows = out.merge.num_rows
        else:
            out.files = write_rows(parsed, target, schema, aws, sum(f.size or 0 for f in files))
            out.rows = sum(f.num_records for f in out.files)
        return out
    finally:
        for persisted in cached:
            persisted.unpersist()


def _whole_file_reader(target: TargetSpec) -> WholeFileReader | None:
    """The reader of a format whose objects are read whole into columns (no lines), or None."""
    if target.format == "binary":
        return binary_reader(target.binary_max_bytes)
    return {"avro": avro_format.READER, "orc": orc_format.READER}.get(target.format)


def _read_lines_partition(
    refs: Iterator[FileRef], *, aws: AwsOptions, split: records.Split | None
) -> Iterator[pa.RecordBatch]:
    for ref in refs:
        yield from read_lines(ref, aws) if split is None else records.read_records(ref, aws, split=split)


def _parse_lines(
    spark: SparkSession,
    lines: DataFrame,
    target: TargetSpec,
    existing: pa.Schema | None,
    cached: list[DataFrame],
) -> tuple[DataFrame, DataFrame]:
    options = records.line_options(target.format, target.reader_options)
    read_errors = lines.where(F.col("_error").isNotNull()).select(
        *LINEAGE, F.col("value").alias("raw"), F.col("_error").alias("error")
    )
    # All or nothing per file: a file that broke mid-stream (corrupt gzip, ...) contributes no rows.
    broken = files_where(lines, F.col("_error").isNotNull() & F.col("_source_line").isNull())
    ok = without_files(lines.where(F.col("_error").isNull()), broken)
    # Blank lines carry no record in JSON lines or CSV: skipped, not errors.
    ok = ok.where(F.trim(F.col("value")) != "")
    good, bad = _LINE_PARSERS[target.format](spark, ok, target, options, existing, cached)
    return good, read_errors.unionByName(bad)


def staged_rows(df: DataFrame, target: TargetSpec, aws: AwsOptions) -> pa.Table:
    """`df` in the driver, each partition handed over through the target's staging directory: collected,
    a merge batch's rows would all be in the driver's JVM at once (measured: docs/architecture.md)."""
    stage = partial(_stage_partition, table_uri=target.path, aws=aws)
    staged = [r["staged"] for r in collected(df.mapInArrow(stage, "staged string"))]
    tables = take_staged(target.path, staged, aws)
    schema = arrow_schema(df.schema)
    return pa.concat_tables([t.cast(schema) for t in tables]) if tables else schema.empty_table()


def _stage_partition(
    batches: Iterator[pa.RecordBatch], *, table_uri: str, aws: AwsOptions
) -> Iterator[pa.RecordBatch]:
    received = [batch for batch in batches if batch.num_rows]
    if received:
        staged = stage_table(pa.Table.from_batches(received), table_uri=table_uri, options=aws)
        yield pa.record_batch({"staged": [staged]})


def write_rows(
    rows: DataFrame | post_parse.ParsedRows,
    target: TargetSpec,
    schema: pa.Schema,
    aws: AwsOptions,
    total_bytes: int,
) -> list[WrittenFile]:
    """The rows as Parquet data files, written by the executors; parsed rows' stage runs in the write's
    mapInArrow where the partition columns allow (`ParsedRows.groups_by`): one pass through Python."""
    stage = None
    if isinstance(rows, post_parse.ParsedRows):
        fused = rows.groups_by(target.partition_by)
        rows, stage = (rows.parsed, rows.stage) if fused else (rows.finished(), None)
    df = rows
    if target.partition_by:
        df = df.repartition(*[F.col(f"`{p}`") for p in target.partition_by])
    else:
        # Files of about _TARGET_FILE_BYTES, but every core busy once there is enough to share.
        cores = df.sparkSession.sparkContext.defaultParallelism
        shared = min(cores, math.ceil(total_bytes / _MIN_SHARED_BYTES))
        df = df.coalesce(max(1, shared, math.ceil(total_bytes / _TARGET_FILE_BYTES)))
    written = df.mapInArrow(
        partial(
            _write_partition,
            table_uri=target.path,
            schema=schema,
            aws=aws,
            partition_by=target.partition_by,
            stage=stage,
        ),
        from_arrow_schema(WRITTEN_FILE_SCHEMA),
    )
    return [from_row(row) for row in collected(written)]


def _write_partition(
    batches: Iterator[pa.RecordBatch],
    *,
    table_uri: str,
    schema: pa.Schema,
    aws: AwsOptions,
    partition_by: tuple[str, ...],
    stage: post_parse.Stage | None,
) -> Iterator[pa.RecordBatch]:
    received = list(batches if stage is None else stage(batches))
    if not received:
        return
    files = write_partitioned(
        pa.Table.from_batches(received),
        table_uri=table_uri,
        schema=schema,
        options=aws,
        partition_by=partition_by,
    )
    if files:
        yield written_files_batch(files)
