"""What every fast-path parser shares: its result, its interface, and the whole-buffer checks.

A parser turns one object's decompressed bytes into lineage + data columns in one pass (pyarrow on the
executor), or returns the reason the line path must read the file instead. Each format has one
(`fast_json`, `fast_csv`, `fast_text`, `fast_parquet`); the task that fetches, parses and writes is
`fast_path`'s.
Parsers are small frozen objects built on the driver and shipped to the tasks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from s3events.ingest.model import FileRef

BOM = b"\xef\xbb\xbf"
_BLANK_INSIDE = r"\n[ \t\r]*\n"
_WHITESPACE = b" \t\r"


@dataclass(frozen=True, slots=True)
class Parsed:
    """A parsed object (lineage columns, then data columns), or why it must take the line path.

    `header` is the file's header line as text (CSV with a header), also when the file is declined:
    the line path names a batch's columns after one header, so the fast path must see them all.
    `parts` is the object's rows in parts instead of `table` (Parquet, row group by row group): reading
    them may still raise FileDeclined, and the task then drops every part of the object it had.
    """

    table: pa.Table | None
    reason: str | None = None
    header: str | None = None
    parts: Iterator[pa.Table] | None = None


class FileDeclined(Exception):
    """Raised by a `Parsed.parts` iterator: the object must take the line path after all."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class FileParser(Protocol):
    """One format's fast parser. `hints` is shared by the files of one task (a parser may remember
    what it learnt from one file to parse the next one faster)."""

    def parse(
        self, data: bytes, file: FileRef, etag: str | None, hints: dict[str, pa.DataType]
    ) -> Parsed: ...

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


def _whole(body: bytes) -> pa.Array:
    """The buffer as one binary value, without a copy."""
    offsets = pa.array([0, len(body)], pa.int64()).buffers()[1]
    return pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(body)])


def valid_utf8(body: bytes) -> bool:
    """Whether the whole buffer is UTF-8, checked in Arrow's C++ kernel (no Python decode)."""
    try:
        _whole(body).cast(pa.large_string())
    except pa.ArrowInvalid:
        return False
    return True


def has_blank_lines(body: bytes) -> bool:
    """Whether `body` (without its final newline) has an empty or whitespace-only line."""
    newline = body.find(b"\n")
    first, last = body if newline < 0 else body[:newline], body[body.rfind(b"\n") + 1 :]
    if not first.strip(_WHITESPACE) or not last.strip(_WHITESPACE):
        return True
    # RE2 over the buffer: Python's `re` stops at every line end to try the pattern, 7x slower
    return bool(pc.match_substring_regex(_whole(body), _BLANK_INSIDE)[0].as_py())


def lone_carriage_return(body: bytes) -> bool:
    """Whether a b"\\r" appears other than right before a b"\\n" (the line path keeps it in the line;
    pyarrow's CSV reader would end a row there)."""
    count = body.count(b"\r")
    return count > 0 and count != body.count(b"\r\n") + (1 if body.endswith(b"\r") else 0)


def line_count(body: bytes) -> int:
    """Lines in `body` (without its final newline), as the line path numbers them."""
    return body.count(b"\n") + 1
