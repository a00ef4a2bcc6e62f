"""CSV objects parsed whole by pyarrow's C++ reader inside Spark executors: the CSV fast path's parser.

The line path splits a CSV file into lines and parses each with Spark's from_csv against one schema: the
declared one, or the table's columns followed by new ones named by the batch's first header line and
typed by Spark's CSV inference over every data line; each file's first line is dropped as its header.
Columns are matched by position, not by name. This parser gives the same rows only where that is
certain, and otherwise returns a reason (the file then takes the line path):

- UTF-8 throughout, no blank lines (the line path skips them, which pyarrow would do too, but a blank
  first line would make the line path keep the real header as data), no b"\\r" but before b"\\n";
- no escape character anywhere (Spark's default escape is a backslash), and a quote only around whole
  fields holding neither quote nor line end (`"a,b"`); Spark's tokenizer and pyarrow's agree there;
- every line has exactly as many fields as the schema (else from_csv marks it malformed);
- the header names the columns (the table's keep their type, in any order; the table's columns a file
  lacks are null, or filled from the key path), with names Spark keeps as they are;
- every value converts as from_csv converts it (`+1` to 1, `007` to 7, an empty field to null) and, for
  a new column, Spark's inference would give the type given here: integer, bigint, double (plain
  decimals only: `5.`, `1e5`, `NaN` are inferred otherwise), boolean or string. A column whose values
  could be dates or timestamps (or anything else Spark's lenient parsers might accept) is declined,
  unless one value is plainly a string, which makes Spark infer string too (`csv_types`: each column is
  read as strings once, then typed and converted by pyarrow's kernels, the cheapest checks first).

`header` of the result is the file's first line, so that the fast path can check that every file of a
batch has the same one (the line path takes one file's header for the whole batch).
"""

from __future__ import annotations

import contextlib
import csv
import re
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from s3events.ingest.files import csv_types
from s3events.ingest.files.fast_json import is_spark_like
from s3events.ingest.files.fast_parse import (
    BOM,
    Body,
    Parsed,
    has_blank_lines,
    line_count,
    lone_carriage_return,
    text,
)
from s3events.ingest.files.objects import LINEAGE_FIELDS, lineage_columns
from s3events.ingest.model import FileRef

_RESERVED = {f.name.lower() for f in LINEAGE_FIELDS} | {"_ingested_at", "_corrupt_record"}
SUPPORTED = csv_types.SUPPORTED  # column types whose from_csv conversion this parser reproduces exactly
_SAFE_NAME = re.compile(r"^[^\x00-\x20`.]([^\x00-\x1f`.]*[^\x00-\x20`.])?$")


# Spark's CSV parser (univocity, the line path's) stops at its maxColumns default: a wider file is one
# error row on either path, which also bounds what parsing one file costs (about 16 KiB a column here).
MAX_CSV_COLUMNS = 20_480


def csv_fields(line: str, delimiter: str, quote: str) -> int:
    """The fields of one CSV line (a header), split as the reader options say."""
    if len(delimiter) == 1 and len(quote) == 1:  # Python's csv takes single characters only
        with contextlib.suppress(csv.Error):  # e.g. a field over its size limit: count as below
            return len(next(csv.reader([line], delimiter=delimiter, quotechar=quote), []))
    return line.count(delimiter) + 1  # an upper bound


def too_wide(fields: int) -> str:
    return f"the header has {fields} columns, more than the {MAX_CSV_COLUMNS} Spark's CSV parser takes"


@dataclass(frozen=True, slots=True)
class CsvOptions:
    """The target's reader options the fast path understands, with Spark's defaults."""

    header: bool = True
    delimiter: str = ","
    quote: str = '"'
    escape: str = "\\"


def csv_options(reader_options: Mapping[str, str] | None) -> CsvOptions | None:
    """The CSV options from a target's reader options, or None when one is set that the fast path does
    not reproduce (then every file of the target takes the line path). Keys as the line path reads them:
    `header` (true unless "false"), `sep` or `delimiter`, `quote`, `escape`, each one character."""
    options = dict(reader_options or {})
    header = options.pop("header", "true").lower() == "true"
    chars = {}
    for key in ("sep", "delimiter", "quote", "escape"):
        if key in options:
            value = options.pop(key)
            if len(value) != 1 or value in "\r\n":
                return None
            chars[key] = value
    if options or ("sep" in chars and "delimiter" in chars):
        return None
    parsed = CsvOptions(
        header=header,
        delimiter=chars.get("sep", chars.get("delimiter", ",")),
        quote=chars.get("quote", '"'),
        escape=chars.get("escape", "\\"),
    )
    if len({parsed.delimiter, parsed.quote, parsed.escape}) != 3:
        return None
    return parsed


def fast_path_supports(schema: pa.Schema) -> bool:
    """Whether every column has a type whose from_csv conversion the fast path reproduces."""
    return all(f.type in SUPPORTED for f in schema)


@dataclass(frozen=True, slots=True)
class CsvParser:
    """`known`: the data columns with fixed types, in order (the declared schema, or the table's columns
    without lineage); with `declared`, they are all the columns and headers are not looked at."""

    known: pa.Schema
    declared: bool
    options: CsvOptions

    @property
    def schema_from_every_file(self) -> bool:
        return True  # one header names every file's columns, one inference types them

    @property
    def new_columns_sorted(self) -> bool:
        return False  # in header order

    def keeps_type(self, t: pa.DataType) -> bool:
        return is_spark_like(t)  # int32, int64, double, bool, string

    def parse(self, data: bytes, file: FileRef, etag: str | None, hints: dict[str, pa.DataType]) -> Parsed:
        return parse_csv(data, file, etag, known=self.known, declared=self.declared, options=self.options)


def parse_csv(
    data: bytes,
    file: FileRef,
    etag: str | None,
    *,
    known: pa.Schema,
    declared: bool,
    options: CsvOptions = CsvOptions(),
) -> Parsed:
    """The (decompressed) content of `file` as lineage + data columns, or why the line path must do it."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    body = Body.of(data)
    first_line = body.first_line().removesuffix(b"\r")
    # A first line that is blank to the line path (it trims spaces) is no header there: it is skipped.
    named = options.header and bool(first_line.strip(b" "))
    header = first_line.decode("utf-8", errors="replace") if named else None

    def declined(reason: str) -> Parsed:
        return Parsed(None, reason, header)

    if not body:
        return declined("empty")
    try:
        whole = text(body)  # validated once, kept for the quote check
    except pa.ArrowInvalid:
        return declined("not valid UTF-8")
    if has_blank_lines(body):
        return declined("has blank lines")
    if lone_carriage_return(body):
        return declined("has a carriage return inside a line")
    if options.escape.encode() in body:
        return declined(f"holds the escape character {options.escape!r}")
    if options.quote.encode() in body and not _quotes_around_whole_fields(whole, options):
        return declined("quotes other than around whole fields")
    width = csv_fields(header, options.delimiter, options.quote) if header is not None else 0
    if width > MAX_CSV_COLUMNS:
        return declined(too_wide(width))  # the line path makes it one error row
    if not options.header and not declared:
        return declined("no header and no declared schema")
    lines = line_count(body)
    try:
        fields = _fields(data, first_line, options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        return declined(f"pyarrow: {exc}")
    names: list[str | None] = []
    if options.header:
        names = list(fields.slice(0, 1).to_pylist()[0].values())
        fields = fields.slice(1)
    if fields.num_rows != lines - (1 if options.header else 0):
        return declined(f"{fields.num_rows} records on {lines} lines")
    if fields.num_rows == 0:
        return declined("no data lines")
    if options.header and _repeats_header(fields, names):
        return declined("a data line equals the header (Spark's inference skips such lines)")
    if declared:
        columns: list[pa.Field | str] = list(known)
    else:
        problem = _header_problem(names, known)
        if problem:
            return declined(problem)
        types = {f.name: f for f in known}
        columns = [types.get(n, n) for n in names if n is not None]
    if len(columns) != fields.num_columns:
        return declined(f"{fields.num_columns} fields where the schema has {len(columns)}")
    arrays, out_fields = [], []
    for column, values in zip(columns, fields.columns, strict=True):
        if isinstance(column, str):  # a new column: typed as Spark infers it, converted on the way
            inferred = csv_types.infer(values)
            if isinstance(inferred, str):
                return declined(f"column {column}: {inferred}")
            column, converted = pa.field(column, inferred[0]), inferred[1]
        else:
            converted = csv_types.convert(values, column.type)
            if converted is None:
                return declined(f"column {column.name}: a value from_csv would not convert to {column.type}")
        arrays.append(converted)
        out_fields.append(pa.field(column.name, column.type))
    first = 2 if options.header else 1
    lineage = lineage_columns(file, etag, first, fields.num_rows)
    table = pa.Table.from_arrays([*lineage, *arrays], schema=pa.schema([*LINEAGE_FIELDS, *out_fields]))
    return Parsed(table, None, header)


def _re2(char: str) -> str:
    return f"\\x{{{ord(char):x}}}"


def _quotes_around_whole_fields(whole: pa.Array, options: CsvOptions) -> bool:
    d, q = _re2(options.delimiter), _re2(options.quote)
    field = f"(?:[^{d}{q}\\r]*|{q}[^{q}\\r]*{q})"
    pattern = f"^{field}(?:{d}{field})*\\r?$"
    lines = pc.list_flatten(pc.split_pattern(whole, "\n"))
    quoted = lines.filter(pc.match_substring(lines, options.quote))
    return bool(pc.all(pc.match_substring_regex(quoted, pattern)).as_py() is not False)


def _repeats_header(fields: pa.Table, names: list[str | None]) -> bool:
    """Whether a data line has the header's fields (also when quoted otherwise, which Spark, comparing
    lines as text, would keep: declining is safe). One pass over the first column, most often."""
    rows = fields
    for column, name in enumerate(names):
        values = rows.column(column)
        same = pc.is_null(values) if name is None else pc.fill_null(pc.equal(values, name), False)
        rows = rows.filter(same)
        if rows.num_rows == 0:
            return False
    return True


def _fields(data: bytes, first_line: bytes, options: CsvOptions) -> pa.Table:
    """Every line's fields as strings (null for an empty field, quoted or not), header line included.
    `data` must be valid UTF-8."""
    parse = pacsv.ParseOptions(
        delimiter=options.delimiter,
        quote_char=options.quote,
        double_quote=False,
        escape_char=False,
        newlines_in_values=False,
        ignore_empty_lines=False,
    )
    width = pacsv.read_csv(
        pa.py_buffer(first_line + b"\n"),
        read_options=pacsv.ReadOptions(autogenerate_column_names=True),
        parse_options=parse,
    ).num_columns
    names = [f"f{i}" for i in range(width)]
    return pacsv.read_csv(
        pa.py_buffer(data),
        read_options=pacsv.ReadOptions(column_names=names),
        parse_options=parse,
        convert_options=pacsv.ConvertOptions(
            column_types=dict.fromkeys(names, pa.string()),
            strings_can_be_null=True,
            quoted_strings_can_be_null=True,
            null_values=[""],
            check_utf8=False,  # the caller checked the whole buffer
        ),
    )


def _header_problem(names: list[str | None], known: pa.Schema) -> str | None:
    if any(n is None or not _SAFE_NAME.match(n) for n in names):
        return "a header name is empty, padded, or holds a dot, backtick or control character"
    if len({n.lower() for n in names if n}) != len(names) or _RESERVED & {n.lower() for n in names if n}:
        return "header names clash (case-insensitive duplicates or lineage names)"
    table = {n.lower(): n for n in known.names}
    if any(n is not None and table.get(n.lower(), n) != n for n in names):
        return "a header name differs from a table column only in case"
    return None
