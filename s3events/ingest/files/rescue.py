"""The rescued column (`rescued.column`; `_rescued_data` under `schema.evolution=rescue`): the fields of a
row that have no column to land in, as one JSON object string, so that the row lands instead of an error
row. What goes in, on both paths:

- a value that does not fit its column's type (the line path finds these: a fast-path file holding one
  is declined to it, as without a rescued column), the column then null;
- under `rescue` once the table exists (or with a declared `schema`), a field the table lacks.

A field maps to its original value: a JSON value as the line holds it (re-encoded by Python's `json`, so
a number stays a number, an object an object), a CSV field as a string. Null values are not rescued (null
and absent are one to a column); a row with nothing rescued has null. Both paths build the text with the
functions here (the line path in a Python UDF, over the rows that need one), so it is the same text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from s3events.ingest.files.read_output import ReadOutput
    from s3events.ingest.target import TargetSpec

RESCUE_MODES = ("add", "rescue")  # modes whose rescued column (when set) also takes misfit values
CORRUPT = "_corrupt_record"  # a line Python's strict JSON cannot read: kept whole under this key


def columns_fixed(target: TargetSpec, table: pa.Schema | None) -> bool:
    """Whether a batch's columns are fixed before it is read, so that a field outside them is rescued
    rather than added: declared by `schema`, or the table's under `schema.evolution=rescue`."""
    return target.schema_ddl is not None or (target.schema_evolution == "rescue" and table is not None)


def encode(fields: Mapping[str, object]) -> str | None:
    """The rescued column's text of these fields (null values left out), or None when none is left."""
    kept = {name: value for name, value in fields.items() if value is not None}
    if not kept:
        return None
    return json.dumps(kept, ensure_ascii=False, separators=(",", ":"))


def from_json_line(line: str, columns: frozenset[str], misfits: Sequence[str] | None = ()) -> str | None:
    """The rescued text of one JSON line: its fields not in `columns`, and those named in `misfits`."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # Spark's parser is more lenient (single quotes, comments, ...);
        # and Python's gives up on nesting past its recursion limit: never a failed task
        return encode({CORRUPT: line})
    if not isinstance(record, dict):
        return encode({CORRUPT: line})
    wrong = set(misfits or ())
    return encode({k: v for k, v in record.items() if k not in columns or k in wrong})


def from_fields(names: Sequence[str | None], values: Sequence[str | None]) -> str | None:
    """The rescued text of one CSV row's fields (a null name: not rescued)."""
    return encode({n: v for n, v in zip(names, values, strict=True) if n is not None})


# -- Arrow: the fast path ----------------------------------------------------------------------------------


def json_lines(
    lines: Iterable[bytes], columns: frozenset[str], holding: Sequence[bool] | None = None
) -> pa.Array:
    """The rescued column of a JSON-lines object's lines: their fields not in `columns` (only the lines
    `holding` marks have any: None, look at every line)."""
    texts = [
        from_json_line(line.decode("utf-8"), columns) if holding is None or holding[i] else None
        for i, line in enumerate(lines)
    ]
    return pa.array(texts, pa.string())


def csv_columns(names: Sequence[str], arrays: Sequence[pa.ChunkedArray], rows: int) -> pa.Array:
    """The rescued column of a CSV object's fields under `names` (as strings), row by row."""
    if not names or all(a.null_count == len(a) for a in arrays):
        return pa.nulls(rows, pa.string())
    columns = [a.to_pylist() for a in arrays]
    return pa.array([from_fields(names, values) for values in zip(*columns, strict=True)], pa.string())


def with_rescued(table: pa.Table, name: str) -> pa.Table:
    """`table` with the rescued column last (all null where the parser rescued nothing)."""
    if name in table.column_names:
        column = table.column(name)
        table = table.drop_columns([name])
    else:
        column = pa.chunked_array([pa.nulls(table.num_rows, pa.string())])
    return table.append_column(pa.field(name, pa.string()), column)


def without(schema: pa.Schema, name: str | None) -> pa.Schema:
    """`schema` without the rescued column: a record's field of that name is a field like any other."""
    return schema if name is None or name not in schema.names else schema.remove(schema.get_field_index(name))


def rescued_rows(out: ReadOutput, column: str | None) -> int:
    """How many of a batch's rows hold rescued data: from the written files' Delta statistics (every
    column has a nullCount; a file without the column rescued nothing), or the merge rows held in memory."""
    if column is None:
        return 0
    files = [*out.files, *(out.merge.files if out.merge is not None else [])]
    held = out.merge.keys if out.merge is not None else None  # the rows themselves when held
    count = (
        held.num_rows - held.column(column).null_count
        if held is not None and column in held.column_names
        else 0
    )
    for f in files:
        nulls = json.loads(f.stats or "{}").get("nullCount", {}).get(column)
        count += f.num_records - nulls if isinstance(nulls, int) else 0
    return count
