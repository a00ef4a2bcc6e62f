"""The rescued column on the line path (`rescue` has the rule and the fast path's form): the parsed lines
split into rows and error rows as `line_parse.split_parsed` splits them, except that a line whose only
fault is a value that does not fit its column becomes a row. Which columns did not fit is told by
parsing such a line once per column (only these lines: they are few); their values, and the fields
the schema lacks when new fields are rescued, go into the rescued column through a Python UDF over the
rows that need one, with the functions the fast path uses, so both give the same text.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from s3events.ingest.files import rescue
from s3events.ingest.files.line_parse import CORRUPT, with_corrupt
from s3events.ingest.files.lineage import LINEAGE
from s3events.ingest.target import TargetSpec

_MISFITS = "_rescue_misfits"


def rescues_csv_fields(target: TargetSpec, table: pa.Schema | None) -> bool:
    """Whether a CSV header's columns the table lacks go to the rescued column (`rescue`, once the table
    exists; a declared schema names every column by position, so none is new)."""
    fixed = target.schema_evolution == "rescue" and table is not None and not target.schema_ddl
    return target.rescued_column is not None and fixed


def csv_rescue_schema(
    schema: T.StructType, table: pa.Schema | None, name: str, new_fields: bool
) -> tuple[T.StructType, tuple[str, ...]]:
    """A header's schema with the columns that go to the rescued column as strings, and their names: one
    named as the rescued column, and with `new_fields` those the table lacks."""
    known = set(table.names) if table is not None else set()
    new = tuple(f.name for f in schema if (new_fields and f.name not in known) or f.name == name)
    fields = [T.StructField(f.name, T.StringType()) if f.name in new else f for f in schema]
    return T.StructType(fields), new


def split_json(
    parsed: DataFrame,
    schema: T.StructType,
    reason: Column,
    conflict: str,
    parse_one: Callable[[T.StructType], Column],
    cached: list[DataFrame],
    *,
    name: str,
    new_fields: bool,
) -> tuple[DataFrame, DataFrame]:
    """(rows with the rescued column `name`, error rows) of JSON lines parsed into `p`. A bad line whose
    `reason` is `conflict` (a type conflict) is a row; `parse_one` parses `value` against one column."""
    alone = [with_corrupt(T.StructType([f])) for f in schema]  # from_json matches fields by name
    rows, bad = _split(parsed, schema, reason, conflict, [parse_one(s) for s in alone], cached)
    columns = [f.name for f in schema]
    named = F.coalesce(F.array_contains(F.json_object_keys("value"), name), F.lit(False))
    need = (F.size(_MISFITS) > 0) | named  # a field named as the rescued column is rescued, in any mode
    if new_fields:
        keys = F.array_except(
            F.json_object_keys("value"), F.array(*map(F.lit, columns)).cast("array<string>")
        )
        need = need | (F.coalesce(F.size(keys), F.lit(0)) > 0)
    encode = F.udf(_JsonLineRescue(frozenset(columns)), T.StringType())
    return _with_rescued(rows, need, encode("value", _MISFITS), name), bad


def split_csv(
    parsed: DataFrame,
    schema: T.StructType,
    reason: Column,
    parse_one: Callable[[T.StructType], Column],
    cached: list[DataFrame],
    *,
    name: str,
    rescued: tuple[str, ...],
) -> tuple[DataFrame, DataFrame]:
    """(rows with the rescued column `name`, error rows) of CSV lines parsed into `p` by position. A bad
    line whose fields all parse as strings has only misfit values: it is a row. Columns in `rescued`
    (new fields under `rescue`, parsed as strings) go into the rescued column, in the header's order."""
    strings = T.StructType([T.StructField(f.name, T.StringType()) for f in schema])
    parsed = parsed.withColumn("_raw", parse_one(with_corrupt(strings)))
    fits = F.col(f"_raw.{CORRUPT}").isNull()
    conflict = "a value that does not fit its column"
    # from_csv matches fields by position: one column typed, the others strings.
    alone = [
        with_corrupt(T.StructType([f if j == i else strings[j] for j in range(len(schema))]))
        for i, f in enumerate(schema)
    ]
    why = F.when(fits, F.lit(conflict)).otherwise(reason)
    rows, bad = _split(parsed, schema, why, conflict, [parse_one(s) for s in alone], cached)
    # The rescued fields by position: a misfit's raw text, or a new field's value.
    names = [
        F.when(F.array_contains(_MISFITS, f.name) | F.lit(f.name in rescued), F.lit(f.name)) for f in schema
    ]
    values = [F.col(f"_raw.`{f.name}`") for f in schema]
    keep = [f for f in schema if f.name not in rescued]
    need = F.size(_MISFITS) > 0
    for column in rescued:
        need = need | F.col(f"`{column}`").isNotNull()
    encode = F.udf(_FieldsRescue(), T.StringType())
    out = _with_rescued(rows, need, encode(F.array(*names), F.array(*values)), name, drop=["_raw"])
    return out.select(*LINEAGE, *[F.col(f"`{f.name}`") for f in keep], name), bad


class _JsonLineRescue:
    """`rescue.from_json_line` over `columns`, as a UDF (a plain callable: no type hints to read)."""

    def __init__(self, columns: frozenset[str]) -> None:
        self.columns = columns

    def __call__(self, line, misfits):
        return rescue.from_json_line(line, self.columns, misfits)


class _FieldsRescue:
    """`rescue.from_fields` as a UDF."""

    def __call__(self, names, values):
        return rescue.from_fields(names, values)


def _split(
    parsed: DataFrame,
    schema: T.StructType,
    reason: Column,
    conflict: str,
    alone: list[Column],
    cached: list[DataFrame],
) -> tuple[DataFrame, DataFrame]:
    """(rows with `value` and the names of their misfit columns, error rows); `alone[i]` parses a line
    for column i only."""
    parsed = parsed.persist(StorageLevel.MEMORY_AND_DISK)  # parse once for the splits and the write
    cached.append(parsed)
    is_bad = F.col("p").isNull() | F.col(f"p.{CORRUPT}").isNotNull()
    parsed = parsed.withColumn("_why", F.when(is_bad, reason))
    misfit = is_bad & (F.col("_why") == F.lit(conflict))
    bad = parsed.where(is_bad & ~misfit).select(
        *LINEAGE, F.col("value").alias("raw"), F.col("_why").alias("error")
    )
    extra = [c for c in parsed.columns if c == "_raw"]
    fit = parsed.where(~is_bad).select(
        *LINEAGE,
        "value",
        *extra,
        *[F.col(f"p.`{f.name}`").alias(f.name) for f in schema],
        F.array().cast("array<string>").alias(_MISFITS),
    )
    # One parse per column tells which of a misfit line's values do not fit (the others land).
    apart = parsed.where(misfit).select(
        *LINEAGE, "value", *extra, *[one.alias(f"_one{i}") for i, one in enumerate(alone)]
    )
    failed = [F.col(f"_one{i}.{CORRUPT}").isNotNull() for i in range(len(alone))]
    pairs = list(zip(schema, failed, strict=True))
    named = F.array(*[F.when(b, F.lit(f.name)) for f, b in pairs]).cast("array<string>")
    mended = apart.select(
        *LINEAGE,
        "value",
        *extra,
        *[F.when(~b, F.col(f"_one{i}.`{f.name}`")).alias(f.name) for i, (f, b) in enumerate(pairs)],
        F.filter(named, lambda n: n.isNotNull()).alias(_MISFITS),
    )
    return fit.unionByName(mended), bad


def _with_rescued(
    rows: DataFrame, need: Column, encoded: Column, name: str, drop: list[str] | None = None
) -> DataFrame:
    """The rescued column `name` (the UDF runs only on the rows that `need` it), `value` and helpers
    dropped."""
    needing = rows.where(need).withColumn(name, encoded)
    others = rows.where(~need | need.isNull()).withColumn(name, F.lit(None).cast("string"))
    return needing.unionByName(others).drop("value", _MISFITS, *(drop or []))
