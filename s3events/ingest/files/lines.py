"""Decompression and line splitting for text objects: pure functions over byte chunks, no AWS, no Spark.

Runs inside Spark executors. Splitting and UTF-8 validation happen in Arrow's C++ kernels; Python only
touches a batch line by line when that batch holds an invalid UTF-8 line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

DEFAULT_CHUNK_BYTES = 16 << 20
# The longest line the line path takes; a longer one makes its file one error row saying so. Spark holds
# each line as one string in cached columnar batches: a much longer line can run the JVM out of heap
# (measured: docs/architecture.md, "Measurements behind the code").
DEFAULT_MAX_LINE_BYTES = 32 << 20

# Key suffix (lower-cased) -> Arrow codec name. Both codecs stream through pyarrow's C++ decompressors.
_CODECS = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}
_BOM = "\ufeff"


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class CorruptData(Exception):
    """The bytes cannot be turned into lines: a broken compressed stream or an over-long line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class LineBlock:
    """Consecutive lines of one file: `values` (string), `errors` (string, null when fine) or None."""

    first_line: int  # 1-based file line number of values[0]
    values: pa.Array
    errors: pa.Array | None


def codec_for_key(key: str) -> str | None:
    """'gzip', 'zstd' or None (plain), from the key's extension."""
    lower = key.lower()
    return next((codec for suffix, codec in _CODECS.items() if lower.endswith(suffix)), None)


def decompressed_chunks(raw: Readable, codec: str | None, chunk_bytes: int) -> Iterator[bytes]:
    """The object's content in chunks of at most `chunk_bytes`, decompressed when `codec` is set.

    Errors raised by `raw.read` pass through unchanged; a broken compressed stream raises CorruptData.
    """
    if codec is None:
        while chunk := raw.read(chunk_bytes):
            yield chunk
        return
    stream = pa.CompressedInputStream(pa.PythonFile(raw, mode="r"), codec)
    while True:
        try:
            chunk = stream.read(chunk_bytes)
        except (OSError, pa.ArrowInvalid) as exc:  # Arrow's IOError: inflate failed, truncated stream
            raise CorruptData(f"corrupt {codec} data: {exc}") from exc
        if not chunk:
            return
        yield chunk


def split_lines(
    chunks: Iterable[bytes], *, batch_rows: int, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[LineBlock]:
    """Lines of the concatenated chunks, in blocks of at most `batch_rows`, with exact line numbers.

    Lines end at b"\\n"; one trailing b"\\r" is stripped. A final line without a newline still counts,
    a trailing newline adds no empty line, empty lines inside are kept. A UTF-8 byte order mark at the
    start of the file is dropped. Raises CorruptData when a line exceeds `max_line_bytes`.
    """
    line_no = 1
    pending: list[bytes] = []  # the start of a line that continues in a later chunk
    pending_size = 0
    for chunk in chunks:
        cut = chunk.rfind(b"\n")
        if cut < 0:
            pending.append(chunk)
            pending_size += len(chunk)
            if pending_size > max_line_bytes:
                raise CorruptData(f"line {line_no} is longer than {max_line_bytes} bytes")
            continue
        block = b"".join([*pending, chunk[: cut + 1]]) if pending else chunk[: cut + 1]
        pending = [chunk[cut + 1 :]] if cut + 1 < len(chunk) else []
        pending_size = len(pending[0]) if pending else 0
        for out in _blocks(block, line_no, batch_rows, terminated=True):
            line_no = out.first_line + len(out.values)
            yield out
    if pending:
        yield from _blocks(b"".join(pending), line_no, batch_rows, terminated=False)


def _blocks(data: bytes, first_line: int, batch_rows: int, *, terminated: bool) -> Iterator[LineBlock]:
    raw = pa.Array.from_buffers(
        pa.large_binary(), 1, [None, pa.array([0, len(data)], pa.int64()).buffers()[1], pa.py_buffer(data)]
    )
    lines = pc.split_pattern(raw, "\n").flatten()
    if terminated:  # the text after the final newline is not a line
        lines = lines.slice(0, len(lines) - 1)
    if b"\r" in data:
        lines = pc.if_else(pc.ends_with(lines, "\r"), pc.binary_slice(lines, 0, -1), lines)
    lines = lines.cast(pa.binary())
    for start in range(0, len(lines), batch_rows):
        part = lines.slice(start, batch_rows)
        number = first_line + start
        try:
            values, errors = part.cast(pa.string()), None
        except pa.ArrowInvalid:  # some line is not UTF-8: look at this batch line by line
            values, errors = _decode_each(part)
        if number == 1 and len(values) and values[0].as_py().startswith(_BOM):
            values = pa.concat_arrays([pa.array([values[0].as_py()[1:]], pa.string()), values.slice(1)])
        yield LineBlock(number, values, errors)


def _decode_each(part: pa.Array) -> tuple[pa.Array, pa.Array]:
    values: list[str] = []
    errors: list[str | None] = []
    for raw in part.to_pylist():
        try:
            values.append(raw.decode("utf-8"))
            errors.append(None)
        except UnicodeDecodeError as exc:
            values.append(raw.decode("utf-8", errors="replace"))
            errors.append(f"line is not valid UTF-8 ({exc.reason} at byte {exc.start})")
    return pa.array(values, pa.string()), pa.array(errors, pa.string())
