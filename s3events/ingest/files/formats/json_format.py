"""JSON-lines objects parsed whole by pyarrow's C++ reader inside Spark executors: the fast path.

The line path (split lines, Spark's from_json) handles every file, but moves each line through the JVM
three times. Most files are clean, and for those pyarrow gives the same rows an order of magnitude
faster. A file takes this path only when the result is exactly what the line path would give; in every
other case `fetch` or `parse_json_lines` returns a reason instead of a table and the caller sends the
file to the line path, which records bad lines one by one. So the fast path never decides what an error is.

Exactness conditions, each cheap to check on the whole buffer:
- UTF-8 throughout (pyarrow does not check; the line path reports each invalid line);
- no blank lines (pyarrow skips them silently, which would shift line numbers), and as many rows as
  lines (so no line held two objects);
- no integer literal beyond 64 bits where a column is inferred as double (pyarrow falls back to a
  double, losing digits; Spark infers a decimal);
- inferred types normalised the way Spark's JSON inference does it: temporal-looking strings stay
  strings, all-null becomes string (a top-level all-null column stays null until the table types it),
  struct fields sorted by name; a type with no Spark counterpart
  (empty struct) is a reason to take the line path;
- columns the table already has keep its type: a value that does not fit makes pyarrow fail, and the
  line path then turns just that line into an error row.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from s3events.ingest.files import rescue
from s3events.ingest.files.formats.base import (
    BOM,
    PLAIN,
    Body,
    ParsedFile,
    has_blank_lines,
    is_spark_like,
    known_columns,
    line_count,
    spark_like,
    text,
    valid_utf8,
)
from s3events.ingest.files.formats.json_typing import (
    NO_COLUMNS,
    as_strings,
    decimal_strings,
    hinted_columns,
    without_absent,
)
from s3events.ingest.files.lineage import LINEAGE_FIELDS, lineage_columns
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec

# A line that is null (or not JSON) takes the line path: pyarrow 26's JSON reader crashes the process
# (a segmentation fault) on a null value that starts a block.
_NULL_LINE = r"(?:^|\n)[ \t\r]*n"
_BLOCK_BYTES = 1 << 20  # pyarrow parses blocks in parallel; a longer line is retried as one block
_DIGITS_TO_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_DIGIT_RUN = b"0" * 19  # 19 digits can exceed 64 bits
_RESERVED = {f.name for f in LINEAGE_FIELDS} | {"_ingested_at", "_corrupt_record"}


@dataclass(frozen=True, slots=True)
class JsonParser:
    """The JSON-lines parser of the fast path (see `parse_json_lines`)."""

    known: pa.Schema
    declared: bool
    # A field outside these columns goes to the rescued column (`rescue`), named so.
    rescued: tuple[str, frozenset[str]] | None = None
    strings: bool = False  # schema.infer.types=false: new columns hold their values' text (`as_strings`)
    rescued_column: str | None = None  # a field of its name is rescued: without `rescued`, the line path's
    hinted: pa.Schema = NO_COLUMNS  # schema.hints' columns outside `known`, kept where lines hold them

    @property
    def schema_from_every_file(self) -> bool:
        return False  # each line names its fields: files are independent

    @property
    def new_columns_sorted(self) -> bool:
        return True

    def keeps_type(self, t: pa.DataType) -> bool:
        return is_spark_like(t) or (pa.types.is_decimal(t) and t in [*self.known.types, *self.hinted.types])

    def parse(
        self, data: bytes, file: FileRef, etag: str | None, hints: dict[str, pa.DataType]
    ) -> ParsedFile:
        typed = pa.schema([*self.known, *self.hinted])
        parsed = parse_json_lines(
            data, file, etag, known=typed, declared=self.declared, hints=hints, rescued=self.rescued
        )
        if (
            self.rescued is None
            and parsed.table is not None
            and self.rescued_column in parsed.table.schema.names
        ):
            return ParsedFile(None, "a field named as the rescued column")
        parsed = without_absent(parsed, self.hinted.names, data) if self.hinted else parsed
        return as_strings(parsed, typed) if self.strings else parsed


def fast_parser(
    target: TargetSpec, *, declared: pa.Schema | None, existing: pa.Schema | None
) -> JsonParser | None:
    """The fast path's parser for the target, or None: it takes no reader options, and columns of the
    types `fast_path_supports` names."""
    known = rescue.without(known_columns(declared, existing), target.rescued_column)
    hinted = hinted_columns(known, target, declared, existing)
    if target.reader_options or not fast_path_supports(pa.schema([*known, *hinted])):
        return None
    fixed = declared is not None or (target.schema_evolution == "rescue" and existing is not None)
    name = target.rescued_column
    rescued = (name, frozenset(known.names)) if name is not None and fixed else None
    strings = not target.infer_types and declared is None
    return JsonParser(known, declared is not None, rescued, strings, name, hinted)


def fast_path_supports(schema: pa.Schema) -> bool:
    """Whether columns of these types parse the same in pyarrow as in Spark's from_json: top-level
    DECIMAL columns too, for files that hold them as JSON numbers (`decimal_strings`)."""
    return all(_plain(f.type) or pa.types.is_decimal128(f.type) for f in schema)


def parse_json_lines(
    data: bytes,
    file: FileRef,
    etag: str | None,
    *,
    known: pa.Schema,
    declared: bool,
    hints: dict[str, pa.DataType] | None = None,
    rescued: tuple[str, frozenset[str]] | None = None,
) -> ParsedFile:
    """The (decompressed) content of `file` as lineage + data columns, or why the line path must do it.

    `known` holds the data columns whose types are fixed (the table's, or the declared schema);
    with `declared`, fields outside it are ignored (as from_json does), otherwise they are inferred.
    `hints` (shared by the files of one task, updated here) remembers columns whose inferred type had
    to be corrected (a timestamp-looking string), so later files are parsed once instead of twice.
    With `rescued` (the rescued column's name, the columns of a fixed schema), fields outside `known`
    go to the rescued column.
    """
    if data.startswith(BOM):
        data = data[len(BOM) :]
    body = Body.of(data)
    if not body:
        return ParsedFile(None, "empty")
    if not valid_utf8(body):
        return ParsedFile(None, "not valid UTF-8")
    if has_blank_lines(body):
        return ParsedFile(None, "has blank lines")
    if pc.match_substring_regex(text(body), _NULL_LINE)[0].as_py():
        return ParsedFile(None, "a line starts with n: null, or not JSON")
    decimals = decimal_strings(body, known)
    if decimals is not None:
        return ParsedFile(None, decimals)
    try:
        if rescued is not None:
            table = _parse_rescuing(data, body, known, *rescued)
        else:
            table = _parse(data, known, declared, {} if hints is None else hints)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        return ParsedFile(None, f"pyarrow: {exc}")
    if isinstance(table, str):
        return ParsedFile(None, table)
    lines = line_count(body)
    if table.num_rows != lines:
        return ParsedFile(None, f"{table.num_rows} records on {lines} lines")
    lineage = lineage_columns(file, etag, 1, lines)
    return ParsedFile(
        pa.Table.from_arrays([*lineage, *table.columns], schema=pa.schema([*LINEAGE_FIELDS, *table.schema]))
    )


def _read(data: bytes, explicit: pa.Schema | None, unexpected: str) -> pa.Table:
    def read(block_size: int) -> pa.Table:
        return pajson.read_json(
            pa.BufferReader(data),
            read_options=pajson.ReadOptions(block_size=block_size),
            parse_options=pajson.ParseOptions(explicit_schema=explicit, unexpected_field_behavior=unexpected),
        )

    try:
        return read(_BLOCK_BYTES)
    except pa.ArrowInvalid as exc:
        if "straddl" not in str(exc) or len(data) <= _BLOCK_BYTES:
            raise
        return read(len(data))  # a line longer than a block: the whole object as one block


def _parse_rescuing(
    data: bytes, body: Body, known: pa.Schema, name: str, columns: frozenset[str]
) -> pa.Table | str:
    """The table's columns, and the rescued column `name` when a line has a field outside them: each
    line is then read once more by Python's json (`rescue.json_lines`)."""
    try:
        table = _read(data, known, "error")
    except pa.ArrowInvalid as exc:
        if "unexpected field" not in str(exc):
            raise
        table, holding = _with_new_fields(data, known)
        lines = body.data[: body.end].split(b"\n")
        table = table.append_column(pa.field(name, pa.string()), rescue.json_lines(lines, columns, holding))
    return _checked(table, known)


def _with_new_fields(data: bytes, known: pa.Schema) -> tuple[pa.Table, list[bool] | None]:
    """The `known` columns, and which lines hold a value of a field outside them (pyarrow's inference
    tells, unless their types conflict or a struct column gained a field: then every line is looked at).
    A value that does not fit a known column raises: the file is the line path's."""
    try:
        inferred = _read(data, known, "infer")
    except pa.ArrowInvalid:
        return _read(data, known, "ignore"), None
    if any(inferred.schema.field(f.name).type != f.type for f in known):
        return _read(data, known, "ignore"), None  # a struct column's new field: from_json drops it
    new = [inferred.column(n).is_valid() for n in inferred.column_names if n not in known.names]
    holding = functools.reduce(pc.or_, new) if new else pa.repeat(False, inferred.num_rows)
    return inferred.select(known.names), holding.to_pylist()


def _checked(table: pa.Table, known: pa.Schema) -> pa.Table | str:
    names = table.schema.names
    if len({n.lower() for n in names}) != len(names) or _RESERVED & set(names):
        return "column names clash (case-insensitive duplicates or lineage names)"
    for f in known:
        if table.schema.field(f.name).type != f.type:
            return f"column {f.name} does not match the table's type"
    return table


def _parse(data: bytes, known: pa.Schema, declared: bool, hints: dict[str, pa.DataType]) -> pa.Table | str:
    if declared:
        table = _read(data, known, "ignore")
    else:
        guess = [f for f in (pa.field(n, t) for n, t in hints.items()) if f.name not in known.names]
        try:
            table = _read(data, pa.schema([*known, *guess]) if len(known) or guess else None, "infer")
        except pa.ArrowInvalid:
            if not guess:
                raise
            table = _read(data, known if len(known) else None, "infer")  # the hints did not fit
        new = [f for f in table.schema if f.name not in known.names]
        # A top-level all-null column stays null: another file or the table gives its type.
        normalized = [(f.name, f.type if pa.types.is_null(f.type) else spark_like(f.type)) for f in new]
        if any(t is None for _, t in normalized):
            return "a column has a type Spark's inference would not give (e.g. an empty object)"
        for f, (name, wanted_type) in zip(new, normalized, strict=True):
            if wanted_type != f.type and wanted_type is not None:
                hints[name] = wanted_type
        wanted = pa.schema([*known, *sorted(normalized, key=lambda f: f[0])])
        if all(table.schema.field(f.name).type == f.type for f in wanted):
            table = table.select(wanted.names)  # only the order differs
        else:
            table = _read(data, wanted, "error")
        if _may_hold_a_huge_integer(table, [n for n, t in normalized if _has_double(t)], data):
            return "may hold an integer beyond 64 bits"
    return _checked(table, known)


def _may_hold_a_huge_integer(table: pa.Table, doubles: list[str], data: bytes) -> bool:
    """pyarrow turns an integer literal beyond 64 bits into a double, Spark into a decimal: such a file
    must take the line path. Only inferred double columns can hold one, and there it shows as a
    magnitude of at least 2**63 (a float literal that large is declined too, which is only slower)."""
    for name in doubles:
        column = table.column(name)
        if not pa.types.is_floating(column.type):  # nested: scan the text for a run of 19 digits
            return _LONG_DIGIT_RUN in data.translate(_DIGITS_TO_ZERO)
        largest = pc.max(pc.abs(column)).as_py()
        if largest is not None and largest >= 2.0**63:
            return True
    return False


def _has_double(t: pa.DataType | None) -> bool:
    if t is None:
        return False
    if pa.types.is_struct(t):
        return any(_has_double(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t):
        return _has_double(t.value_type)
    return pa.types.is_floating(t)


def _plain(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return t.num_fields > 0 and all(_plain(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _plain(t.value_type)
    return t in PLAIN
