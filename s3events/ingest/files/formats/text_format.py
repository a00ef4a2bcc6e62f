"""Text objects (one row per line) parsed whole inside Spark executors: the text fast path's parser.

The line path's rows of a text file are its lines as `split_lines` cuts them (a trailing b"\\r" and a
leading byte order mark dropped, empty lines kept) with their line numbers. This parser runs that same
function over the whole object, so the values are the line path's by construction; what it leaves to the
line path is a file with a line that is not UTF-8 (an error row there) and an empty file (no rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame

from s3events.ingest.files.formats.base import ParsedFile, is_spark_like
from s3events.ingest.files.lineage import LINEAGE, LINEAGE_FIELDS, lineage_columns
from s3events.ingest.files.lines import split_lines
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec

VALUE = pa.field("value", pa.string())
_KNOWN = pa.schema([VALUE])
_ALL_AT_ONCE = 1 << 62  # one block: the object is in memory already


def fast_parser(target: TargetSpec, *, declared: pa.Schema | None, existing: pa.Schema | None) -> TextParser:
    """The fast path's parser: always (the line path reads no options and no schema for text)."""
    return TextParser()


@dataclass(frozen=True, slots=True)
class TextParser:
    known: pa.Schema = _KNOWN

    @property
    def schema_from_every_file(self) -> bool:
        return False  # one column, always a string

    @property
    def new_columns_sorted(self) -> bool:
        return False  # none: `value` is known

    def keeps_type(self, t: pa.DataType) -> bool:
        return is_spark_like(t)  # strings

    def parse(
        self, data: bytes, file: FileRef, etag: str | None, hints: dict[str, pa.DataType]
    ) -> ParsedFile:
        return parse_text(data, file, etag)


def parse_text(data: bytes, file: FileRef, etag: str | None) -> ParsedFile:
    """The (decompressed) content of `file` as lineage + `value`, or why the line path must do it."""
    if not data:
        return ParsedFile(None, "empty")
    values = []
    for block in split_lines([data], batch_rows=_ALL_AT_ONCE, max_line_bytes=len(data) + 1):
        if block.errors is not None:
            return ParsedFile(None, "a line is not valid UTF-8")
        values.append(block.values)
    column = pa.concat_arrays(values) if values else pa.array([], pa.string())
    lineage = lineage_columns(file, etag, 1, len(column))
    return ParsedFile(pa.Table.from_arrays([*lineage, column], schema=pa.schema([*LINEAGE_FIELDS, VALUE])))


def parse_lines(lines: DataFrame) -> DataFrame:
    """The line path's rows of a text file: its lines as they are."""
    return lines.select(*LINEAGE, "value")
