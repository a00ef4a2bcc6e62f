"""A top-level JSON array as one element a line, cut by numpy over the bytes instead of a Python decode
of every element (`records.json_records`, which the line path cuts with and which this must equal).

Strings are told by their quotes (one after an odd run of backslashes is escaped), brackets and commas
outside them give each element's bounds: a comma where only the array is open ends an element. The
array's brackets become spaces, those commas line ends, and every other line break a space (outside
strings it is whitespace; inside one, JSON has none raw). Where that may not be what the Python cutter
gives — a document that is not an array, an empty array or element, text after the array, nesting
deeper than `_MAX_DEPTH`, a control character in a string, a byte beyond ASCII outside strings (a byte
order mark), not UTF-8 — the result
is None and the caller cuts with `records.json_records`. A malformed element is pyarrow's JSON reader's
to refuse, which it does for whatever Python's refuses, but for two values on one line (the JSON fast
parser declines a file with more rows than lines) and a byte order mark.
"""

from __future__ import annotations

import numpy as np

_QUOTE, _BACKSLASH, _COMMA = ord('"'), ord("\\"), ord(",")
_OPEN, _CLOSE = ord("{"), ord("}")  # '[' and ']' with bit 0x20 set
_SPACE, _NEWLINE, _RETURN, _TAB = ord(" "), ord("\n"), ord("\r"), ord("\t")
_WHITESPACE = b" \t\r\n"
_MAX_DEPTH = 64  # deeper, Python's decoder may hit its recursion limit where pyarrow's would not
_BOM = b"\xef\xbb\xbf"


def one_a_line(data: bytes) -> bytes | None:
    """The array's elements one a line, or None (see the module's docstring)."""
    data = data.removeprefix(_BOM)
    start = len(data) - len(data.lstrip(_WHITESPACE))
    end = len(data.rstrip(_WHITESPACE))
    if start >= end or data[start] != ord("[") or data[end - 1] != ord("]"):
        return None
    try:
        data.decode("utf-8")  # the Python cutter decodes a bad byte as U+FFFD
    except UnicodeDecodeError:
        return None
    octets = np.frombuffer(data, np.uint8)
    quotes = _unescaped_quotes(octets)
    if quotes is None:
        return None
    outside = _outside_strings(octets, quotes)
    breaks = (octets == _NEWLINE) | (octets == _RETURN)
    # Outside strings: no control character but whitespace, and nothing beyond ASCII (a byte order mark).
    # Inside: no control character (JSON has none raw, and a line break would be folded away).
    control = octets < _SPACE
    odd = np.where(outside, (control & ~breaks & (octets != _TAB)) | (octets >= 0x80), control)
    if bool(np.any(odd)):
        return None
    folded = octets | 0x20  # '[' as '{', ']' as '}': a comparison each instead of a set lookup
    marks = np.flatnonzero(((folded == _OPEN) | (folded == _CLOSE) | (octets == _COMMA)) & outside)
    bounds = _bounds(octets, marks, start, end)
    if bounds is None:
        return None
    commas, scalars = bounds
    lines = np.where(breaks, np.uint8(_SPACE), octets)
    lines[[start, end - 1]] = _SPACE
    lines[commas] = _NEWLINE
    out = lines.tobytes()
    edges = np.concatenate([[start], commas, [end - 1]])
    if any(not out[edges[i] + 1 : edges[i + 1]].strip() for i in scalars):  # an empty element
        return None
    return out


def _unescaped_quotes(octets: np.ndarray) -> np.ndarray | None:
    """The quotes that open or close strings (None when they do not pair up)."""
    quotes = np.flatnonzero(octets == _QUOTE)
    slashes = np.flatnonzero(octets == _BACKSLASH)
    if len(slashes) and len(quotes):
        before = np.searchsorted(slashes, quotes)  # backslashes before each quote
        last = slashes[np.maximum(before - 1, 0)]
        escaped = (before > 0) & (last == quotes - 1)
        if bool(np.any(escaped)):
            run_start = np.ones(len(slashes), np.bool_)
            run_start[1:] = slashes[1:] != slashes[:-1] + 1
            first = np.maximum.accumulate(np.where(run_start, np.arange(len(slashes)), 0))
            runs = before - first[np.maximum(before - 1, 0)]
            quotes = quotes[~(escaped & (runs % 2 == 1))]
    return None if len(quotes) % 2 else quotes


def _outside_strings(octets: np.ndarray, quotes: np.ndarray) -> np.ndarray:
    """Which bytes lie outside strings (a string's quotes count as inside)."""
    toggles = np.zeros(len(octets), np.uint8)
    toggles[quotes] = 1
    inside = np.bitwise_xor.accumulate(toggles).view(np.bool_)  # from an opening quote to before its close
    inside[quotes[1::2]] = True
    return ~inside


def _bounds(
    octets: np.ndarray, marks: np.ndarray, start: int, end: int
) -> tuple[np.ndarray, list[int]] | None:
    """The commas that end elements and the indexes of elements holding no bracket (scalars, or empty:
    the caller looks at those), given the brackets and commas outside strings; None if the array does
    not close last or nests too deep."""
    kinds = octets[marks]
    folded = kinds | 0x20
    step = np.where(folded == _OPEN, 1, np.where(folded == _CLOSE, -1, 0))
    depth = np.cumsum(step)  # after each mark: the array's '[' is 1, its ']' 0
    if len(marks) < 2 or marks[0] != start or marks[-1] != end - 1:
        return None
    if int(depth[:-1].min()) < 1 or int(depth[-1]) != 0 or int(depth.max()) > _MAX_DEPTH:
        return None
    commas = marks[(kinds == _COMMA) & (depth == 1)]
    # An element holds a bracket iff a mark other than its bounding commas lies between them.
    edges = np.concatenate([[start], commas, [end - 1]])
    inner = np.searchsorted(marks, edges[1:]) - np.searchsorted(marks, edges[:-1]) - 1
    return commas, np.flatnonzero(inner == 0).tolist()
