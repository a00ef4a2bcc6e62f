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
from s3events.ingest.files.frames import collected
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
        return _parse_group(spark, ok, None, target, options, existing, cached, table=existing)
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
        good, bad = _parse_headers(spark, ok, headers, narrow, target, options, existing, cached)
        return good, bad.unionByName(rejected)
    return _parse_headers(spark, ok, headers, distinct, target, options, existing, cached)


def _parse_headers(
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
        return _parse_group(spark, ok, headers, target, options, existing, cached, table=existing)
    goods, bads = [], []
    known = existing
    for line in sorted(distinct):
        group_headers = headers.where(F.col("value") == F.lit(line))
        group = ok.join(F.broadcast(group_headers.select("_source_file")), "_source_file", "left_semi")
        good, bad = _parse_group(spark, group, group_headers, target, options, known, cached, table=existing)
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
) -> tuple[DataFrame, DataFrame]:
    schema = _line_schema(spark, target, headers, ok, options, existing)
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
    headers: DataFrame | None,
    ok: DataFrame,
    options: dict[str, str],
    existing: pa.Schema | None,
) -> T.StructType:
    declared = declared_schema(target)
    if declared is not None:
        return declared
    if headers is None:
        raise ValueError(
            f"target {target.name}: csv without a header needs s3events.ingest.target.<name>.schema"
        )
    first = headers.select("value").limit(1)
    if first.isEmpty():
        return evolve(existing, T.StructType([]))
    # Stays in the JVM: the header line first (Spark takes a Dataset's first line as the header), then
    # the data lines of every file.
    sample = first.union(ok.select("value"))
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
    header = T.StructType([table.get(f.name, f) for f in inferred.fields if f.name not in skip])
    return typed_inferred(target, header, existing)
