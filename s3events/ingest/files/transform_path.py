"""Step 2 for a target with a SQL transform (`ingest/files/transform.py`): the batch's files are read by the
same paths as any batch (fast and line, `dispatch.run_batch`) into a scratch directory under the
target's staging prefix, never committed; those rows are `src`; the transform's rows, shaped by the
post-parse stage (`_ingested_at`, the table's column order), are written by the
executors into the target or reduced per record key for a MERGE. The scratch files are removed after.

A file whose rows make the transform fail at run time is found by halving the batch's files until it
stands alone: it becomes one error row and the other files are written (`transform.first_line` of
Spark's message). A failure about the SQL itself, or one every file of the batch has, fails the batch.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from s3events.infra.aws import AwsOptions
from s3events.infra.parquet_files import (
    STAGING_DIR,
    WrittenFile,
    from_row,
    read_data_files,
    remove_data_files,
    written_files_batch,
)
from s3events.ingest.files import latest_rows, post_parse
from s3events.ingest.files.dispatch import run_batch
from s3events.ingest.files.line_parse import arrow_schema
from s3events.ingest.files.line_path import staged_rows, write_rows
from s3events.ingest.files.merge_input import MergeInput
from s3events.ingest.files.post_parse import ERROR_SCHEMA, ReadOutput
from s3events.ingest.files.transform import (
    Transform,
    TransformFailed,
    isolate,
    quiet_spark_errors,
)
from s3events.ingest.model import Batch
from s3events.ingest.target import TargetSpec

log = logging.getLogger(__name__)


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
    scratch = f"{target.path.rstrip('/')}/{STAGING_DIR}/src-{uuid.uuid4().hex}"
    as_src = replace(target, path=scratch, mode="append", partition_by=(), record_key=(), ordering_field=None)
    read = run_batch(spark, batch, as_src, existing_schema=None, aws=aws, ingested_at=ingested_at)
    try:
        job = _Job(transform, target, read, scratch, existing_schema, aws, ingested_at)
        with quiet_spark_errors():
            results, failed = isolate(_sources(batch, read), job.run, key=transform.spec.key)
        written = [f for files, _ in results for f in files]
        merged = [table for _, tables in results for table in tables]
        return job.output(written, merged, failed)
    finally:
        remove_data_files(scratch, read.files, aws)


def _sources(batch: Batch, read: ReadOutput) -> list[str]:
    """The source files the batch's `src` holds rows of (a file that failed to parse has none)."""
    return sorted({f.uri for f in batch.files} - set(read.failed_files))


@dataclass
class _Job:
    transform: Transform
    target: TargetSpec
    read: ReadOutput
    scratch: str
    existing: pa.Schema | None
    aws: AwsOptions
    ingested_at: datetime
    schema: pa.Schema | None = None  # the target's schema after this batch
    filtered: int = 0

    def run(self, files: list[str]) -> tuple[list[WrittenFile], list[pa.Table]]:
        src = self._src().where(F.col("_source_file").isin(files))
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
        if self.target.mode == "merge":
            latest = post_parse.latest_per_key(shaped, self.target)
            return [], [staged_rows(latest, self.target, self.aws).cast(schema)]
        size = sum(f.size for f in self.read.files)
        written = write_rows(shaped, self.target, schema, self.aws, size)
        self.filtered += self._removed(src, out)
        return written, []

    def _src(self) -> DataFrame:
        """The scratch files' rows as a DataFrame of the transform's session, read by the executors."""
        session = self.transform.session
        files = written_files_batch(self.read.files)
        listing = session.createDataFrame(
            pa.Table.from_batches([files]) if files.num_rows else [], schema=from_arrow_schema(files.schema)
        )
        read = partial(_read_scratch, table_uri=self.scratch, aws=self.aws, schema=self.read.schema)
        tasks = max(1, min(len(self.read.files), session.sparkContext.defaultParallelism * 2))
        return listing.repartition(tasks).mapInArrow(read, from_arrow_schema(self.read.schema))

    def _removed(self, src: DataFrame, out: DataFrame) -> int:
        """Input rows no output row came from (one more Spark job, for a plan that can remove rows)."""
        if not self.transform.removes_rows:
            return 0
        keys = ["_source_file", "_source_line"]
        return int(src.select(*keys).join(out.select(*keys).distinct(), keys, "left_anti").count())

    def output(
        self, written: list[WrittenFile], merged: list[pa.Table], failed: dict[str, str]
    ) -> ReadOutput:
        schema = self.schema or self._schema_only()
        errors = pa.concat_tables([self.read.errors, _error_rows(failed, self.ingested_at)])
        out = ReadOutput(schema=schema, errors=errors, failed_files={**self.read.failed_files, **failed})
        out.fast_path_files, out.filtered = self.read.fast_path_files, self.filtered
        if self.target.mode == "merge":
            rows = pa.concat_tables(merged) if merged else schema.empty_table()
            rows = latest_rows.latest(rows, self.target.record_key, self.target.ordering_field)
            out.merge, out.rows = MergeInput.held(rows), rows.num_rows
        else:
            out.files, out.rows = written, sum(f.num_records for f in written)
        return out

    def _schema_only(self) -> pa.Schema:
        """The target's schema after a batch none of whose rows were written (no Spark job)."""
        out = self.transform.frame_of(self._src().limit(0))
        shaped = post_parse.finish_rows(out, ingested_at=self.ingested_at, existing=self.existing)
        return arrow_schema(shaped.schema)


def _read_scratch(
    batches: Iterator[pa.RecordBatch], *, table_uri: str, aws: AwsOptions, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        files = [from_row(row) for row in batch.to_pylist()]
        for table in read_data_files(table_uri, files, aws, schema=schema):
            yield from _conformed(table, schema).to_batches()


def _conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A scratch file's rows under the batch's `src` schema: a column its file lacks is null."""
    columns = [
        table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _error_rows(failed: dict[str, str], ingested_at: datetime) -> pa.Table:
    """One whole-file error row per file the transform failed for."""
    return pa.Table.from_pylist(
        [
            {"_source_file": uri, "error": f"transform: {why}", "_ingested_at": ingested_at}
            for uri, why in sorted(failed.items())
        ],
        schema=ERROR_SCHEMA,
    )
