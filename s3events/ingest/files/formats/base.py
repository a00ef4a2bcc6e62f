"""What every format's fast parser shares: its result, its interface, and the whole-buffer checks.

A parser turns one object's decompressed bytes into lineage + data columns in one pass (pyarrow on the
executor), or returns the reason the line path must read the file instead. Each format has one, in its
module of this package; the task that fetches, parses and writes is `fast_task`'s.
Parsers are small frozen objects built on the driver and shipped to the tasks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from s3events.ingest.files.lineage import FIXED
from s3events.ingest.model import FileRef

if TYPE_CHECKING:
    from s3events.infra.aws import AwsOptions

BOM = b"\xef\xbb\xbf"
# Types whose pyarrow parse matches Spark's (from_json, from_csv); a table with others uses the line path.
PLAIN = {pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float64(), pa.bool_(), pa.string()}
_BLANK_INSIDE = r"\n[ \t\r]*\n"
_WHITESPACE = b" \t\r"
_NEWLINE, _CARRIAGE_RETURN = ord("\n"), ord("\r")


@dataclass(frozen=True, slots=True)
class ParsedFile:
    """A parsed object (lineage columns, then data columns), or why it must take the line path.

    `header` is the file's header line as text (CSV with a header), also when the file is declined:
    the line path names a batch's columns after one header, so the fast path must see them all.
    `parts` is the object's rows in parts instead of `table` (Parquet, row group by row group): reading
    them may still raise FileDeclined, and the task then drops every part of the object it had.
    A single-path format's parser (`SinglePathParser`) never declines: `failed` makes `reason` the
    file's one error row (no rows), and `errors` holds error rows of lines its rows leave out
    (LINE_ERROR_SCHEMA; filled as `parts` are read).
    """

    table: pa.Table | None
    reason: str | None = None
    header: str | None = None
    parts: Iterator[pa.Table] | None = None
    failed: bool = False
    errors: list[pa.Table] = field(default_factory=list)


# An error row before the post-parse stage adds `_ingested_at` (post_parse.ERROR_SCHEMA's other columns).
LINE_ERROR_SCHEMA = pa.schema(
    [
        pa.field("_source_file", pa.string()),
        pa.field("_source_etag", pa.string()),
        pa.field("_source_line", pa.int64()),
        pa.field("raw", pa.string()),
        pa.field("error", pa.string()),
        pa.field("_event_time", pa.timestamp("us", tz="UTC")),
    ]
)


class FileDeclined(Exception):
    """Raised by a `ParsedFile.parts` iterator: the object must take the line path after all."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class FileFailed(FileDeclined):
    """Raised by a single-path parser's `parts`: the whole file is one error row and gives no rows (a
    corrupt row group, a compressed stream that breaks). A FileDeclined to code that only declines."""


class FileParser(Protocol):
    """One format's fast parser. `hints` is shared by the files of one task (a parser may remember
    what it learnt from one file to parse the next one faster)."""

    def parse(
        self, data: bytes, file: FileRef, etag: str | None, hints: dict[str, pa.DataType]
    ) -> ParsedFile: ...

    @property
    def new_columns_sorted(self) -> bool:
        """Whether the line path orders new columns by name (Spark's JSON inference) rather than as the
        files give them (a CSV header)."""
        ...

    @property
    def known(self) -> pa.Schema:
        """The data columns whose types are fixed before any file is read."""
        ...

    @property
    def schema_from_every_file(self) -> bool:
        """True when the line path derives a batch's new columns from all its files at once in a way
        the fast path cannot split (CSV: one header names every file's columns by position): then a
        batch that adds columns takes the fast path only if every file does."""
        ...

    def keeps_type(self, t: pa.DataType) -> bool:
        """Whether a column type the task's files merged into is the one the line path would give."""
        ...


@runtime_checkable
class SinglePathParser(Protocol):
    """A parser of a format with no line path (text, Parquet): every file it is given ends as rows or
    error rows. `streamed` reads an object the task could not hold whole (larger than the in-memory
    limit, or unreadable: its error row) in bounded memory, straight from S3; `for_batch` gives the
    parser to read a batch again with when its tasks could not agree (types, spellings)."""

    @property
    def first_line(self) -> int:
        """The `_source_line` of a file's first row."""
        ...

    def streamed(self, file: FileRef, aws: AwsOptions) -> ParsedFile: ...

    def for_batch(
        self, files: tuple[FileRef, ...], existing: pa.Schema | None, aws: AwsOptions
    ) -> FileParser: ...


def parse_or_decline(
    parser: FileParser, data: bytes, file: FileRef, etag: str | None, hints: dict[str, pa.DataType]
) -> ParsedFile:
    """`parser.parse`, a pyarrow failure it did not foresee being a decline (the line path then reads the
    file and records its error rows) instead of a failed task, hence a batch that fails every retry:
    pyarrow 26's JSON reader builds an invalid list array from `[null, "a"]`, found only at validation."""
    try:
        return parser.parse(data, file, etag, hints)
    except pa.ArrowException as exc:  # a single-path format's file: its error row
        return ParsedFile(None, f"pyarrow: {exc}", failed=isinstance(parser, SinglePathParser))


@dataclass(frozen=True, slots=True)
class Body:
    """An object's content without its final newline (`data[:end]`), as a view of the fetched bytes:
    a slice of a multi-megabyte object would be a copy (measured: docs/architecture.md)."""

    data: bytes
    end: int

    @classmethod
    def of(cls, data: bytes) -> Body:
        return cls(data, len(data) - 1 if data.endswith(b"\n") else len(data))

    def __len__(self) -> int:
        return self.end

    def __contains__(self, sub: bytes) -> bool:
        return self.data.find(sub, 0, self.end) >= 0

    def find(self, sub: bytes, start: int = 0) -> int:
        return self.data.find(sub, start, self.end)

    def first_line(self) -> bytes:
        newline = self.find(b"\n")
        return self.data[: self.end if newline < 0 else newline]

    def last_line(self) -> bytes:
        return self.data[self.data.rfind(b"\n", 0, self.end) + 1 : self.end]

    def buffer(self) -> pa.Buffer:
        return pa.py_buffer(self.data).slice(0, self.end)


def _whole(body: Body) -> pa.Array:
    """The body as one binary value, without a copy."""
    offsets = pa.array([0, len(body)], pa.int64()).buffers()[1]
    return pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, body.buffer()])


def valid_utf8(body: Body) -> bool:
    """Whether the whole body is UTF-8, checked in Arrow's C++ kernel (no Python decode)."""
    try:
        text(body)
    except pa.ArrowInvalid:
        return False
    return True


def text(body: Body) -> pa.Array:
    """The body as one string value, without a copy (ArrowInvalid unless it is UTF-8)."""
    return _whole(body).cast(pa.large_string())


def has_blank_lines(body: Body) -> bool:
    """Whether the body has an empty or whitespace-only line."""
    if not body.first_line().strip(_WHITESPACE) or not body.last_line().strip(_WHITESPACE):
        return True
    # RE2 over the buffer: Python's `re` stops at every line end to try the pattern, slower
    # (measured: docs/architecture.md)
    return bool(pc.match_substring_regex(_whole(body), _BLANK_INSIDE)[0].as_py())


def lone_carriage_return(body: Body) -> bool:
    """Whether a b"\\r" appears other than right before a b"\\n" (the line path keeps it in the line;
    pyarrow's CSV reader would end a row there). A final one is the line end's, or the object's last."""
    if b"\r" not in body:  # a search stops at the first
        return False
    octets = _octets(body)
    return bool(np.any((octets[:-1] == _CARRIAGE_RETURN) & (octets[1:] != _NEWLINE)))


def line_count(body: Body) -> int:
    """Lines in the body, as the line path numbers them."""
    return int(np.count_nonzero(_octets(body) == _NEWLINE)) + 1


def _octets(body: Body) -> np.ndarray:
    """The body as a numpy array, without a copy: its comparisons beat bytes.count
    (measured: docs/architecture.md)."""
    return np.frombuffer(body.data, np.uint8, count=body.end)


def is_spark_like(t: pa.DataType) -> bool:
    """Whether `t` is already what Spark's inference would give (a top-level null is still open)."""
    return pa.types.is_null(t) or spark_like(t) == t


def spark_like(t: pa.DataType) -> pa.DataType | None:
    """The type Spark's JSON inference gives where pyarrow inferred `t`; None when there is none."""
    if pa.types.is_null(t) or pa.types.is_temporal(t):
        return pa.string()
    if pa.types.is_struct(t):
        fields = sorted((t.field(i) for i in range(t.num_fields)), key=lambda f: f.name)
        children = [(f.name, spark_like(f.type)) for f in fields]
        if not children or any(c is None for _, c in children):
            return None
        return pa.struct(children)
    if pa.types.is_list(t):
        item = spark_like(t.value_type)
        return None if item is None else pa.list_(item)
    return t if t in PLAIN else None


def known_columns(declared: pa.Schema | None, existing: pa.Schema | None) -> pa.Schema:
    """The data columns whose types are fixed before any file is read: the declared schema, or the
    table's columns without lineage."""
    if declared is not None:
        return declared
    return pa.schema([f for f in existing or [] if f.name not in FIXED])
