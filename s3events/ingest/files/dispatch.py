"""Step 2 of an ingest batch: which path reads each file. A format's fast parser (`formats/`) takes the
files it can read exactly; the line path (`line_path`) reads the rest, in the same batch. Both hand
their rows through the post-parse stage (`post_parse`), so the target cannot tell which path read a file.
The driver then commits what the executors wrote (delta-rs).

Executors reach S3 through boto3 (`objects`) because Spark here has no S3A; they never touch delta-rs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from functools import partial

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from s3events.errors import S3EventsError
from s3events.infra.aws import AwsOptions, delta_storage_options
from s3events.infra.parquet_files import remove_data_files
from s3events.ingest import refusal
from s3events.ingest.files import post_parse, rescue
from s3events.ingest.files.fast_path import FastResult, describe, last_columns, run_fast, split_schema
from s3events.ingest.files.formats import (
    avro_format,
    csv_format,
    orc_format,
    parquet_format,
    records_fast,
    text_format,
    whole_fast,
)
from s3events.ingest.files.formats.base import FileParser, SinglePathParser
from s3events.ingest.files.line_parse import arrow_schema, declared_schema
from s3events.ingest.files.line_path import run_line_path
from s3events.ingest.files.lineage import FIXED
from s3events.ingest.files.merge_input import MergeInput, conform
from s3events.ingest.files.post_parse import ERROR_SCHEMA
from s3events.ingest.files.read_output import ReadOutput
from s3events.ingest.files.schema_contract import NewFieldRefused, new_fields, refused
from s3events.ingest.model import Batch, FileRef
from s3events.ingest.target import TargetSpec

log = logging.getLogger(__name__)

# format -> its fast parser for a target (given the declared schema and the table's), or None
_FAST_PARSERS: dict[str, Callable[..., FileParser | None]] = {
    "json": records_fast.json_fast_parser,  # JSON lines, or multiLine=true's documents
    "csv": csv_format.fast_parser,
    "text": text_format.fast_parser,
    "parquet": parquet_format.fast_parser,
    "avro": avro_format.fast_parser,
    "orc": orc_format.fast_parser,
    "binary": whole_fast.binary_fast_parser,
    "xml": records_fast.xml_fast_parser,
}

__all__ = ["ReadOutput", "fast_parser", "run_batch"]


def fast_parser(
    target: TargetSpec, declared: pa.Schema | None, existing: pa.Schema | None
) -> FileParser | None:
    """The parser of the target's format with the data columns whose types are fixed (the declared
    schema, or the table's), or None when the batch cannot take the fast path (`<format>.fast.path`;
    a format with one path, `SinglePathParser`, has no such key)."""
    if target.format not in _FAST_PARSERS or not target.fast_path:
        return None
    return _FAST_PARSERS[target.format](target, declared=declared, existing=existing)


def run_batch(
    spark: SparkSession,
    batch: Batch,
    target: TargetSpec,
    *,
    existing_schema: pa.Schema | None,
    aws: AwsOptions,
    ingested_at: datetime,
) -> ReadOutput:
    try:
        return _run_batch(spark, batch, target, existing_schema, aws, ingested_at)
    except NewFieldRefused as exc:  # commits nothing: `status` reads why from the note
        storage = delta_storage_options(aws) if target.path.startswith("s3://") else {}
        refusal.record(target.path, storage, str(exc), batch.start, ingested_at)
        raise


def _run_batch(
    spark: SparkSession,
    batch: Batch,
    target: TargetSpec,
    existing_schema: pa.Schema | None,
    aws: AwsOptions,
    ingested_at: datetime,
) -> ReadOutput:
    existing = arrow_schema(from_arrow_schema(existing_schema)) if existing_schema is not None else None
    declared = declared_schema(target)
    parser = fast_parser(target, arrow_schema(declared) if declared is not None else None, existing)
    if parser is None:
        return _noted(run_line_path(spark, batch.files, target, existing, aws, ingested_at), target)
    read = partial(run_fast, spark, batch.files, target, existing=existing, aws=aws, ingested_at=ingested_at)
    fast = read(parser=parser)
    if fast.rest and isinstance(parser, SinglePathParser):  # no line path: the batch's schema, then again
        log.info(
            "target %s: %s; reading the batch again with its files' schemas", target.name, describe(fast)
        )
        fast = read(parser=parser.for_batch(batch.files, existing, aws))
        if fast.rest:
            raise _unsplit(fast, batch.files, existing, target, parser.first_line)
    if not fast.rest:
        assert fast.schema is not None
        only_fast = ReadOutput(
            fast.schema,
            ERROR_SCHEMA.empty_table(),
            fast.rows,
            fast.files,
            merge=fast.merge,
            fast_path_files=len(batch.files),
            ignored_fields=fast.ignored_fields,
        )
        return _noted(post_parse.with_error_rows(only_fast, fast.errors), target)
    log.info("target %s: %s", target.name, describe(fast))
    out = _declined(spark, fast, target, existing, parser, aws, ingested_at)
    if out is None:  # the halves typed a new column differently: the line path's inference spans the batch
        log.info("target %s: the fast and the declined files type a new column differently", target.name)
        return _noted(run_line_path(spark, batch.files, target, existing, aws, ingested_at), target)
    out.files = [*fast.files, *out.files]
    out.rows += fast.rows
    if fast.merge is not None and out.merge is not None:  # both paths' rows: one latest per key
        out.merge = post_parse.both_paths_latest(fast.merge, out.merge, out.schema, target)
        out.rows = out.merge.num_rows
    out.fast_path_files = len(batch.files) - len(fast.rest)
    out.ignored_fields = tuple(sorted({*out.ignored_fields, *fast.ignored_fields}))
    return _noted(post_parse.with_error_rows(out, fast.errors), target)


def _declined(
    spark: SparkSession,
    fast: FastResult,
    target: TargetSpec,
    existing: pa.Schema | None,
    parser: FileParser,
    aws: AwsOptions,
    ingested_at: datetime,
) -> ReadOutput | None:
    """The line path's read of the files the fast path declined, in the table schema the batch gives.
    Where each file's fields are its own (`schema_from_every_file` false: JSON lines) and the fast files
    add columns, the declined files' new columns are inferred over them alone, and the halves' types
    merged (`fast_path.split_schema`); None, every file written so far removed, when they disagree."""
    took_fast = bool(fast.files) or (fast.merge is not None and fast.merge.num_rows > 0)
    if not took_fast or parser.schema_from_every_file or not _infers_new_columns(fast, target, existing):
        schema = fast.schema if took_fast else existing
        return run_line_path(spark, fast.rest, target, schema, aws, ingested_at)
    out = run_line_path(spark, fast.rest, target, existing, aws, ingested_at)
    merged = split_schema(fast, out.schema, existing, parser.known, last_columns(target))
    if merged is None:
        written = [*fast.files, *out.files, *(fast.merge.files if fast.merge is not None else [])]
        remove_data_files(target.path, written, aws)
        return None
    out.schema = merged
    if out.merge is not None:
        out.merge = MergeInput.held(conform(out.merge.take_rows(), merged))
    return out


def _infers_new_columns(fast: FastResult, target: TargetSpec, existing: pa.Schema | None) -> bool:
    """Whether the line path types the fast files' new columns by inference (no declared schema, no
    columns fixed by `schema.evolution=rescue`)."""
    if fast.schema is None or rescue.columns_fixed(target, existing):
        return False
    table = {*(existing.names if existing is not None else ()), *FIXED, target.rescued_column}
    return any(name not in table for name in fast.schema.names)


def _unsplit(
    fast: FastResult,
    files: tuple[FileRef, ...],
    existing: pa.Schema | None,
    target: TargetSpec,
    first_line: int,
) -> S3EventsError:
    """Why a single-path format's batch cannot be read: schema.evolution=fail's refusal (naming the
    first row of the first file with rows), else the tasks' reason (the batch fails; it is retried)."""
    if fast.schema is not None and target.schema_evolution == "fail":
        new = new_fields(fast.schema.names, existing, target.rescued_column)
        failed = {uri for t in fast.errors for uri in post_parse.whole_file_errors(t)}
        first = min((f.uri for f in files if f.uri not in failed), default=None)
        return refused(target, "the batch" if first is None else f"{first} line {first_line}", new)
    why = next(iter(fast.reasons.values()), "unknown")
    return S3EventsError(f"target {target.name}: the batch cannot be read: {why}")


def _noted(out: ReadOutput, target: TargetSpec) -> ReadOutput:
    out.rescued = rescue.rescued_rows(out, target.rescued_column)
    if out.ignored_fields:
        log.info(
            "target %s: schema.evolution=ignore dropped %d new field(s): %s",
            target.name,
            len(out.ignored_fields),
            ", ".join(out.ignored_fields),
        )
    return out
