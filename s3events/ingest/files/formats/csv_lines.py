"""CSV on the line path: each non-blank line parsed by Spark's from_csv against one schema, a group per
distinct header (`csv_format` is the fast path's parser and states the rules both follow)."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from s3events.ingest.files import line_parse, rescue_rows
from s3events.ingest.files.formats.csv_fields import MAX_CSV_COLUMNS, csv_fields, too_wide
from s3events.ingest.files.frames import collected, without_files
from s3events.ingest.files.line_parse import (
    CORRUPT,
    ddl,
    declared_schema,
    evolve,
    permissive,
    split_parsed,
    typed_inferred,
    with_corrupt,
)
from s3events.ingest.files.lineage import INGESTED_AT, LINEAGE
from s3events.ingest.target import TargetSpec


def parse_lines(
    spark: SparkSession,
    ok: DataFrame,
    target: TargetSpec,
    options: dict[str, str],
    existing: pa.Schema | None,
    cached: list[DataFrame],
) -> tuple[DataFrame, DataFrame]:
    """(rows, error rows) of non-blank CSV lines. from_csv maps fields by position, so each file is
    parsed by its own header: files of one batch whose headers differ (the same columns in another
    order, or other columns) are parsed a group per distinct header, the groups' rows joined by name."""
    if options.pop("header", "true").lower() != "true":
        return _parse_group(spark, ok, None, target, options, existing, cached, table=existing, header=None)
    headers = ok.where(F.col("_source_line") == 1)
    ok = ok.where(F.col("_source_line") != 1)
    # Each file's header on the driver (a line per file): the groups below are filters by file name, not
    # joins, whose broadcasts would run again in every later action.
    files_of: dict[str, list[str]] = {}
    for row in collected(headers.select("value", "_source_file")):
        files_of.setdefault(row["value"], []).append(row["_source_file"])
    sep, quote = options.get("sep", options.get("delimiter", ",")), options.get("quote", '"')
    wide = {line: n for line in files_of if (n := csv_fields(line, sep, quote)) > MAX_CSV_COLUMNS}
    if wide:  # Spark's parser fails the whole job on such a line: these files become one error row each
        why = [(h, too_wide(n)) for h, n in wide.items()]
        reasons = spark.createDataFrame(why, "value string, error string")
        rejected = headers.join(F.broadcast(reasons), "value").select(
            *[F.lit(None).cast("long").alias(c) if c == "_source_line" else F.col(c) for c in LINEAGE],
            F.lit(None).cast("string").alias("raw"),
            "error",
        )
        gone = sorted(uri for line in wide for uri in files_of.pop(line))
        ok, headers = without_files(ok, gone), without_files(headers, gone)
        good, bad = _parse_headers(spark, ok, headers, files_of, target, options, existing, cached)
        return good, bad.unionByName(rejected)
    return _parse_headers(spark, ok, headers, files_of, target, options, existing, cached)


def _parse_headers(
    spark: SparkSession,
    ok: DataFrame,
    headers: DataFrame,
    files_of: dict[str, list[str]],  # header line -> the files it heads
    target: TargetSpec,
    options: dict[str, str],
    existing: pa.Schema | None,
    cached: list[DataFrame],
) -> tuple[DataFrame, DataFrame]:
    if len(files_of) <= 1:
        only = next(iter(files_of), None)
        return _parse_group(
            spark, ok, headers, target, options, existing, cached, table=existing, header=only
        )
    goods, bads = [], []
    known = existing
    for line in sorted(files_of):
        group_headers = headers.where(F.col("value") == F.lit(line))
        group = ok.where(F.col("_source_file").isin(files_of[line]))
        good, bad = _parse_group(
            spark, group, group_headers, target, options, known, cached, table=existing, header=line
        )
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


def _parse_group(
    spark: SparkSession,
    ok: DataFrame,
    headers: DataFrame | None,
    target: TargetSpec,
    options: dict[str, str],
    existing: pa.Schema | None,
    cached: list[DataFrame],
    *,
    table: pa.Schema | None,  # the table's schema (`existing` adds earlier header groups' columns)
    header: str | None,  # the group's header line (None: no file has one)
) -> tuple[DataFrame, DataFrame]:
    schema = _line_schema(spark, target, headers is not None, header, ok, options, existing)
    if headers is not None and (refused := line_parse.refused_files(ok, headers, schema, existing)):
        return refused
    fields: tuple[str, ...] = ()
    if target.rescued_column is not None:
        rescuing = rescue_rows.rescues_csv_fields(target, table)
        schema, fields = rescue_rows.csv_rescue_schema(schema, table, target.rescued_column, rescuing)
    parsed = ok.withColumn("p", F.from_csv("value", ddl(with_corrupt(schema)), permissive(options)))
    reason = F.lit(f"does not match the CSV schema {ddl(schema)}")
    if target.rescued_column is None:
        return split_parsed(parsed, schema, reason, cached)
    one = lambda s: F.from_csv("value", ddl(s), permissive(options))  # noqa: E731
    name = target.rescued_column
    return rescue_rows.split_csv(parsed, schema, reason, one, cached, name=name, rescued=fields)


def _with_new_columns(existing: pa.Schema | None, rows: DataFrame) -> pa.Schema:
    """`existing` plus the data columns of `rows` it lacks (lineage columns are the writer's)."""
    known = list(existing) if existing is not None else []
    names = {f.name for f in known}
    added = T.StructType([f for f in rows.schema.fields if f.name not in names and f.name not in LINEAGE])
    return pa.schema([*known, *to_arrow_schema(added)])


def _line_schema(
    spark: SparkSession,
    target: TargetSpec,
    has_header: bool,
    header: str | None,
    ok: DataFrame,
    options: dict[str, str],
    existing: pa.Schema | None,
) -> T.StructType:
    declared = declared_schema(target)
    if declared is not None:
        return declared
    if not has_header:
        raise ValueError(
            f"target {target.name}: csv without a header needs s3events.ingest.target.<name>.schema"
        )
    if header is None:
        return evolve(existing, T.StructType([]))
    # The header line first (Spark takes a Dataset's first line as the header), then the data lines of
    # every file, which stay in the JVM.
    sample = spark.createDataFrame([(header,)], "value string").union(ok.select("value"))
    inferred = (
        spark.read.options(**options)
        .option("header", True)
        .option("inferSchema", target.infer_types)
        .csv(sample)
        .schema
    )
    if existing is None:
        return typed_inferred(target, evolve(existing, inferred), existing)
    # from_csv maps fields by position: the schema is the header's columns, in its order, those the table
    # has keeping its type (the table's other columns, e.g. partition values from the key path, are not
    # in the lines: they are added after parsing).
    table = {f.name: f for f in from_arrow_schema(existing).fields}
    skip = {*LINEAGE, INGESTED_AT, CORRUPT}
    columns = T.StructType([table.get(f.name, f) for f in inferred.fields if f.name not in skip])
    return typed_inferred(target, columns, existing)
