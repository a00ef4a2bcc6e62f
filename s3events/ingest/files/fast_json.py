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

import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from s3events.errors import TransientError
from s3events.infra.aws import AwsOptions
from s3events.ingest.files.lines import codec_for_key
from s3events.ingest.files.objects import LINEAGE_FIELDS, ObjectReadError, lineage_columns, open_object
from s3events.ingest.model import FileRef

MAX_OBJECT_BYTES = 128 << 20  # decompressed; larger objects stream through the line path
_BLOCK_BYTES = 1 << 20  # pyarrow parses blocks in parallel; a longer line is retried as one block
_BOM = b"\xef\xbb\xbf"
_BLANK_INSIDE = re.compile(rb"\n[ \t\r]*\n")  # starts with a literal: scans at memchr speed
_WHITESPACE = b" \t\r"
_DIGITS_TO_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_DIGIT_RUN = b"0" * 19  # 19 digits can exceed 64 bits
_RESERVED = {f.name for f in LINEAGE_FIELDS} | {"_ingested_at", "_corrupt_record"}
# Types whose pyarrow parse matches Spark's from_json; a table with other column types uses the line path.
_PLAIN = {pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float64(), pa.bool_(), pa.string()}


@dataclass(frozen=True, slots=True)
class JsonFile:
    """A parsed object (lineage columns then data columns), or why it must take the line path."""

    table: pa.Table | None
    reason: str | None = None


def fast_path_supports(schema: pa.Schema) -> bool:
    """Whether columns of these types parse the same in pyarrow as in Spark's from_json."""
    return all(_plain(f.type) for f in schema)


@dataclass(frozen=True, slots=True)
class Fetched:
    """An object's decompressed content and etag, or why it cannot take the fast path."""

    data: bytes | None
    etag: str | None = None
    reason: str | None = None


def fetch(file: FileRef, options: AwsOptions) -> Fetched:
    """GET exactly the event's object version (IfMatch) in one request and decompress it (gzip/zstd by
    extension). Thread-safe: tasks fetch the next objects while they parse the current one.

    Raises FatalError only for conditions no object gets past (credentials); everything else about
    the object (404, 412, corrupt gzip, too large, ...) is a reason, and the line path records it.
    """
    try:
        obj = open_object(file, options)
        try:
            if obj.size > MAX_OBJECT_BYTES:
                return Fetched(None, reason="larger than the in-memory limit")
            raw = obj.read()
            etag = obj.etag
        finally:
            obj.close()
    except (ObjectReadError, TransientError) as exc:
        return Fetched(None, reason=str(exc))
    data = _decompressed(raw, codec_for_key(file.key))
    if data is None:
        return Fetched(None, reason="compressed data is corrupt or too large")
    return Fetched(data, etag)


def parse_json_lines(
    data: bytes,
    file: FileRef,
    etag: str | None,
    *,
    known: pa.Schema,
    declared: bool,
    hints: dict[str, pa.DataType] | None = None,
) -> JsonFile:
    """The (decompressed) content of `file` as lineage + data columns, or why the line path must do it.

    `known` holds the data columns whose types are fixed (the table's, or the declared schema);
    with `declared`, fields outside it are ignored (as from_json does), otherwise they are inferred.
    `hints` (shared by the files of one task, updated here) remembers columns whose inferred type had
    to be corrected (a timestamp-looking string), so later files are parsed once instead of twice.
    """
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    body = data[:-1] if data.endswith(b"\n") else data
    if not body:
        return JsonFile(None, "empty")
    reason = _shape_problem(body)
    if reason:
        return JsonFile(None, reason)
    try:
        table = _parse(data, known, declared, {} if hints is None else hints)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        return JsonFile(None, f"pyarrow: {exc}")
    if isinstance(table, str):
        return JsonFile(None, table)
    lines = body.count(b"\n") + 1
    if table.num_rows != lines:
        return JsonFile(None, f"{table.num_rows} records on {lines} lines")
    lineage = lineage_columns(file, etag, 1, lines)
    return JsonFile(
        pa.Table.from_arrays([*lineage, *table.columns], schema=pa.schema([*LINEAGE_FIELDS, *table.schema]))
    )


def _decompressed(raw: bytes, codec: str | None) -> bytes | None:
    if codec is None:
        return raw
    try:
        data: bytes = pa.input_stream(pa.py_buffer(raw), compression=codec).read(MAX_OBJECT_BYTES + 1)
    except (OSError, pa.ArrowInvalid):
        return None
    return data if len(data) <= MAX_OBJECT_BYTES else None


def _shape_problem(body: bytes) -> str | None:
    buffer = pa.py_buffer(body)
    offsets = pa.array([0, len(body)], pa.int64()).buffers()[1]
    try:
        pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, buffer]).cast(pa.large_string())
    except pa.ArrowInvalid:
        return "not valid UTF-8"
    newline = body.find(b"\n")
    first, last = body if newline < 0 else body[:newline], body[body.rfind(b"\n") + 1 :]
    if not first.strip(_WHITESPACE) or not last.strip(_WHITESPACE) or _BLANK_INSIDE.search(body):
        return "has blank lines"
    return None


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
        normalized = [(f.name, f.type if pa.types.is_null(f.type) else _spark_like(f.type)) for f in new]
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
    names = table.schema.names
    if len({n.lower() for n in names}) != len(names) or _RESERVED & set(names):
        return "column names clash (case-insensitive duplicates or lineage names)"
    for f in known:
        if table.schema.field(f.name).type != f.type:
            return f"column {f.name} does not match the table's type"
    return table


def is_spark_like(t: pa.DataType) -> bool:
    """Whether `t` is already what Spark's inference would give (a top-level null is still open)."""
    return pa.types.is_null(t) or _spark_like(t) == t


def _spark_like(t: pa.DataType) -> pa.DataType | None:
    """The type Spark's JSON inference gives where pyarrow inferred `t`; None when there is none."""
    if pa.types.is_null(t) or pa.types.is_temporal(t):
        return pa.string()
    if pa.types.is_struct(t):
        fields = sorted((t.field(i) for i in range(t.num_fields)), key=lambda f: f.name)
        children = [(f.name, _spark_like(f.type)) for f in fields]
        if not children or any(c is None for _, c in children):
            return None
        return pa.struct(children)
    if pa.types.is_list(t):
        item = _spark_like(t.value_type)
        return None if item is None else pa.list_(item)
    return t if t in _PLAIN else None


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
    return t in _PLAIN
