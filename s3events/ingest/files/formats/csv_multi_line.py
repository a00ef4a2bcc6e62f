"""How the CSV fast path splits a `multiLine=true` object: pyarrow's tokenizer with quoted newlines, where
it cuts the records the line path cuts (`records.csv_records`: a line break inside quotes stays in its
record, each line's final b"\\r" dropped) and its fields are the ones Spark's from_csv gives that record.

That is certain when, besides the single-line rules (UTF-8, no escape character, no b"\\r" but before
b"\\n"), every quote opens a field and the next one closes it (quotes pair up, and a quoted field holds
no quote: the line path would count a doubled one), no blank line stands outside quotes (the line path
skips it, pyarrow gives a row of nulls), and pyarrow's records are as many as the line ends outside
quotes cut. A record's
`_source_line` is its first line, as on the line path; a b"\\r\\n" inside quotes becomes b"\\n" there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from s3events.ingest.files.formats.base import Body, has_blank_lines
from s3events.ingest.files.formats.csv_fields import CsvOptions

_NEWLINE, _CARRIAGE_RETURN = ord("\n"), ord("\r")
_BLANK_LINE = re.compile(rb"(?:^|\n)[ \t\r]*(?=\n|$)")


@dataclass(frozen=True, slots=True)
class Quotes:
    """The offsets of the quotes that open quoted fields and of those that close them, in order."""

    opens: np.ndarray
    closes: np.ndarray

    def inside(self, offsets: np.ndarray) -> np.ndarray:
        """Which of `offsets` (sorted or not) lie between a quote that opens and the one that closes."""
        if not len(self.opens):
            return np.zeros(len(offsets), np.bool_)
        pair = np.searchsorted(self.opens, offsets, side="right") - 1
        held = np.where(pair >= 0, self.closes[np.maximum(pair, 0)], -1)
        return (pair >= 0) & (offsets < held)


def quotes_of(body: Body, options: CsvOptions) -> Quotes | str:
    """The quoted fields of the body, or why they are not all whole fields holding no quote."""
    octets = np.frombuffer(body.data, np.uint8, count=body.end)
    at = np.flatnonzero(octets == ord(options.quote))
    if len(at) % 2:
        return "a quote left open (the line path cuts the rest of the object as one record)"
    opens, closes = at[0::2], at[1::2]
    delimiter = ord(options.delimiter)
    before = octets[np.maximum(opens - 1, 0)]
    starts = (opens == 0) | (before == delimiter) | (before == _NEWLINE)
    after = octets[np.minimum(closes + 1, body.end - 1)]
    ends = (closes == body.end - 1) | (after == delimiter) | (after == _NEWLINE) | (after == _CARRIAGE_RETURN)
    if not (bool(np.all(starts)) and bool(np.all(ends))):
        return "quotes other than around whole fields"
    return Quotes(opens, closes)


def line_end_inside(body: Body, quotes: Quotes) -> bool:
    """Whether a quoted field holds a b"\\n" or a b"\\r" (a single-line file's quoted fields hold neither:
    the line path cuts such a line there)."""
    octets = np.frombuffer(body.data, np.uint8, count=body.end)
    ends = [np.flatnonzero(octets == _NEWLINE)]
    if b"\r" in body:
        ends.append(np.flatnonzero(octets == _CARRIAGE_RETURN))
    return any(bool(np.any(quotes.inside(at))) for at in ends)


def blank_line_outside_quotes(body: Body, quotes: Quotes) -> bool:
    """Whether an empty or whitespace-only line is a record of its own (not inside a quoted field)."""
    if not has_blank_lines(body):
        return False
    # A match starts at the line end before the blank line: inside quotes exactly when the line is.
    found = np.array([m.start() for m in _BLANK_LINE.finditer(body.data, 0, body.end)], np.int64)
    return bool(np.any(~quotes.inside(found)))


def first_record(body: Body, options: CsvOptions) -> bytes:
    """The object's first record (a header) as `records.csv_records` cuts it: lines up to the first whose
    quotes, escaped ones aside, leave none open; joined by b"\\n", each without its final b"\\r"."""
    quote, escaped = options.quote.encode(), (options.escape + options.quote).encode()
    lines, end, open_quote = [], -1, False
    while True:
        start, end = end + 1, body.find(b"\n", end + 1)
        line = body.data[start : body.end if end < 0 else end].removesuffix(b"\r")
        lines.append(line)
        open_quote ^= (line.count(quote) - line.count(escaped)) % 2 == 1
        if end < 0 or not open_quote:
            return b"\n".join(lines)


def record_lines(body: Body, quotes: Quotes, records: int) -> np.ndarray | str:
    """Each record's first line number (a header is the first record): a record ends at a line end
    outside quotes. Or why that count of records is not pyarrow's (which then cut them otherwise)."""
    octets = np.frombuffer(body.data, np.uint8, count=body.end)
    ends = np.flatnonzero(octets == _NEWLINE)
    ends = np.flatnonzero(~quotes.inside(ends))  # as indexes among the line ends: lines before, less one
    if len(ends) + 1 != records:
        return f"{records} records where the line path cuts {len(ends) + 1}"
    return np.concatenate([np.ones(1, np.int64), ends.astype(np.int64) + 2])


def without_carriage_returns(fields: pa.Table, body: Body, quotes: Quotes) -> pa.Table:
    """The values with each b"\\r\\n" inside quotes as b"\\n" (the line path drops a line's final b"\\r")."""
    octets = np.frombuffer(body.data, np.uint8, count=body.end)
    if not bool(np.any(quotes.inside(np.flatnonzero(octets == _CARRIAGE_RETURN)))):
        return fields
    for i, column in enumerate(fields.columns):
        if pc.any(pc.match_substring(column, "\r")).as_py():
            fields = fields.set_column(i, fields.field(i), pc.replace_substring(column, "\r\n", "\n"))
    return fields
