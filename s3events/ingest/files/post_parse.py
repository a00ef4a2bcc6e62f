"""The post-parse stage: from a format's parsed rows (lineage + data columns) to the rows a target
receives, for both paths. Each rule is stated once here:

- key partitions: a partition column the records lack (or leave null, as strings) is filled from the
  key path (`.../dt=2026-11-22/...`, `target.key_path_pattern`, one regex for Java and Python);
- `_ingested_at` follows the data columns, one timestamp for the whole batch;
- schema alignment: the table's columns first, in its order (absent ones as typed nulls), then new ones;
- error rows: ERROR_SCHEMA, with the batch's `_ingested_at`; a row without a line number is a whole-file
  problem, and such a file contributes no rows (all or nothing per file);
- merge reduction: one row per record key, the largest ordering field (nulls lose), then the latest
  event, then the last file and line (`latest_rows` on Arrow tables, `latest_per_key` as Spark's window).

The fast path's tasks hold Arrow tables, the line path's rows are still in Spark's JVM: each rule has
its Arrow form (`finish`) and its Spark form (`finish_rows`) side by side here, and the property test
(`tests/integration/test_dispatch.py`) holds both paths' rows and error rows equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.window import Window

from s3events.infra.parquet_files import WrittenFile
from s3events.ingest.files import latest_rows
from s3events.ingest.files.lineage import INGESTED_AT, TIMESTAMP
from s3events.ingest.files.merge_input import MergeInput, conform
from s3events.ingest.target import TargetSpec, key_path_pattern, key_path_value
from s3events.ingest.target_table import ERROR_SCHEMA

__all__ = ["ERROR_SCHEMA", "ReadOutput", "both_paths_latest", "error_rows", "finish", "finish_rows"]


@dataclass
class ReadOutput:
    """What reading one batch gives its target."""

    schema: pa.Schema  # the target's full schema after this batch (data + lineage + partition columns)
    errors: pa.Table  # ERROR_SCHEMA rows
    rows: int = 0
    files: list[WrittenFile] = field(default_factory=list)  # append mode: data files the executors wrote
    merge: MergeInput | None = None  # merge mode: the batch's latest row per record key
    failed_files: dict[str, str] = field(default_factory=dict)  # whole-file problems: uri -> reason
    fast_path_files: int = 0  # input files the fast path read (the others took the line path)
    filtered: int = 0  # input rows the target's transform removed (a WHERE): counted, not errors


# -- Arrow: one file's rows in a fast-path task ----------------------------------------------------------


def finish(table: pa.Table, uri: str, *, partition_by: tuple[str, ...], ingested_at: datetime) -> pa.Table:
    """Partition columns from the key path where the records lack them, and the ingestion time."""
    n = table.num_rows
    for name in partition_by:
        value = pa.repeat(pa.scalar(key_path_value(uri, name), pa.string()), n)
        if name not in table.column_names:
            table = table.append_column(name, value)
        else:
            index = table.column_names.index(name)
            column = table.column(index)
            if pa.types.is_null(column.type):
                table = table.set_column(index, name, value)
            elif pa.types.is_string(column.type):
                table = table.set_column(index, name, pc.coalesce(column, value))
    return table.append_column(INGESTED_AT, pa.repeat(pa.scalar(ingested_at, TIMESTAMP), n))


# -- Spark: the line path's rows -------------------------------------------------------------------------


def finish_rows(
    rows: DataFrame, *, partition_by: tuple[str, ...], ingested_at: datetime, existing: pa.Schema | None
) -> DataFrame:
    """`finish` over Spark rows of many files, then aligned to the table's schema."""
    types = dict(rows.dtypes)
    for name in partition_by:
        value = F.regexp_extract("_source_file", key_path_pattern(name), 1)
        from_key = F.when(value == "", F.lit(None)).otherwise(value)
        if name not in types:
            rows = rows.withColumn(name, from_key)
        elif types[name] == "string":  # a column the table already has, absent from these records
            rows = rows.withColumn(name, F.coalesce(F.col(f"`{name}`"), from_key))
    rows = rows.withColumn(INGESTED_AT, F.lit(ingested_at).cast("timestamp"))
    return _aligned(rows, existing)


def _aligned(rows: DataFrame, existing: pa.Schema | None) -> DataFrame:
    """Existing columns first, in table order (absent ones as typed nulls), then new ones."""
    if existing is None:
        return rows
    known = from_arrow_schema(existing)
    columns = [
        F.col(f"`{f.name}`") if f.name in rows.columns else F.lit(None).cast(f.dataType).alias(f.name)
        for f in known.fields
    ]
    extra = [F.col(f"`{c}`") for c in rows.columns if c not in existing.names]
    return rows.select(*columns, *extra)


def error_rows(bad: DataFrame, ingested_at: datetime) -> tuple[pa.Table, dict[str, str]]:
    """The error rows (ERROR_SCHEMA) on the driver, and the whole-file problems among them."""
    errors = (
        bad.withColumn(INGESTED_AT, F.lit(ingested_at).cast("timestamp"))
        .select(*[f.name for f in ERROR_SCHEMA])
        .toArrow()
    ).cast(ERROR_SCHEMA)
    whole_file = errors.filter(pc.is_null(errors["_source_line"])).select(["_source_file", "error"])
    return errors, {r["_source_file"]: r["error"] for r in whole_file.to_pylist()}


def latest_per_key(rows: DataFrame, target: TargetSpec) -> DataFrame:
    """`latest_rows.latest`'s order as Spark's window: one row per record key."""
    order = [F.col("_event_time").desc(), F.col("_source_file").desc(), F.col("_source_line").desc()]
    if target.ordering_field:
        order.insert(0, F.col(f"`{target.ordering_field}`").desc_nulls_last())
    window = Window.partitionBy(*[F.col(f"`{k}`") for k in target.record_key]).orderBy(*order)
    return rows.withColumn("_rank", F.row_number().over(window)).where(F.col("_rank") == 1).drop("_rank")


def both_paths_latest(
    fast: MergeInput, line: MergeInput, schema: pa.Schema, target: TargetSpec
) -> MergeInput:
    """One latest row per key of a batch some of whose files took each path."""
    both = pa.concat_tables([conform(fast.take_rows(), schema), line.take_rows()])
    return MergeInput.held(latest_rows.latest(both, target.record_key, target.ordering_field))
