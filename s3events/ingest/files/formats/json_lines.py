"""JSON lines on the line path: each non-blank line parsed by Spark's from_json (PERMISSIVE) against the
declared schema, or the table's columns and the new ones Spark's JSON inference finds over every line of
the batch; a line from_json refuses is an error row saying why. XML's records come here as JSON objects.
The fast path's JSON parser is `json_format`.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from s3events.ingest.files import rescue_rows
from s3events.ingest.files.line_parse import (
    ddl,
    declared_schema,
    evolve,
    permissive,
    split_parsed,
    typed_inferred,
    with_corrupt,
    without_case_clashes,
)
from s3events.ingest.files.rescue import columns_fixed
from s3events.ingest.target import TargetSpec


def parse_lines(
    spark: SparkSession,
    lines: DataFrame,
    target: TargetSpec,
    options: dict[str, str],
    existing: pa.Schema | None,
    cached: list[DataFrame],
) -> tuple[DataFrame, DataFrame]:
    """(rows, error rows) of non-blank JSON lines, parsed by from_json against the declared schema, or
    the table's columns and new ones Spark's JSON inference finds over every line of the batch."""
    found = _line_schema(spark, target, lines, options, existing)
    rescue = target.rescued_column is not None
    lines, schema, clashes = without_case_clashes(lines, found, existing, rescue=rescue)
    parsed = lines.withColumn("p", F.from_json("value", with_corrupt(schema), permissive(options)))
    if target.rescued_column is None:
        good, bad = split_parsed(parsed, schema, _invalid_reason(schema, options), cached)
    else:
        good, bad = rescue_rows.split_json(
            parsed,
            schema,
            _invalid_reason(schema, options),
            _conflict(schema),
            lambda one: F.from_json("value", one, permissive(options)),
            cached,
            name=target.rescued_column,
            # other spellings of a name are rescued too
            new_fields=columns_fixed(target, existing) or schema != found,
        )
    return good, bad if clashes is None else bad.unionByName(clashes)


# A control character (U+0000 to U+001F) left unescaped inside a JSON string, group 1 (Java and Python
# regex alike): the strings before it are skipped whole, so a tab between tokens does not match.
RAW_CONTROL_IN_STRING = (
    r'(?s)^[^"]*+(?:"(?:[^"\\\x00-\x1f]|\\.)*+"[^"]*+)*+"(?:[^"\\\x00-\x1f]|\\.)*+([\x00-\x1f])'
)


def _invalid_reason(schema: T.StructType, options: dict[str, str]) -> Column:
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
        F.lit(_conflict(schema))
    )


def _conflict(schema: T.StructType) -> str:
    return f"does not match the target schema {ddl(schema)} (type conflict)"


def _line_schema(
    spark: SparkSession,
    target: TargetSpec,
    lines: DataFrame,
    options: dict[str, str],
    existing: pa.Schema | None,
) -> T.StructType:
    declared = declared_schema(target)
    if declared is not None:
        return _without(declared, target.rescued_column)
    if columns_fixed(target, existing):  # rescue: the table's columns, no inference needed
        return _without(evolve(existing, T.StructType([])), target.rescued_column)
    inferred = spark.read.options(**options).json(lines.select("value")).schema  # stays in the JVM
    schema = typed_inferred(target, evolve(existing, inferred), existing)
    return _without(schema, target.rescued_column)


def _without(schema: T.StructType, name: str | None) -> T.StructType:
    """The schema lines are parsed with: a field named as the rescued column is a field like others."""
    return T.StructType([f for f in schema.fields if f.name != name])
