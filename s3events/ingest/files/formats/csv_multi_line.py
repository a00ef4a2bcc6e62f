"""How the CSV fast path splits a `multiLine=true` object: pyarrow's tokenizer with quoted newlines, where
it cuts the records the line path cuts (`records.csv_records`: a line break inside quotes stays in its
record, each line's final b"\\r" dropped) and its fields are the ones Spark's from_csv gives that record.

That is certain when, besides the single-line rules (UTF-8, no escape character, no b"\\r" but before
b"\\n"), every quote opens a field and the next one closes it (quotes pair up, and a quoted field holds
no quote: the line path would count a doubled one), no blank line stands outside quotes (the line path
skips it, pyarrow gives a row of nulls), and pyarrow's records are as many as the line ends outside
quotes cut. A record's `_source_line` is its first line, as on the line path; a b"\\r\\n" inside quotes
becomes b"\\n" there.

Once quotes pair up so, an offset that is no quote lies inside a quoted field exactly when an odd number
of quotes stands before it: the body's quotes and line ends are found once (numpy over the bytes) and
each line end's parity read off one merge of the two sorted offset lists (`Records`).
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


def _octets(body: Body) -> np.ndarray:
    return np.frombuffer(body.data, np.uint8, count=body.end)


def paired_quotes(octets: np.ndarray, options: CsvOptions) -> np.ndarray | str:
    """The offsets of the body's quotes when they pair up around whole fields (each opens a field, the
    next closes it), or why they do not."""
    at = np.flatnonzero(octets == ord(options.quote))
    if len(at) % 2:
        return "a quote left open (the line path cuts the rest of the object as one record)"
    opens, closes = at[0::2], at[1::2]
    delimiter, end = ord(options.delimiter), len(octets)
    before = octets[np.maximum(opens - 1, 0)]
    starts = (opens == 0) | (before == delimiter) | (before == _NEWLINE)
    after = octets[np.minimum(closes + 1, end - 1)]
    ends = (closes == end - 1) | (after == delimiter) | (after == _NEWLINE) | (after == _CARRIAGE_RETURN)
    if not (bool(np.all(starts)) and bool(np.all(ends))):
        return "quotes other than around whole fields"
    return at


def outside_quotes(quotes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Which of `offsets` (sorted, none a quote's) stand after an even number of `quotes` (sorted, paired):
    outside quoted fields. Both lists tagged in their lowest bit and merged (a stable sort of two sorted
    runs is one linear merge), the quotes counted as they pass."""
    if not len(quotes):
        return np.ones(len(offsets), np.bool_)
    tagged = np.concatenate([offsets.astype(np.int64) << 1, (quotes.astype(np.int64) << 1) | 1])
    tagged.sort(kind="stable")
    is_quote = (tagged & 1).astype(np.int8)
    odd = np.bitwise_xor.accumulate(is_quote)  # quotes passed, mod 2 (an offset is no quote: its own 0)
    return odd[is_quote == 0] == 0


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
    at = paired_quotes(_octets(body), options)
    return at if isinstance(at, str) else Quotes(at[0::2], at[1::2])


def line_end_inside(body: Body, quotes: Quotes) -> bool:
    """Whether a quoted field holds a b"\\n" or a b"\\r" (a single-line file's quoted fields hold neither:
    the line path cuts such a line there)."""
    octets = _octets(body)
    ends = [np.flatnonzero(octets == _NEWLINE)]
    if b"\r" in body:
        ends.append(np.flatnonzero(octets == _CARRIAGE_RETURN))
    return any(bool(np.any(quotes.inside(at))) for at in ends)


@dataclass(frozen=True, slots=True)
class Records:
    """A multi-line body's paired quotes and where its records end: the line ends outside quotes."""

    quotes: np.ndarray  # offsets of every quote, paired (`paired_quotes`)
    ends: np.ndarray  # indexes, among the body's b"\\n", of those outside quotes

    @classmethod
    def of(cls, body: Body, options: CsvOptions) -> Records | str:
        """The body's records, or why its quotes are not all around whole fields holding no quote."""
        octets = _octets(body)
        quotes = paired_quotes(octets, options)
        if isinstance(quotes, str):
            return quotes
        line_ends = np.flatnonzero(octets == _NEWLINE)
        return cls(quotes, np.flatnonzero(outside_quotes(quotes, line_ends)))

    def blank_line_outside(self, body: Body) -> bool:
        """Whether an empty or whitespace-only line is a record of its own (not inside a quoted field)."""
        if not has_blank_lines(body):
            return False
        # A match starts at the line end before the blank line (or at 0): inside quotes when the line is.
        found = np.array([m.start() for m in _BLANK_LINE.finditer(body.data, 0, body.end)], np.int64)
        return bool(np.any(outside_quotes(self.quotes, found)))

    def first_lines(self, records: int) -> np.ndarray | str:
        """Each record's first line number (a header is the first record), or why `records` records (as
        pyarrow cut them) are not the line path's."""
        if len(self.ends) + 1 != records:
            return f"{records} records where the line path cuts {len(self.ends) + 1}"
        # the record after the k-th line end outside quotes starts on the line after it: k + 2
        return np.concatenate([np.ones(1, np.int64), self.ends.astype(np.int64) + 2])

    def without_carriage_returns(self, fields: pa.Table, body: Body) -> pa.Table:
        """The values with each b"\\r\\n" inside quotes as b"\\n" (the line path drops a line's final
        b"\\r")."""
        if b"\r" not in body:
            return fields
        returns = np.flatnonzero(_octets(body) == _CARRIAGE_RETURN)
        if bool(np.all(outside_quotes(self.quotes, returns))):
            return fields
        for i, column in enumerate(fields.columns):
            if pc.any(pc.match_substring(column, "\r")).as_py():
                fields = fields.set_column(i, fields.field(i), pc.replace_substring(column, "\r\n", "\n"))
        return fields


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
