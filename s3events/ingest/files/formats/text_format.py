"""Text objects (one row per line): one path, the fast path's task, for every file.

A file's rows are its lines as `split_lines` cuts them (a trailing b"\\r" and a leading byte order mark
dropped, empty lines kept) with their line numbers; a line that is not UTF-8 is an error row (the line
decoded with replacement characters, and why) and the file's other lines land. An object the task cannot
hold whole (larger than the in-memory limit) is streamed from S3 by `objects.read_lines`, line block by
line block, with the line path's longest-line bound; an object that cannot be read (gone, changed,
denied, corrupt compressed data) is one error row and lands no rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from s3events.infra.aws import AwsOptions
from s3events.ingest.files.formats.base import LINE_ERROR_SCHEMA, FileFailed, ParsedFile, is_spark_like
from s3events.ingest.files.lineage import LINEAGE_FIELDS, lineage_columns
from s3events.ingest.files.lines import LineBlock, split_lines
from s3events.ingest.files.objects import read_lines
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec

VALUE = pa.field("value", pa.string())
_KNOWN = pa.schema([VALUE])
_ROWS = pa.schema([*LINEAGE_FIELDS, VALUE])
_ALL_AT_ONCE = 1 << 62  # one block: the object is in memory already


def fast_parser(target: TargetSpec, *, declared: pa.Schema | None, existing: pa.Schema | None) -> TextParser:
    """The parser: always (text reads no options and no schema)."""
    return TextParser()


@dataclass(frozen=True, slots=True)
class TextParser:
    known: pa.Schema = field(default=_KNOWN)

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

    @property
    def first_line(self) -> int:
        return 1

    def for_batch(
        self, files: tuple[FileRef, ...], existing: pa.Schema | None, aws: AwsOptions
    ) -> TextParser:
        return self  # every file is read alike: nothing to learn from the batch

    def streamed(self, file: FileRef, aws: AwsOptions) -> ParsedFile:
        errors: list[pa.Table] = []
        return ParsedFile(None, parts=_streamed_parts(file, aws, errors), errors=errors)


def parse_text(data: bytes, file: FileRef, etag: str | None) -> ParsedFile:
    """The (decompressed) content of `file` as lineage + `value`, and error rows of lines not UTF-8."""
    tables, errors = [_ROWS.empty_table()], []
    if data:  # an empty object has no lines (not one empty line)
        for block in split_lines([data], batch_rows=_ALL_AT_ONCE, max_line_bytes=len(data) + 1):
            rows, bad = _block_rows(block, file, etag)
            tables.append(rows)
            errors.extend(bad)
    return ParsedFile(pa.concat_tables(tables), errors=errors)


def _block_rows(block: LineBlock, file: FileRef, etag: str | None) -> tuple[pa.Table, list[pa.Table]]:
    """A block's lines as rows, and the error rows of those that are not UTF-8."""
    lineage = lineage_columns(file, etag, block.first_line, len(block.values))
    rows = pa.Table.from_arrays([*lineage, block.values], schema=_ROWS)
    if block.errors is None:
        return rows, []
    bad = pc.is_valid(block.errors)
    columns = [*lineage[:3], block.values, block.errors, lineage[3]]
    errors = pa.Table.from_arrays(columns, schema=LINE_ERROR_SCHEMA)
    return rows.filter(pc.invert(bad)), [errors.filter(bad)]


def _streamed_parts(file: FileRef, aws: AwsOptions, errors: list[pa.Table]) -> Iterator[pa.Table]:
    """`read_lines`' batches as rows (bad lines into `errors`); FileFailed at a whole-file problem."""
    for batch in read_lines(file, aws):
        whole_file = pc.is_null(batch.column("_source_line"))
        if pc.any(whole_file).as_py():
            raise FileFailed(batch.filter(whole_file).column("_error")[0].as_py())
        first = batch.column("_source_line")[0].as_py()
        etag = batch.column("_source_etag")[0].as_py()
        block = LineBlock(first, batch.column("value"), batch.column("_error"))
        rows, bad = _block_rows(block, file, etag)
        errors.extend(bad)
        yield rows
