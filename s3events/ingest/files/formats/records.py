"""Records that span lines, for the line path: a multi-line JSON file (one document, or a top-level array
of them), a CSV file with quoted newlines (`reader.options=multiLine=true`) and an XML file (one record
per `rowTag` element, `xml_format`). The object is read whole on the executor, cut into records, and each
record goes on as a "line" (LINE_SCHEMA) to the format's Spark parser (from_json, from_csv), so that
typing, schema evolution and error rows are the line path's own.

`_source_line`: a JSON array element's or XML record's 0-based index, 0 for a single JSON document, and
a CSV record's first line number. A file that cannot be cut into records (not UTF-8 decodable is not one
of them: undecodable bytes become U+FFFD, as Spark decodes) is one error row, all or nothing.
Pure functions but `read_records`; nothing here imports pyspark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from functools import partial

import pyarrow as pa

from s3events.infra.aws import AwsOptions
from s3events.ingest.files.formats import xml_format
from s3events.ingest.files.formats.whole_file import read_whole
from s3events.ingest.files.lineage import lineage_columns
from s3events.ingest.files.lines import CorruptData
from s3events.ingest.files.objects import LINE_SCHEMA, ObjectReadError
from s3events.ingest.model import FileRef

Split = Callable[[bytes], Iterator[tuple[int, str]]]
_WHITESPACE = re.compile(r"[ \t\r\n]*")  # JSON's whitespace
_BATCH_ROWS = 65536
_DECODER = json.JSONDecoder(parse_float=str, parse_int=str)  # only boundaries matter: no number built


def multi_line(options: Mapping[str, str] | None) -> bool:
    """Whether `multiLine=true` is among the reader options (Spark's option names are case-insensitive)."""
    value = {k.lower(): v for k, v in (options or {}).items()}.get("multiline", "false")
    return value.strip().lower() == "true"


def splitter(fmt: str, options: Mapping[str, str] | None) -> Split | None:
    """How the format's objects are cut into records, or None when a record is a line."""
    if fmt == "xml":
        return partial(xml_format.records, options=xml_format.XmlOptions.of(options))
    if not multi_line(options):
        return None
    if fmt == "json":
        return partial(_of_text, json_records)
    if fmt == "csv":
        lower = {k.lower(): v for k, v in (options or {}).items()}
        quote, escape = lower.get("quote", '"'), lower.get("escape", "\\")
        return partial(_of_text, partial(csv_records, quote=quote, escape=escape))
    return None


def _of_text(split: Callable[[str], Iterator[tuple[int, str]]], data: bytes) -> Iterator[tuple[int, str]]:
    """`split` over the bytes as Spark decodes them: UTF-8, a bad byte as U+FFFD, no byte order mark."""
    return split(data.decode("utf-8", errors="replace").removeprefix("\ufeff"))


def line_options(fmt: str, options: Mapping[str, str] | None) -> dict[str, str]:
    """The reader options the Spark parser of the records takes: without the ones that cut them."""
    own = {"multiline", *(xml_format.OPTIONS if fmt == "xml" else ())}
    return {k: v for k, v in (options or {}).items() if k.lower() not in own}


def json_records(text: str) -> Iterator[tuple[int, str]]:
    """Each element of a top-level array with its index, or the one document (index 0)."""
    start = _skip(text, 0)
    if start == len(text):
        return
    if text[start] != "[":
        end = _value_end(text, start, "the document")
        if _skip(text, end) != len(text):
            raise CorruptData(f"not valid JSON: text after the document at character {_skip(text, end)}")
        yield 0, text[start:end]
        return
    position, index = _skip(text, start + 1), 0
    if position < len(text) and text[position] == "]":
        position = _skip(text, position + 1)
    else:
        while True:
            end = _value_end(text, position, f"element {index}")
            yield index, text[position:end]
            index += 1
            position = _skip(text, end)
            if position < len(text) and text[position] == ",":
                position = _skip(text, position + 1)
                continue
            if position < len(text) and text[position] == "]":
                position = _skip(text, position + 1)
                break
            raise CorruptData(f"not valid JSON: ',' or ']' expected after element {index - 1}")
    if position != len(text):
        raise CorruptData(f"not valid JSON: text after the top-level array at character {position}")


def _skip(text: str, position: int) -> int:
    return _WHITESPACE.match(text, position).end()  # type: ignore[union-attr]  # `*` always matches


def _value_end(text: str, position: int, what: str) -> int:
    try:
        _, end = _DECODER.raw_decode(text, position)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise CorruptData(f"not valid JSON ({what}): {exc}") from exc
    return int(end)


def csv_records(text: str, *, quote: str = '"', escape: str = "\\") -> Iterator[tuple[int, str]]:
    """CSV records with their first line number: a line break inside quotes stays in its record (as
    Spark's multiLine reading keeps it: the value holds a \\n). A quote preceded by the escape
    character does not open or close a quoted field; a final unclosed quote runs to the end."""
    escaped = escape + quote
    pending: list[str] = []
    first, open_quote = 1, False
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final line end
    for number, line in enumerate(lines, start=1):
        line = line.removesuffix("\r")
        if not pending:
            first = number
        pending.append(line)
        quotes = line.count(quote) - (line.count(escaped) if escape != quote else 0)
        open_quote ^= quotes % 2 == 1
        if not open_quote:
            yield first, "\n".join(pending)
            pending = []
    if pending:
        yield first, "\n".join(pending)


def read_records(file: FileRef, aws: AwsOptions, *, split: Split) -> Iterator[pa.RecordBatch]:
    """The object's records as LINE_SCHEMA batches (one error row when it cannot be read or cut)."""
    try:
        data, etag = read_whole(file, aws)
    except ObjectReadError as exc:
        yield _batch(file, file.etag, [], error=exc.reason)
        return
    try:
        records = list(split(data))
    except CorruptData as exc:
        yield _batch(file, etag, [], error=exc.reason)
        return
    for start in range(0, len(records), _BATCH_ROWS):
        yield _batch(file, etag, records[start : start + _BATCH_ROWS])


def _batch(
    file: FileRef, etag: str | None, records: list[tuple[int, str]], error: str | None = None
) -> pa.RecordBatch:
    if error is not None:
        lineage = lineage_columns(file, etag, None, 1)
        values, errors = pa.nulls(1, pa.string()), pa.array([error], pa.string())
    else:
        lineage = lineage_columns(file, etag, 0, len(records))
        lineage[2] = pa.array([n for n, _ in records], pa.int64())
        values, errors = pa.array([r for _, r in records], pa.string()), pa.nulls(len(records), pa.string())
    return pa.RecordBatch.from_arrays([*lineage, values, errors], schema=LINE_SCHEMA)
