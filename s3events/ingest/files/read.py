"""The data-parallel half of an ingest batch, on Spark: read the files, parse, split good from bad, and
write Parquet on the executors. The driver then commits what the executors wrote (delta-rs).

Executors reach S3 through boto3 (object_reader) because Spark here has no S3A; they never touch delta-rs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

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
from s3events.ingest.files import latest_rows
from s3events.ingest.files.fast_csv import MAX_CSV_COLUMNS, csv_fields, too_wide
from s3events.ingest.files.fast_path import describe, fast_parser, run_fast
from s3events.ingest.files.frames import FilesFrame, collected, files_frame
from s3events.ingest.files.merge_input import MergeInput, conform
from s3events.ingest.files.objects import (
    INGESTED_AT,
    LINE_SCHEMA,
    LINEAGE_FIELDS,
    ObjectReadError,
    read_lines,
    read_parquet,
)
from s3events.ingest.model import Batch, FileRef
from s3events.ingest.target import TargetSpec, key_path_pattern
from s3events.ingest.target_table import ERROR_SCHEMA

LINEAGE = [f.name for f in LINEAGE_FIELDS]
CORRUPT = "_corrupt_record"
_READ_ERROR = "__s3events_read_error"  # Parquet read rows: why a file broke (a name no data column takes)
_TS = pa.timestamp("us", tz="UTC")

log = logging.getLogger(__name__)
_TARGET_FILE_BYTES = 256 << 20  # aim for output files of about this size
_MIN_SHARED_BYTES = 32 << 20  # below this per core, one task writes (no tiny files for small batches)


@dataclass
class ReadOutput:
    schema: pa.Schema  # the target's full schema after this batch (data + lineage + partition columns)
    errors: pa.Table  # ERROR_SCHEMA rows
    rows: int = 0
    files: list[WrittenFile] = field(default_factory=list)  # append mode: data files the executors wrote
    merge: MergeInput | None = None  # merge mode: the batch's latest row per record key
    failed_files: dict[str, str] = field(default_factory=dict)  # whole-file problems: uri -> reason
    fast_path_files: int = 0  # input files the fast path read (the others took the line path)


def run_batch(
    spark: SparkSession,
    batch: Batch,
    target: TargetSpec,
    *,
    existing_schema: pa.Schema | None,
    aws: AwsOptions,
    ingested_at: datetime,
) -> ReadOutput:
    existing = _arrow_schema(from_arrow_schema(existing_schema)) if existing_schema is not None else None
    declared = _declared(target)
    parser = fast_parser(target, _arrow_schema(declared) if declared is not None else None, existing)
    if parser is None:
        return _run_on_spark(spark, batch.files, target, existing, aws, ingested_at)
    fast = run_fast(
        spark,
        batch.files,
        target,
        parser=parser,
        existing=existing,
        aws=aws,
        ingested_at=ingested_at,
    )
    if not fast.rest:
        assert fast.schema is not None
        return ReadOutput(
            fast.schema,
            ERROR_SCHEMA.empty_table(),
            fast.rows,
            fast.files,
            merge=fast.merge,
            fast_path_files=len(batch.files),
        )
    log.info("target %s: %s", target.name, describe(fast))
    took_fast = bool(fast.files) or (fast.merge is not None and fast.merge.num_rows > 0)
    out = _run_on_spark(spark, fast.rest, target, fast.schema if took_fast else existing, aws, ingested_at)
    out.files = [*fast.files, *out.files]
    out.rows += fast.rows
    if fast.merge is not None and out.merge is not None:  # both paths' rows: one latest per key
        both = pa.concat_tables([conform(fast.merge.take_rows(), out.schema), out.merge.take_rows()])
        out.merge = MergeInput.held(latest_rows.latest(both, target.record_key, target.ordering_field))
        out.rows = out.merge.num_rows
    out.fast_path_files = len(batch.files) - len(fast.rest)
    return out


def _run_on_spark(
    spark: SparkSession,
    files: tuple[FileRef, ...],
    target: TargetSpec,
    existing_schema: pa.Schema | None,
    aws: AwsOptions,
    ingested_at: datetime,
) -> ReadOutput:
    """The general path: every format, every line through Spark (from_json / from_csv / text)."""
    frame = files_frame(spark, files)
    cached: list[DataFrame] = []  # read once, used by inference, errors and the write: unpersisted below
    if target.format == "parquet":
        good, bad = _read_parquet(spark, frame, aws, existing_schema, cached)
    else:
        lines = frame.map(partial(_read_lines_partition, aws=aws), from_arrow_schema(LINE_SCHEMA))
        cached.append(lines.persist(StorageLevel.MEMORY_AND_DISK))
        good, bad = _parse_lines(spark, cached[0], target, existing_schema, cached)
    try:
        good = _with_key_partitions(good, target.partition_by)
        good = good.withColumn(INGESTED_AT, F.lit(ingested_at).cast("timestamp"))
        good = _align(good, existing_schema)
        schema = _arrow_schema(good.schema)
        errors = (
            bad.withColumn(INGESTED_AT, F.lit(ingested_at).cast("timestamp"))
            .select(*[f.name for f in ERROR_SCHEMA])
            .toArrow()
        )
        errors = errors.cast(ERROR_SCHEMA)
        failed = {
            r["_source_file"]: r["error"]
            for r in errors.filter(pc.is_null(errors["_source_line"]))
            .select(["_source_file", "error"])
            .to_pylist()
        }
        out = ReadOutput(schema=schema, errors=errors, failed_files=failed)
        if target.mode == "merge":
            out.merge = MergeInput.held(_staged_rows(_latest_per_key(good, target), target, aws).cast(schema))
            out.rows = out.merge.num_rows
        else:
            out.files = _write(good, target, schema, aws, sum(f.size or 0 for f in files))
            out.rows = sum(f.num_records for f in out.files)
        return out
    finally:
        for persisted in cached:
            persisted.unpersist()


def _read_lines_partition(refs: Iterator[FileRef], *, aws: AwsOptions) -> Iterator[pa.RecordBatch]:
    for ref in refs:
        yield from read_lines(ref, aws)


# -- text formats -------------------------------------------------------------------------------------


def _parse_lines(
    spark: SparkSession,
    lines: DataFrame,
    target: TargetSpec,
    existing: pa.Schema | None,
    cached: list[DataFrame],
) -> tuple[DataFrame, DataFrame]:
    options = dict(target.reader_options or {})
    read_errors = lines.where(F.col("_error").isNotNull()).select(
        *LINEAGE, F.col("value").alias("raw"), F.col("_error").alias("error")
    )
    # All or nothing per file: a file that broke mid-stream (corrupt gzip, ...) contributes no rows.
    broken = lines.where(F.col("_error").isNotNull() & F.col("_source_line").isNull()).select("_source_file")
    ok = lines.where(F.col("_error").isNull()).join(
        F.broadcast(broken.distinct()), "_source_file", "left_anti"
    )
    if target.format == "text":
        return ok.select(*LINEAGE, "value"), read_errors
    # Blank lines carry no record in JSON lines or CSV: skipped, not errors.
    ok = ok.where(F.trim(F.col("value")) != "")
    if target.format == "csv":
        good, bad = _parse_csv(spark, ok, target, options, existing, cached)
        return good, read_errors.unionByName(bad)
    schema = _json_schema(spark, target, ok, options, existing)
    parsed = ok.withColumn("p", F.from_json("value", _with_corrupt(schema), _permissive(options)))
    good, bad = _split_parsed(parsed, schema, _json_invalid_reason(schema, options), cached)
    return good, read_errors.unionByName(bad)


# A control character (U+0000 to U+001F) left unescaped inside a JSON string, group 1 (Java and Python
# regex alike): the strings before it are skipped whole, so a tab between tokens does not match.
RAW_CONTROL_IN_STRING = (
    r'(?s)^[^"]*+(?:"(?:[^"\\\x00-\x1f]|\\.)*+"[^"]*+)*+"(?:[^"\\\x00-\x1f]|\\.)*+([\x00-\x1f])'
)


def _json_invalid_reason(schema: T.StructType, options: dict[str, str]) -> Column:
    """Why from_json refused a line. get_json_object tells invalid JSON apart, but it lets a raw control
    character in a string through (Spark's Hive-compatible parser) where from_json refuses it (unless
    allowUnquotedControlChars): such a line is invalid JSON, not a type conflict."""
    reason = F.when(F.get_json_object("value", "$").isNull(), F.lit("not valid JSON"))
    lenient = {k.lower(): v for k, v in options.items()}.get("allowunquotedcontrolchars", "false")
    if lenient.strip().lower() != "true":
        char = F.regexp_extract("value", RAW_CONTROL_IN_STRING, 1)
        reason = reason.when(
            char != "",
            F.format_string(
                "not valid JSON: an unescaped control character U+%04X in a string at column %d "
                "(JSON needs it escaped, as \\u%04x)",
                F.ascii(char),
                F.length(F.regexp_extract("value", RAW_CONTROL_IN_STRING, 0)),
                F.ascii(char),
            ),
        )
    return reason.when(~F.trim("value").startswith("{"), F.lit("not a JSON object")).otherwise(
        F.lit(f"does not match the target schema {_ddl(schema)} (type conflict)")
    )


def _parse_csv(
    spark: SparkSession,
    ok: DataFrame,
    target: TargetSpec,
    options: dict[str, str],
    existing: pa.Schema | None,
    cached: list[DataFrame],
) -> tuple[DataFrame, DataFrame]:
    """CSV lines into rows. from_csv maps fields by position, so each file is parsed by its own header:
    files of one batch whose headers differ (the same columns in another order, or other columns) are
    parsed a group per distinct header, the groups' rows joined by column name."""
    if options.pop("header", "true").lower() != "true":
        return _parse_csv_group(spark, ok, None, target, options, existing, cached)
    headers = ok.where(F.col("_source_line") == 1)
    ok = ok.where(F.col("_source_line") != 1)
    distinct = [row["value"] for row in collected(headers.select("value").distinct())]
    sep, quote = options.get("sep", options.get("delimiter", ",")), options.get("quote", '"')
    wide = {line: n for line in distinct if (n := csv_fields(line, sep, quote)) > MAX_CSV_COLUMNS}
    if wide:  # Spark's parser fails the whole job on such a line: these files become one error row each
        why = [(h, too_wide(n)) for h, n in wide.items()]
        reasons = spark.createDataFrame(why, "value string, error string")
        rejected = headers.join(F.broadcast(reasons), "value").select(
            *[F.lit(None).cast("long").alias(c) if c == "_source_line" else F.col(c) for c in LINEAGE],
            F.lit(None).cast("string").alias("raw"),
            "error",
        )
        files = F.broadcast(rejected.select("_source_file"))
        ok = ok.join(files, "_source_file", "left_anti")
        headers = headers.join(files, "_source_file", "left_anti")
        narrow = [h for h in distinct if h not in wide]
        good, bad = _parse_csv_headers(spark, ok, headers, narrow, target, options, existing, cached)
        return good, bad.unionByName(rejected)
    return _parse_csv_headers(spark, ok, headers, distinct, target, options, existing, cached)


def _parse_csv_headers(
    spark: SparkSession,
    ok: DataFrame,
    headers: DataFrame,
    distinct: list[str],
    target: TargetSpec,
    options: dict[str, str],
    existing: pa.Schema | None,
    cached: list[DataFrame],
) -> tuple[DataFrame, DataFrame]:
    if len(distinct) <= 1:
        return _parse_csv_group(spark, ok, headers, target, options, existing, cached)
    goods, bads = [], []
    known = existing
    for line in sorted(distinct):
        group_headers = headers.where(F.col("value") == F.lit(line))
        group = ok.join(F.broadcast(group_headers.select("_source_file")), "_source_file", "left_semi")
        good, bad = _parse_csv_group(spark, group, group_headers, target, options, known, cached)
        goods.append(good)
        bads.append(bad)
        known = _with_new_columns(known, good)  # later groups keep the types earlier ones gave
    good = goods[0]
    for other in goods[1:]:
        good = good.unionByName(other, allowMissingColumns=True)
    bad = bads[0]
    for other in bads[1:]:
        bad = bad.unionByName(other)
    return good, bad


def _parse_csv_group(
    spark: SparkSession,
    ok: DataFrame,
    headers: DataFrame | None,
    target: TargetSpec,
    options: dict[str, str],
    existing: pa.Schema | None,
    cached: list[DataFrame],
) -> tuple[DataFrame, DataFrame]:
    schema = _csv_schema(spark, target, headers, ok, options, existing)
    parsed = ok.withColumn("p", F.from_csv("value", _ddl(_with_corrupt(schema)), _permissive(options)))
    return _split_parsed(parsed, schema, F.lit(f"does not match the CSV schema {_ddl(schema)}"), cached)


def _with_new_columns(existing: pa.Schema | None, rows: DataFrame) -> pa.Schema:
    """`existing` plus the data columns of `rows` it lacks (lineage columns are the writer's)."""
    known = list(existing) if existing is not None else []
    names = {f.name for f in known}
    added = T.StructType([f for f in rows.schema.fields if f.name not in names and f.name not in LINEAGE])
    return pa.schema([*known, *to_arrow_schema(added)])


def _split_parsed(
    parsed: DataFrame, schema: T.StructType, invalid_reason: Column, cached: list[DataFrame]
) -> tuple[DataFrame, DataFrame]:
    """(good rows, error rows) of parsed lines."""
    parsed = parsed.persist(StorageLevel.MEMORY_AND_DISK)  # parse once for the error rows and the write
    cached.append(parsed)
    is_bad = F.col("p").isNull() | F.col(f"p.{CORRUPT}").isNotNull()
    bad = parsed.where(is_bad).select(*LINEAGE, F.col("value").alias("raw"), invalid_reason.alias("error"))
    good = parsed.where(~is_bad).select(*LINEAGE, *[F.col(f"p.`{f.name}`").alias(f.name) for f in schema])
    return good, bad


def _permissive(options: dict[str, str]) -> dict[str, str]:
    return {**options, "mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}


def _with_corrupt(schema: T.StructType) -> T.StructType:
    return T.StructType([*schema.fields, T.StructField(CORRUPT, T.StringType())])


def _ddl(schema: T.StructType) -> str:
    return ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)


def _declared(target: TargetSpec) -> T.StructType | None:
    if not target.schema_ddl:
        return None
    parsed = T.StructType.fromDDL(target.schema_ddl)
    return parsed if isinstance(parsed, T.StructType) else T.StructType([T.StructField("value", parsed)])


def _json_schema(
    spark: SparkSession,
    target: TargetSpec,
    ok: DataFrame,
    options: dict[str, str],
    existing: pa.Schema | None,
) -> T.StructType:
    declared = _declared(target)
    if declared is not None:
        return declared
    inferred = spark.read.options(**options).json(ok.select("value")).schema  # stays in the JVM
    return _evolve(existing, inferred)


def _csv_schema(
    spark: SparkSession,
    target: TargetSpec,
    headers: DataFrame | None,
    ok: DataFrame,
    options: dict[str, str],
    existing: pa.Schema | None,
) -> T.StructType:
    declared = _declared(target)
    if declared is not None:
        return declared
    if headers is None:
        raise ValueError(
            f"target {target.name}: csv without a header needs s3events.ingest.target.<name>.schema"
        )
    first = headers.select("value").limit(1)
    if first.isEmpty():
        return _evolve(existing, T.StructType([]))
    # Stays in the JVM: the header line first (Spark takes a Dataset's first line as the header), then
    # the data lines of every file.
    sample = first.union(ok.select("value"))
    inferred = (
        spark.read.options(**options).option("header", True).option("inferSchema", True).csv(sample).schema
    )
    if existing is None:
        return _evolve(existing, inferred)
    # from_csv maps fields by position: the schema is the header's columns, in its order, those the table
    # has keeping its type (the table's other columns, e.g. partition values from the key path, are not
    # in the lines: they are added after parsing).
    table = {f.name: f for f in from_arrow_schema(existing).fields}
    skip = {*LINEAGE, INGESTED_AT, CORRUPT}
    return T.StructType([table.get(f.name, f) for f in inferred.fields if f.name not in skip])


def _evolve(existing: pa.Schema | None, inferred: T.StructType) -> T.StructType:
    """Existing columns keep their type (a conflicting value becomes an error row); new ones are added."""
    skip = {*LINEAGE, INGESTED_AT}
    fields = [f for f in inferred.fields if f.name != CORRUPT and f.name not in skip]
    if existing is None:
        return T.StructType(fields)
    known = from_arrow_schema(existing)
    kept = [f for f in known.fields if f.name not in skip]
    names = {f.name for f in kept} | skip
    return T.StructType(
        kept + [T.StructField(f.name, f.dataType, True) for f in fields if f.name not in names]
    )


# -- parquet ------------------------------------------------------------------------------------------


def _read_parquet(
    spark: SparkSession,
    files: FilesFrame,
    aws: AwsOptions,
    existing: pa.Schema | None,
    cached: list[DataFrame],
) -> tuple[DataFrame, DataFrame]:
    probed = files.map(
        partial(_parquet_schema_partition, aws=aws), "uri string, etag string, schema binary, error string"
    )
    rows = collected(probed)
    schemas = [pa.ipc.read_schema(pa.py_buffer(r["schema"])) for r in rows if r["schema"] is not None]
    errors = [(r["uri"], r["etag"], r["error"]) for r in rows if r["error"] is not None]
    unified = pa.unify_schemas(schemas, promote_options="permissive") if schemas else pa.schema([])
    data_schema = _evolve(existing, from_arrow_schema(unified))
    read_schema = pa.schema(
        [
            *[pa.field(n, LINE_SCHEMA.field(n).type) for n in LINEAGE],
            *to_arrow_schema(data_schema, timezone="UTC"),
            pa.field(_READ_ERROR, pa.string()),  # a file that broke after the probe: one row saying why
        ]
    )
    probed_bad = frozenset(uri for uri, _, _ in errors)
    read = files.map(
        partial(_read_parquet_partition, aws=aws, schema=read_schema, probed_bad=probed_bad),
        from_arrow_schema(read_schema),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    cached.append(read)  # read once: the rows and the broken files both come from it
    broken = read.where(F.col(_READ_ERROR).isNotNull())
    # All or nothing per file, as for text: a file with a corrupt later row group contributes no rows.
    good = (
        read.where(F.col(_READ_ERROR).isNull())
        .join(F.broadcast(broken.select("_source_file").distinct()), "_source_file", "left_anti")
        .drop(_READ_ERROR)
    )
    bad_schema = from_arrow_schema(pa.schema([f for f in ERROR_SCHEMA if f.name != INGESTED_AT]))
    bad = spark.createDataFrame(
        [(uri, etag, None, None, error, None) for uri, etag, error in errors], bad_schema
    ).unionByName(
        broken.select(
            "_source_file",
            "_source_etag",
            F.lit(None).cast("long").alias("_source_line"),
            F.lit(None).cast("string").alias("raw"),
            F.col(_READ_ERROR).alias("error"),
            "_event_time",
        )
    )
    return good, bad


def _parquet_schema_partition(refs: Iterator[FileRef], *, aws: AwsOptions) -> Iterator[pa.RecordBatch]:
    out: list[dict[str, Any]] = []
    for ref in refs:
        try:
            first = next(read_parquet(ref, aws, batch_rows=1), None)
            schema = first.schema if first is not None else None
            payload = schema.serialize().to_pybytes() if schema is not None else None
            out.append({"uri": ref.uri, "etag": ref.etag, "schema": payload, "error": None})
        except ObjectReadError as exc:
            out.append({"uri": ref.uri, "etag": ref.etag, "schema": None, "error": exc.reason})
    yield pa.RecordBatch.from_pylist(
        out,
        schema=pa.schema(
            [("uri", pa.string()), ("etag", pa.string()), ("schema", pa.binary()), ("error", pa.string())]
        ),
    )


def _read_parquet_partition(
    refs: Iterator[FileRef], *, aws: AwsOptions, schema: pa.Schema, probed_bad: frozenset[str]
) -> Iterator[pa.RecordBatch]:
    for ref in refs:
        if ref.uri in probed_bad:
            continue  # its error row comes from the probe
        try:
            for record_batch in read_parquet(ref, aws):
                columns = [
                    record_batch.column(f.name).cast(f.type, safe=False)
                    if f.name in record_batch.schema.names
                    else pa.nulls(record_batch.num_rows, f.type)
                    for f in schema
                ]
                yield pa.RecordBatch.from_arrays(columns, schema=schema)
        except ObjectReadError as exc:  # after the probe read its first rows: a corrupt later row group
            marker = {
                "_source_file": ref.uri,
                "_source_etag": ref.etag,
                "_event_time": ref.event_time,
                _READ_ERROR: exc.reason,
            }
            yield pa.RecordBatch.from_pylist([marker], schema=schema)


# -- shaping and writing --------------------------------------------------------------------------------


def _with_key_partitions(df: DataFrame, partition_by: tuple[str, ...]) -> DataFrame:
    """Partition columns are filled from the key path (`.../dt=2026-11-22/...`) where records lack them."""
    types = dict(df.dtypes)
    for name in partition_by:
        value = F.regexp_extract("_source_file", key_path_pattern(name), 1)
        from_key = F.when(value == "", F.lit(None)).otherwise(value)
        if name not in types:
            df = df.withColumn(name, from_key)
        elif types[name] == "string":  # a column the table already has, absent from these records
            df = df.withColumn(name, F.coalesce(F.col(f"`{name}`"), from_key))
    return df


def _align(df: DataFrame, existing: pa.Schema | None) -> DataFrame:
    """Existing columns first, in table order (absent ones as typed nulls), then new ones."""
    if existing is None:
        return df
    known = from_arrow_schema(existing)
    columns = [
        F.col(f"`{f.name}`") if f.name in df.columns else F.lit(None).cast(f.dataType).alias(f.name)
        for f in known.fields
    ]
    extra = [F.col(f"`{c}`") for c in df.columns if c not in existing.names]
    return df.select(*columns, *extra)


def _arrow_schema(schema: T.StructType) -> pa.Schema:
    arrow = to_arrow_schema(schema, timezone="UTC")
    return pa.schema([f.with_nullable(True) for f in arrow])


def _latest_per_key(df: DataFrame, target: TargetSpec) -> DataFrame:
    from pyspark.sql.window import Window

    order = [F.col("_event_time").desc(), F.col("_source_file").desc(), F.col("_source_line").desc()]
    if target.ordering_field:
        order.insert(0, F.col(f"`{target.ordering_field}`").desc_nulls_last())
    window = Window.partitionBy(*[F.col(f"`{k}`") for k in target.record_key]).orderBy(*order)
    return df.withColumn("_rank", F.row_number().over(window)).where(F.col("_rank") == 1).drop("_rank")


def _staged_rows(df: DataFrame, target: TargetSpec, aws: AwsOptions) -> pa.Table:
    """`df` in the driver, each partition handed over through the target's staging directory: collected,
    a merge batch's rows would all be in the driver's JVM at once (a million rows outgrew its 1 GiB)."""
    stage = partial(_stage_partition, table_uri=target.path, aws=aws)
    staged = [r["staged"] for r in collected(df.mapInArrow(stage, "staged string"))]
    tables = take_staged(target.path, staged, aws)
    schema = _arrow_schema(df.schema)
    return pa.concat_tables([t.cast(schema) for t in tables]) if tables else schema.empty_table()


def _stage_partition(
    batches: Iterator[pa.RecordBatch], *, table_uri: str, aws: AwsOptions
) -> Iterator[pa.RecordBatch]:
    received = [batch for batch in batches if batch.num_rows]
    if received:
        staged = stage_table(pa.Table.from_batches(received), table_uri=table_uri, options=aws)
        yield pa.record_batch({"staged": [staged]})


def _write(
    df: DataFrame, target: TargetSpec, schema: pa.Schema, aws: AwsOptions, total_bytes: int
) -> list[WrittenFile]:
    if target.partition_by:
        df = df.repartition(*[F.col(f"`{p}`") for p in target.partition_by])
    else:
        # Files of about _TARGET_FILE_BYTES, but every core busy once there is enough to share.
        cores = df.sparkSession.sparkContext.defaultParallelism
        shared = min(cores, math.ceil(total_bytes / _MIN_SHARED_BYTES))
        df = df.coalesce(max(1, shared, math.ceil(total_bytes / _TARGET_FILE_BYTES)))
    written = df.mapInArrow(
        partial(
            _write_partition, table_uri=target.path, schema=schema, aws=aws, partition_by=target.partition_by
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
) -> Iterator[pa.RecordBatch]:
    received = list(batches)
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
