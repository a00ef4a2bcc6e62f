"""How the JSON fast path types the columns a target's schema keys fix (`schema.hints`,
`schema.infer.types`, DECIMAL columns), so that a file gives the rows the line path gives, or a reason
to take the line path instead:

- hinted columns are parsed with their types, and kept where a file's lines hold them (`without_absent`);
- with `schema.infer.types=false`, inferred columns hold their values' text (`as_strings`);
- a DECIMAL column is parsed from JSON numbers only (`decimal_strings`).

Each check that reads the buffer is one RE2 pass over it.
"""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from s3events.ingest.files.formats.base import Body, ParsedFile, text
from s3events.ingest.files.line_parse import arrow_schema, hinted_fields
from s3events.ingest.files.lineage import LINEAGE_FIELDS
from s3events.ingest.target import TargetSpec

NO_COLUMNS = pa.schema([])
_LINEAGE = {f.name for f in LINEAGE_FIELDS}


def hinted_columns(
    known: pa.Schema, target: TargetSpec, declared: pa.Schema | None, existing: pa.Schema | None
) -> pa.Schema:
    """The `schema.hints` columns outside `known`: parsed with their types, kept where a file's lines
    hold them (`without_absent`), new columns as any other (`typed_inferred` types the line path's). A
    declared schema holds its hints already; under `rescue` the table's columns are fixed."""
    hinted = hinted_fields(target)
    fixed = target.schema_evolution == "rescue" and existing is not None
    if declared is not None or not hinted or fixed:
        return NO_COLUMNS
    return arrow_schema(T.StructType([f for f in hinted if f.name not in known.names]))


def without_absent(parsed: ParsedFile, hinted: list[str], data: bytes) -> ParsedFile:
    """The file's rows without the hinted columns none of its lines holds (pyarrow gives an explicit
    column to every row; Spark's inference only the fields it sees). A hinted column all null whose
    name the file spells somewhere (a field holding null, or a nested one) takes the line path."""
    table = parsed.table
    if table is None:
        return parsed
    empty = [n for n in hinted if n in table.column_names and table.column(n).null_count == table.num_rows]
    if not empty:
        return parsed
    spelled = _spelled(Body.of(data), empty, "")
    if spelled is not None:
        return ParsedFile(None, f"a hinted field {spelled} (Spark's inference decides the column)")
    return ParsedFile(table.drop_columns(empty))


def as_strings(parsed: ParsedFile, known: pa.Schema) -> ParsedFile:
    """schema.infer.types=false: the inferred columns as STRING, the text from_json gives them. Strings,
    integers and booleans have it here (as written); a file with an inferred column of other numbers, or
    of objects or arrays, takes the line path, whose text Spark prints."""
    if parsed.table is None:
        return parsed
    table = parsed.table
    for i, f in enumerate(table.schema):
        if f.name in known.names or f.name in _LINEAGE:
            continue
        if pa.types.is_integer(f.type) or pa.types.is_boolean(f.type):
            table = table.set_column(i, pa.field(f.name, pa.string()), table.column(i).cast(pa.string()))
        elif not (pa.types.is_string(f.type) or pa.types.is_null(f.type)):
            return ParsedFile(
                None, f"schema.infer.types=false: column {f.name} holds {f.type} (Spark's text)"
            )
    return ParsedFile(table)


def decimal_strings(body: Body, known: pa.Schema) -> str | None:
    """Why a file may not take the fast path for its DECIMAL columns, or None. A JSON number converts
    in pyarrow as from_json converts it, or fails (a value to round, beyond the precision: the line
    path then decides). A string converts by other rules in each (Spark drops ',' from it), so a file
    holding one for a DECIMAL field (or an escaped field name, which could spell one) is declined."""
    names = [f.name for f in known if pa.types.is_decimal(f.type)]
    spelled = _spelled(body, names, '\\s*"') if names else None
    return None if spelled is None else f"a DECIMAL field {spelled} (Spark parses a string its own way)"


def _spelled(body: Body, names: list[str], value: str) -> str | None:
    """How the body may hold one of the fields `names` followed by `value` (a regex; '' for any value),
    or None when it cannot: a field name may be written with escapes, which a search cannot see."""
    if b"\\u" in body:
        return "may be named with escapes"
    keys = "|".join(re.escape(json.dumps(n, ensure_ascii=False)) for n in names)
    if pc.match_substring_regex(text(body), f"(?:{keys})\\s*:{value}")[0].as_py():
        return "holds a string" if value else "holds only nulls"
    return None
