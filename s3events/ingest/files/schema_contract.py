"""A target's schema contract once its table exists (`schema.evolution`): what a field the table lacks
does. `add` (the default) makes it a new column; `ignore` drops it, on both paths before anything is
written (`kept_columns`, in the post-parse stage: `post_parse.finish`); `fail` refuses the batch
before it is written, naming the first file and line that hold the field (`refuse_new_fields`), and the
target fails with nothing committed, so the next run starts at the same checkpoint. `rescue` keeps the
table's columns: the formats' parsers put such a field into the rescued column (`rescue`), which is the
target's own column under every mode, never a new field.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from functools import reduce

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from s3events.errors import S3EventsError
from s3events.ingest.files.lineage import INGESTED_AT
from s3events.ingest.target import TargetSpec


class NewFieldRefused(S3EventsError):
    """schema.evolution=fail: a batch holds a field the target's table lacks; nothing is committed."""


def kept_columns(target: TargetSpec, existing: pa.Schema | None) -> frozenset[str] | None:
    """The columns a row may keep (`ignore` on an existing table: the table's), or None for all."""
    if target.schema_evolution != "ignore" or existing is None:
        return None
    rescued = (target.rescued_column,) if target.rescued_column is not None else ()
    return frozenset([*existing.names, INGESTED_AT, *rescued])


def new_fields(names: Iterable[str], existing: pa.Schema | None, rescued: str | None = None) -> list[str]:
    """The names a table lacks (none while it does not exist: the first batch defines it); the rescued
    column is the target's own, never a new field."""
    if existing is None:
        return []
    return [n for n in names if n not in existing.names and n not in (INGESTED_AT, rescued)]


def enforce_contract(
    rows: DataFrame, given: Iterable[str], existing: pa.Schema | None, target: TargetSpec
) -> list[str]:
    """The new fields among the line path's `given` columns that `ignore` drops (`kept_columns`, in the
    post-parse stage); `fail` raises, naming the first file and line of `rows` holding one."""
    new = new_fields(given, existing, target.rescued_column)
    if new and target.schema_evolution == "fail":
        refuse_new_fields(rows, new, target)
    return new if target.schema_evolution == "ignore" else []


def refuse_new_fields(rows: DataFrame, new: list[str], target: TargetSpec) -> None:
    """NewFieldRefused naming the first file and line (in file, line order) with a value of a new field
    (or the batch's first line, when every value of them is null)."""
    has = [F.col(f"`{n}`").isNotNull().alias(f"has_{i}") for i, n in enumerate(new)]
    holding = rows.where(reduce(operator.or_, [F.col(f"`{n}`").isNotNull() for n in new]))
    first = (
        holding.orderBy("_source_file", "_source_line").select("_source_file", "_source_line", *has).first()
        or rows.orderBy("_source_file", "_source_line").select("_source_file", "_source_line").first()
    )
    where = "the batch" if first is None else f"{first['_source_file']} line {first['_source_line']}"
    named = [n for i, n in enumerate(new) if first is not None and first.asDict().get(f"has_{i}")] or new
    raise refused(target, where, named)


def refused(target: TargetSpec, where: str, named: list[str]) -> NewFieldRefused:
    """The refusal of a batch whose `where` ("<file> line <n>", or "the batch") holds `named` new fields."""
    return NewFieldRefused(
        f"target {target.name}: schema.evolution=fail: {where} has new field(s) {', '.join(named)} "
        f"the table lacks; nothing committed. Add them to the table's schema (schema.evolution=add for "
        f"one run) or set schema.evolution=ignore, then ingest resumes at the same checkpoint"
    )
