"""What the line path's text formats share when Spark parses their lines (`formats/json_format.py`,
`formats/csv_lines.py`): the target's declared schema, the schema evolution rule, PERMISSIVE parsing,
and the split of parsed lines into rows and error rows."""

from __future__ import annotations

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from s3events.config.ddl_schema import ddl_text
from s3events.ingest.files import case_clash
from s3events.ingest.files.lineage import FIXED, LINEAGE
from s3events.ingest.target import TargetSpec

CORRUPT = "_corrupt_record"


def declared_schema(target: TargetSpec) -> T.StructType | None:
    """The target's declared schema (`schema`, or `schema.file` read at start-up), a bare type as one
    column named `value`; `schema.hints` replace the types of the columns they name, or add them."""
    if not target.schema_ddl:
        return None
    parsed = T.StructType.fromDDL(target.schema_ddl)
    declared = parsed if isinstance(parsed, T.StructType) else T.StructType([T.StructField("value", parsed)])
    hints = {f.name: f for f in hinted_fields(target)}
    kept = [hints.pop(f.name, f) for f in declared.fields]
    return T.StructType([*kept, *hints.values()])


def hinted_fields(target: TargetSpec) -> list[T.StructField]:
    """The columns `schema.hints` types, in the order written."""
    if not target.schema_hints:
        return []
    parsed = T.StructType.fromDDL(ddl_text(target.schema_hints))
    assert isinstance(parsed, T.StructType)  # a column list, validated at start-up (`ddl_schema`)
    return list(parsed.fields)


def typed_inferred(target: TargetSpec, schema: T.StructType, existing: pa.Schema | None) -> T.StructType:
    """An inferred line schema under `schema.hints` and `schema.infer.types`: a column the table lacks
    takes its hinted type, else STRING when inference is off (the fast path's parsers apply the same
    rule). A hint types a field the lines hold, and adds no column; the order stays the inferred one."""
    hints = {f.name: f for f in hinted_fields(target)}
    if not hints and target.infer_types:
        return schema
    table = set(existing.names) if existing is not None else set()

    def typed(f: T.StructField) -> T.StructField:
        if f.name in table:
            return f
        if f.name in hints:
            return hints[f.name]
        return f if target.infer_types else T.StructField(f.name, T.StringType(), True)

    return T.StructType([typed(f) for f in schema.fields])


def evolve(existing: pa.Schema | None, inferred: T.StructType) -> T.StructType:
    """Existing columns keep their type (a conflicting value becomes an error row); new ones are added."""
    fields = [f for f in inferred.fields if f.name != CORRUPT and f.name not in FIXED]
    if existing is None:
        return T.StructType(fields)
    known = from_arrow_schema(existing)
    kept = [f for f in known.fields if f.name not in FIXED]
    names = {f.name for f in kept} | FIXED
    return T.StructType(
        kept + [T.StructField(f.name, f.dataType, True) for f in fields if f.name not in names]
    )


def arrow_schema(schema: T.StructType) -> pa.Schema:
    """A Spark schema as the target's Arrow schema: every column nullable, timestamps in UTC."""
    arrow = to_arrow_schema(schema, timezone="UTC")
    return pa.schema([f.with_nullable(True) for f in arrow])


def split_parsed(
    parsed: DataFrame, schema: T.StructType, invalid_reason: Column, cached: list[DataFrame]
) -> tuple[DataFrame, DataFrame]:
    """(rows, error rows) of lines parsed into the struct column `p` (PERMISSIVE, see `permissive`)."""
    parsed = parsed.persist(StorageLevel.MEMORY_AND_DISK)  # parse once for the error rows and the write
    cached.append(parsed)
    is_bad = F.col("p").isNull() | F.col(f"p.{CORRUPT}").isNotNull()
    bad = parsed.where(is_bad).select(*LINEAGE, F.col("value").alias("raw"), invalid_reason.alias("error"))
    good = parsed.where(~is_bad).select(*LINEAGE, *[F.col(f"p.`{f.name}`").alias(f.name) for f in schema])
    return good, bad


def permissive(options: dict[str, str]) -> dict[str, str]:
    return {**options, "mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}


def with_corrupt(schema: T.StructType) -> T.StructType:
    return T.StructType([*schema.fields, T.StructField(CORRUPT, T.StringType())])


def ddl(schema: T.StructType) -> str:
    return ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)


def without_case_clashes(
    lines: DataFrame, schema: T.StructType, existing: pa.Schema | None, *, rescue: bool
) -> tuple[DataFrame, T.StructType, DataFrame | None]:
    """(lines, schema, error rows) with one name kept per field name that differs only in case from
    another of the batch or the table (`case_clash`): the schema loses the other spellings, so no read
    is ambiguous and no two columns differ in case; a line holding one is an error row naming it, or
    with `rescue` stays (the caller rescues the fields the schema lacks; error rows then None)."""
    table = existing.names if existing is not None else []
    groups = case_clash.clashing_groups([*(f.name for f in schema.fields), *table])
    if not groups:
        return lines, schema, None
    clashing = sorted({n for g in groups for n in g})
    keys = F.explode(F.json_object_keys("value")).alias("k")
    counted = lines.select(keys).where(F.col("k").isin(clashing)).groupBy("k").count().collect()
    refused = case_clash.aliases(schema.names, table, {r["k"]: r["count"] for r in counted})
    kept = T.StructType([f for f in schema.fields if f.name not in refused])
    if rescue:
        return lines, kept, None
    holds = F.coalesce(
        F.arrays_overlap(F.json_object_keys("value"), F.array(*map(F.lit, sorted(refused)))), F.lit(False)
    )
    bad = lines.where(holds).select(
        *LINEAGE, F.col("value").alias("raw"), F.lit(case_clash.clash_message(refused)).alias("error")
    )
    return lines.where(~holds), kept, bad


def refused_files(
    ok: DataFrame, headers: DataFrame, schema: T.StructType, existing: pa.Schema | None
) -> tuple[DataFrame, DataFrame] | None:
    """(no rows, one error row per file) when a header's names clash in case with each other or with
    `existing` (`case_clash.file_clash`), else None: such a file's columns are all or nothing."""
    why = case_clash.file_clash(schema.names, existing.names if existing is not None else ())
    if why is None:
        return None
    known = set(existing.names) if existing is not None else set()
    rows = ok.where(F.lit(False)).select(
        *LINEAGE, *[F.lit(None).cast(f.dataType).alias(f.name) for f in schema if f.name in known]
    )
    lineage = [F.lit(None).cast("long").alias(c) if c == "_source_line" else F.col(c) for c in LINEAGE]
    return rows, headers.select(*lineage, F.lit(None).cast("string").alias("raw"), F.lit(why).alias("error"))
