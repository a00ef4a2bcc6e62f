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

With `multiLine=true` a quoted field may hold line breaks: `csv_multi_line` states what else holds then.

`header` of the result is the file's first line (its first record), so that the fast path can check
that every file of a batch has the same one (the line path takes one file's header for the whole batch).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
from pyspark.sql import types as T

from s3events.ingest.files import rescue, rescue_rows
from s3events.ingest.files.formats import csv_multi_line, csv_types
from s3events.ingest.files.formats.base import (
    BOM,
    Body,
    ParsedFile,
    has_blank_lines,
    is_spark_like,
    known_columns,
    line_count,
    lone_carriage_return,
    text,
)
from s3events.ingest.files.formats.csv_fields import (
    MAX_CSV_COLUMNS,
    SPARK_DEFAULTS,
    CsvOptions,
    csv_fields,
    csv_options,
    fields_of,
    header_problem,
    repeats_header,
    too_wide,
)
from s3events.ingest.files.formats.csv_types import INFERRED, NewColumns
from s3events.ingest.files.line_parse import (
    arrow_schema,
    hinted_fields,
)
from s3events.ingest.files.lineage import LINEAGE, LINEAGE_FIELDS, lineage_columns
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec

SUPPORTED = csv_types.SUPPORTED  # column types whose from_csv conversion this parser reproduces exactly


def fast_parser(
    target: TargetSpec, *, declared: pa.Schema | None, existing: pa.Schema | None
) -> CsvParser | None:
    """The fast path's parser for the target, or None: reader options as `csv_options` takes them,
    columns of the types `fast_path_supports` names, and a header or a declared schema."""
    known = rescue.without(known_columns(declared, existing), target.rescued_column)
    if not fast_path_supports(known):
        return None
    options = csv_options(target.reader_options)
    if options is None or not (options.header or declared is not None):
        return None
    hinted = arrow_schema(T.StructType(hinted_fields(target))) if declared is None else pa.schema([])
    strings = not target.infer_types and declared is None
    parser = CsvParser(known, declared is not None, options, {f.name: f.type for f in hinted}, strings)
    parser = replace(parser, rescued=target.rescued_column)
    if rescue_rows.rescues_csv_fields(target, existing):  # new columns as text, to be rescued
        return replace(parser, hints={}, strings=True, rescue_new=True)
    return parser


def fast_path_supports(schema: pa.Schema) -> bool:
    """Whether every column has a type whose from_csv conversion the fast path reproduces."""
    return all(csv_types.supported(f.type) for f in schema)


@dataclass(frozen=True, slots=True)
class CsvParser:
    """`known`: the data columns with fixed types, in order (the declared schema, or the table's columns
    without lineage); with `declared`, they are all the columns and headers are not looked at."""

    known: pa.Schema
    declared: bool
    options: CsvOptions
    hints: dict[str, pa.DataType] | None = None  # schema.hints: a new column's type instead of inference
    strings: bool = False  # schema.infer.types=false: a new column unhinted is STRING
    rescued: str | None = None  # the rescued column: a header column of its name goes there
    rescue_new: bool = False  # schema.evolution=rescue: so do the columns the table lacks

    @property
    def schema_from_every_file(self) -> bool:
        return True  # one header names every file's columns, one inference types them

    @property
    def new_columns_sorted(self) -> bool:
        return False  # in header order

    def keeps_type(self, t: pa.DataType) -> bool:
        fixed = [*self.known.types, *(self.hints or {}).values()]  # e.g. a DECIMAL Spark never infers
        return is_spark_like(t) or t in fixed  # int32, int64, double, bool, string

    def parse(
        self, data: bytes, file: FileRef, etag: str | None, hints: dict[str, pa.DataType]
    ) -> ParsedFile:
        typing = NewColumns(self.hints or {}, self.strings)
        parsed = parse_csv(
            data, file, etag, known=self.known, declared=self.declared, options=self.options, new=typing
        )
        if self.rescued is None or parsed.table is None:
            return parsed
        if self.rescue_new:
            return replace(parsed, table=_rescued(parsed.table, self.known, self.rescued))
        if self.rescued in parsed.table.column_names:  # inferred, not as written: the line path's
            return ParsedFile(None, "a header column named as the rescued column", parsed.header)
        return parsed


def _rescued(table: pa.Table, known: pa.Schema, name: str) -> pa.Table:
    """The new columns (strings) moved into the rescued column `name`, in the header's order."""
    new = [n for n in table.column_names if n not in known.names and n not in LINEAGE]
    values = [table.column(n) for n in new]
    rescued = rescue.csv_columns(new, values, table.num_rows)
    return table.drop_columns(new).append_column(pa.field(name, pa.string()), rescued)


def parse_csv(
    data: bytes,
    file: FileRef,
    etag: str | None,
    *,
    known: pa.Schema,
    declared: bool,
    options: CsvOptions = SPARK_DEFAULTS,
    new: NewColumns = INFERRED,
) -> ParsedFile:
    """The (decompressed) content of `file` as lineage + data columns, or why the line path must do it."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    body = Body.of(data)
    split = _split(data, body, options, declared)
    if isinstance(split, ParsedFile):
        return split
    fields, starts, header = split
    names: list[str | None] = []
    if options.header:
        names = list(fields.slice(0, 1).to_pylist()[0].values())
        fields, starts = fields.slice(1), starts[1:]
    typed = _typed(fields, names, known, declared, options, new)
    if isinstance(typed, str):
        return ParsedFile(None, typed, header)
    arrays, out_fields = typed
    lineage = lineage_columns(file, etag, None, fields.num_rows)
    lineage[LINEAGE.index("_source_line")] = pa.array(starts)  # a record's first line
    table = pa.Table.from_arrays([*lineage, *arrays], schema=pa.schema([*LINEAGE_FIELDS, *out_fields]))
    return ParsedFile(table, None, header)


def _split(
    data: bytes, body: Body, options: CsvOptions, declared: bool
) -> tuple[pa.Table, np.ndarray, str | None] | ParsedFile:
    """Every record's fields (the header's first), each record's first line number and the header as
    the line path reads it; or a declined ParsedFile."""
    cut = csv_multi_line.Records.of(body, options) if options.multi_line and body else None
    if options.multi_line:
        first_line = csv_multi_line.first_record(body, options)
    else:
        first_line = body.first_line().removesuffix(b"\r")
    # A first line that is blank to the line path (it trims spaces) is no header there: it is skipped.
    named = options.header and bool(first_line.strip(b" "))
    header = first_line.decode("utf-8", errors="replace") if named else None
    problem = cut if isinstance(cut, str) else _buffer_problem(body, header, options, declared)
    if problem is None and isinstance(cut, csv_multi_line.Records):
        problem = "a blank line" if cut.blank_line_outside(body) else None
    if problem is not None:
        return ParsedFile(None, problem, header)
    try:
        fields = fields_of(data, first_line, options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        return ParsedFile(None, f"pyarrow: {exc}", header)
    if not options.multi_line:
        lines = line_count(body)
        if fields.num_rows != lines:
            return ParsedFile(None, f"{fields.num_rows} records on {lines} lines", header)
        return fields, np.arange(1, lines + 1, dtype=np.int64), header
    assert isinstance(cut, csv_multi_line.Records)  # an empty body was declined
    starts = cut.first_lines(fields.num_rows)
    if isinstance(starts, str):
        return ParsedFile(None, starts, header)
    return cut.without_carriage_returns(fields, body), starts, header


def _buffer_problem(body: Body, header: str | None, options: CsvOptions, declared: bool) -> str | None:
    """Why the whole buffer cannot be split into fields as the line path splits it, if it cannot."""
    if not body:
        return "empty"
    try:
        text(body)  # UTF-8 throughout: the reader is told not to check it again
    except pa.ArrowInvalid:
        return "not valid UTF-8"
    if not options.multi_line and has_blank_lines(body):  # multiLine: blank lines outside quotes
        return "has blank lines"
    if lone_carriage_return(body):
        return "has a carriage return inside a line"
    if options.escape.encode() in body:
        return f"holds the escape character {options.escape!r}"
    if not options.multi_line and options.quote.encode() in body:  # multiLine: `_split` pairs them
        quotes = csv_multi_line.quotes_of(body, options)
        if isinstance(quotes, str) or csv_multi_line.line_end_inside(body, quotes):
            return "quotes other than around whole fields"
    width = csv_fields(header, options.delimiter, options.quote) if header is not None else 0
    if width > MAX_CSV_COLUMNS:
        return too_wide(width)  # the line path makes it one error row
    if not options.header and not declared:
        return "no header and no declared schema"
    return None


def _typed(
    fields: pa.Table,
    names: list[str | None],
    known: pa.Schema,
    declared: bool,
    options: CsvOptions,
    new: NewColumns = INFERRED,
) -> tuple[list[pa.ChunkedArray], list[pa.Field]] | str:
    """The data lines' fields as from_csv converts them, with their columns; or why they may not be."""
    if fields.num_rows == 0:
        return "no data lines"
    if options.header and repeats_header(fields, names):
        return "a data line equals the header (Spark's inference skips such lines)"
    if declared:
        columns: list[pa.Field | str] = list(known)
    else:
        problem = header_problem(names, known)
        if problem:
            return problem
        types = {f.name: f for f in known}
        columns = [types.get(n, n) for n in names if n is not None]
    if len(columns) != fields.num_columns:
        return f"{fields.num_columns} fields where the schema has {len(columns)}"
    arrays, out_fields = [], []
    for column, values in zip(columns, fields.columns, strict=True):
        if isinstance(column, str):  # a new column: typed as the line path types it, converted on the way
            typed = new.typed(column, values)
            if isinstance(typed, str):
                return typed
            column, converted = typed
        else:
            converted = csv_types.convert(values, column.type)
            if converted is None:
                return f"column {column.name}: a value from_csv would not convert to {column.type}"
        arrays.append(converted)
        out_fields.append(pa.field(column.name, column.type))
    return arrays, out_fields
