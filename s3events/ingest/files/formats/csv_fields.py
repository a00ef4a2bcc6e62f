"""How a CSV object is split into fields on the fast path, with the reader options it takes: pyarrow's
tokenizer where it agrees with Spark's (univocity), and the checks that tell where it does."""

from __future__ import annotations

import contextlib
import csv
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from s3events.ingest.files.lineage import LINEAGE_FIELDS

_RESERVED = {f.name.lower() for f in LINEAGE_FIELDS} | {"_ingested_at", "_corrupt_record"}
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
    multi_line: bool = False  # multiLine=true: a quoted field may hold line breaks (`csv_multi_line`)


SPARK_DEFAULTS = CsvOptions()


def csv_options(reader_options: Mapping[str, str] | None) -> CsvOptions | None:
    """The CSV options from a target's reader options, or None when one is set that the fast path does
    not reproduce (then every file of the target takes the line path). Keys as the line path reads them:
    `header` (true unless "false"), `sep` or `delimiter`, `quote`, `escape`, each one character, and
    `multiLine` in any case (`records.multi_line`)."""
    options = dict(reader_options or {})
    multi_line = [options.pop(k).strip().lower() == "true" for k in list(options) if k.lower() == "multiline"]
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
        multi_line=any(multi_line),
    )
    if len({parsed.delimiter, parsed.quote, parsed.escape}) != 3:
        return None
    return parsed


def repeats_header(fields: pa.Table, names: list[str | None]) -> bool:
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


def fields_of(data: bytes, first_line: bytes, options: CsvOptions) -> pa.Table:
    """Every record's fields as strings (null for an empty field, quoted or not), header included: a
    record is a line, or with `multi_line` may hold line breaks inside quotes. `data` must be UTF-8.
    `first_line` is the first record: its fields are the columns."""
    parse = pacsv.ParseOptions(
        delimiter=options.delimiter,
        quote_char=options.quote,
        double_quote=False,
        escape_char=False,
        newlines_in_values=options.multi_line,
        ignore_empty_lines=False,
    )
    # One read: the first record sets the width and the names f0, f1, ...; every name a field of it
    # could have is typed string (names past its width are ignored), so nothing needs reading it first.
    names = [f"f{i}" for i in range(first_line.count(options.delimiter.encode()) + 1)]
    convert = pacsv.ConvertOptions(
        column_types=dict.fromkeys(names, pa.string()),
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
        null_values=[""],
        check_utf8=False,  # the caller checked the whole buffer
    )
    # multiLine: on this thread. pyarrow's threaded reader must find each block's end by lexing quotes
    # first; with quoted newlines that costs more CPU than it spreads (docs/design/fast-path.md)
    read = partial(
        pacsv.read_csv,
        read_options=pacsv.ReadOptions(autogenerate_column_names=True, use_threads=not options.multi_line),
        parse_options=parse,
        convert_options=convert,
    )
    try:
        fields = read(pa.py_buffer(data))
    except pa.ArrowInvalid:
        if data.endswith(b"\n"):
            raise
        # pyarrow counts the columns of a first record only once a line end closes it: a final one
        # adds no record
        fields = read(pa.py_buffer(data + b"\n"))
    if fields.num_columns > len(names):  # pyarrow's first record is not `first_line`
        raise pa.ArrowInvalid(
            f"{fields.num_columns} fields in the first record, {len(names)} at most expected"
        )
    return fields


def header_problem(names: list[str | None], known: pa.Schema) -> str | None:
    if any(n is None or not _SAFE_NAME.match(n) for n in names):
        return "a header name is empty, padded, or holds a dot, backtick or control character"
    if len({n.lower() for n in names if n}) != len(names) or _RESERVED & {n.lower() for n in names if n}:
        return "header names clash (case-insensitive duplicates or lineage names)"
    table = {n.lower(): n for n in known.names}
    if any(n is not None and table.get(n.lower(), n) != n for n in names):
        return "a header name differs from a table column only in case"
    return None
