"""Read the S3 objects that events refer to, inside Spark executors: exactly the content the event names.

Every function here is a picklable top-level function over plain data (a FileRef, AwsOptions). They share
one boto3 client per executor process (`aws.client` caches it); nothing here imports pyspark or deltalake.

Exactness: GetObject carries `IfMatch=<etag>` (and `VersionId`), so a later overwrite shows up as 412
instead of silently feeding us other bytes. A connection that breaks mid-object is resumed with a
`Range` request under the same `IfMatch`, so the bytes before and after the break belong to one version.

Per-object conditions (deleted, overwritten, access denied, archived, transient errors that outlived the
retries) are data, not crashes: `read_lines` turns them into one error row, `open_object` and the
whole-file readers raise ObjectReadError; the caller routes them. Only conditions that no object can
get past (no credentials, an invalid key) raise FatalError.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import botocore.exceptions
import pyarrow as pa
import pyarrow.parquet as pq
import urllib3.exceptions

from s3events.errors import CredentialsRejected, S3EventsError, TransientError
from s3events.events.model import bare_etag
from s3events.infra import aws
from s3events.infra.aws import AwsOptions
from s3events.ingest.files.lineage import LINEAGE_FIELDS, lineage_columns
from s3events.ingest.files.lines import (
    DEFAULT_CHUNK_BYTES,
    DEFAULT_MAX_LINE_BYTES,
    CorruptData,
    codec_for_key,
    decompressed_chunks,
    split_lines,
)
from s3events.ingest.model import FileRef

LINE_SCHEMA = pa.schema([*LINEAGE_FIELDS, pa.field("value", pa.string()), pa.field("_error", pa.string())])

NOT_FOUND = "object not found (404): it was deleted before ingest"
CHANGED = "object changed since the event (etag mismatch); a later event covers the new content"
_DENIED = (
    "access denied (403): the reader may not read this object (IAM or bucket policy, KMS key), or it "
    "was deleted and the reader lacks s3:ListBucket (S3 then answers 403 instead of 404)"
)
_REASONS = {
    "NoSuchKey": NOT_FOUND,
    "NoSuchVersion": NOT_FOUND,
    "404": NOT_FOUND,
    "PreconditionFailed": CHANGED,
    "412": CHANGED,
    "AccessDenied": _DENIED,
    "403": _DENIED,
    "InvalidObjectState": "object is archived (InvalidObjectState): restore it before it can be ingested",
    "NoSuchBucket": "bucket does not exist (404)",
}
_STREAM_ERRORS = (botocore.exceptions.BotoCoreError, urllib3.exceptions.HTTPError, OSError)
IN_MEMORY_PARQUET_BYTES = 64 << 20


class ObjectReadError(S3EventsError):
    """One object cannot be read as the event describes it; other objects are unaffected."""

    def __init__(self, file_uri: str, reason: str) -> None:
        super().__init__(f"{file_uri}: {reason}")
        self.file_uri = file_uri
        self.reason = reason


class S3Object:
    """One object version opened with GetObject: sequential `read()` with resume, and ranged reads."""

    def __init__(self, file: FileRef, options: AwsOptions, *, attempts: int = 5) -> None:
        self.uri = file.uri
        self.etag = bare_etag(file.etag or "") or None
        self.size = 0
        self._file = file
        self._version = file.version_id if file.version_id not in (None, "", "null") else None
        self._attempts = attempts
        self._s3 = aws.client(options, "s3")  # the process's cached client (thread-safe)
        self._body: Any = None
        self._pos = 0
        self._closed = False
        self._retry(self._open)

    def read(self, size: int = -1, /) -> bytes:
        """Up to `size` bytes (all the rest when negative); b"" at the end."""
        return self._retry(self._read_once, size)

    def read_range(self, start: int, length: int) -> bytes:
        if length <= 0 or start >= self.size:
            return b""
        end = min(start + length, self.size) - 1
        return self._retry(self._read_range_once, start, end)

    @property
    def closed(self) -> bool:  # for pyarrow.PythonFile
        return self._closed

    def close(self) -> None:
        self._closed = True
        self._drop_body()

    def _drop_body(self) -> None:
        if self._body is not None:
            self._body.close()
            self._body = None

    def _retry(self, step: Any, *args: Any, renewed: bool = False) -> Any:
        try:
            return aws.retrying(self._attempts)(step)(*args)
        except TransientError as exc:
            raise ObjectReadError(self.uri, f"gave up after {self._attempts} attempts: {exc}") from exc
        except CredentialsRejected as exc:
            # The run loop's rule, judged on this process's own chain (aws.judged_on_executor). The same
            # credentials: the error carries that verdict to the driver, which stops (exit 3). Other ones:
            # this read runs again with them at once (a failed task would log its traceback); refused
            # again, the driver's run loop decides, with the verdict of that second rejection.
            judged = aws.judged_on_executor(exc)
            if renewed or not judged.renewed:
                raise judged from exc
            return self._retry(step, *args, renewed=True)

    def _open(self) -> None:
        response = self._get(f"bytes={self._pos}-" if self._pos else None)
        self._body = response["Body"]
        if self._pos == 0:
            self.size = int(response.get("ContentLength") or 0)
            self.etag = self.etag or bare_etag(str(response.get("ETag", ""))) or None

    def _read_once(self, size: int) -> bytes:
        if self._pos >= self.size:
            return b""
        if self._body is None:
            self._open()
        try:
            data: bytes = self._body.read(size if size >= 0 else None)
        except _STREAM_ERRORS as exc:
            self._drop_body()
            raise TransientError(f"reading {self.uri} at byte {self._pos}: {exc}") from exc
        if not data and size != 0:
            self._drop_body()
            raise TransientError(f"reading {self.uri}: the connection ended at byte {self._pos}")
        self._pos += len(data)
        return data

    def _read_range_once(self, start: int, end: int) -> bytes:
        body = self._get(f"bytes={start}-{end}")["Body"]
        try:
            data: bytes = body.read()
        except _STREAM_ERRORS as exc:
            raise TransientError(f"reading {self.uri} bytes {start}-{end}: {exc}") from exc
        finally:
            body.close()
        if len(data) != end - start + 1:
            raise TransientError(f"reading {self.uri}: got {len(data)} bytes of range {start}-{end}")
        return data

    def _get(self, byte_range: str | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"Bucket": self._file.bucket, "Key": self._file.key}
        if self.etag:
            kwargs["IfMatch"] = f'"{self.etag}"'
        if self._version:
            kwargs["VersionId"] = self._version
        if byte_range:
            kwargs["Range"] = byte_range
        try:
            return dict(self._s3.get_object(**kwargs))
        except botocore.exceptions.ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            if code in _REASONS:
                raise ObjectReadError(self.uri, _REASONS[code]) from exc
            classified = aws.classify(exc, action=f"reading {self.uri}")
            # Transient, or about who we are rather than the object (no other object would fare better).
            if isinstance(classified, TransientError | CredentialsRejected):
                raise classified from exc
            raise ObjectReadError(self.uri, f"{code}: {error.get('Message', '')}".strip()) from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise aws.classify(exc, action=f"reading {self.uri}") from exc


def open_object(file: FileRef, options: AwsOptions, *, attempts: int = 5) -> S3Object:
    """GetObject for exactly the event's version; raises ObjectReadError (per object) or FatalError."""
    return S3Object(file, options, attempts=attempts)


def read_lines(
    file: FileRef,
    options: AwsOptions,
    *,
    skip_header: bool = False,
    batch_rows: int = 65536,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    attempts: int = 5,
) -> Iterator[pa.RecordBatch]:
    """The object's lines as LINE_SCHEMA batches, streamed and decompressed (.gz/.gzip, .zst/.zstd).

    A file-level problem becomes one row with `_source_line` and `value` null and `_error` set. When the
    stream breaks after some lines were yielded (corrupt compressed data, the object overwritten while
    being resumed), that error row follows those lines: callers wanting all-or-nothing per file drop the
    file's rows when they see a file-level error row for it.
    """
    try:
        obj = open_object(file, options, attempts=attempts)
    except ObjectReadError as exc:
        yield _error_batch(file, file.etag, exc.reason)
        return
    etag = obj.etag
    try:
        chunks = decompressed_chunks(obj, codec_for_key(file.key), chunk_bytes)
        for block in split_lines(chunks, batch_rows=batch_rows, max_line_bytes=max_line_bytes):
            values, errors, first = block.values, block.errors, block.first_line
            if skip_header and first == 1:
                values, errors, first = values.slice(1), errors.slice(1) if errors else None, 2
            if len(values):
                yield _line_batch(file, etag, first, values, errors)
    except (ObjectReadError, CorruptData) as exc:
        yield _error_batch(file, etag, exc.reason)
    finally:
        obj.close()


def whole_source(obj: S3Object, codec: str | None, in_memory_bytes: int) -> io.BufferedIOBase:
    """A seekable file for whole-file readers: in memory when compressed or small, else ranged reads."""
    if codec is not None or obj.size <= in_memory_bytes:
        data = _decompressed(obj.read(), codec)
        if data is None:
            raise ObjectReadError(obj.uri, "compressed data is corrupt or larger than the in-memory limit")
        return io.BytesIO(data)
    obj.close()  # ranged reads from here on, 8 MiB a GET: a reader's small reads must not each be one
    return io.BufferedReader(_RangedFile(obj), buffer_size=8 << 20)


class CorruptParquetData(Exception):
    """A row group of a readable Parquet file that cannot be decoded."""


def parquet_batches(parquet: pq.ParquetFile, batch_rows: int) -> Iterator[tuple[int, pa.RecordBatch]]:
    """Each batch with the 0-based index of its first row (the `_source_line` of the Parquet paths);
    CorruptParquetData saying after which row when a row group cannot be decoded."""
    batches = parquet.iter_batches(batch_size=batch_rows)
    row = 0
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as exc:
            raise CorruptParquetData(f"corrupt Parquet data after row {row}: {exc}") from exc
        yield row, batch
        row += batch.num_rows


# -- whole objects (the fast path) ----------------------------------------------------------------------

MAX_OBJECT_BYTES = 128 << 20  # decompressed; larger objects stream through the line path


@dataclass(frozen=True, slots=True)
class Fetched:
    """An object's decompressed content and etag, or why it cannot take the fast path."""

    data: bytes | None
    etag: str | None = None
    reason: str | None = None


def fetch(file: FileRef, options: AwsOptions) -> Fetched:
    """GET exactly the event's object version (IfMatch) in one request and decompress it (gzip/zstd by
    extension). Thread-safe: tasks fetch the next objects while they parse the current one.

    Raises FatalError only for conditions no object gets past (credentials); everything else about
    the object (404, 412, corrupt gzip, too large, ...) is a reason, and the line path records it.
    """
    try:
        obj = open_object(file, options)
        try:
            if obj.size > MAX_OBJECT_BYTES:
                return Fetched(None, reason="larger than the in-memory limit")
            if file.size is not None and obj.size > file.size:
                # The version its event names cannot be larger than the event says: a forged or corrupt
                # event. Downloads ahead are budgeted by the stated sizes, so it is not read here.
                return Fetched(None, reason=f"{obj.size} bytes, more than its event states ({file.size})")
            raw = obj.read()
            etag = obj.etag
        finally:
            obj.close()
    except (ObjectReadError, TransientError) as exc:
        return Fetched(None, reason=str(exc))
    data = _decompressed(raw, codec_for_key(file.key))
    if data is None:
        return Fetched(None, reason="compressed data is corrupt or too large")
    return Fetched(data, etag)


def _decompressed(raw: bytes, codec: str | None) -> bytes | None:
    if codec is None:
        return raw
    try:
        data: bytes = pa.input_stream(pa.py_buffer(raw), compression=codec).read(MAX_OBJECT_BYTES + 1)
    except (OSError, pa.ArrowInvalid):
        return None
    return data if len(data) <= MAX_OBJECT_BYTES else None


class _RangedFile(io.RawIOBase):
    """A seekable read-only view of an S3Object for pyarrow; every read is one ranged GET."""

    def __init__(self, obj: S3Object) -> None:
        self._obj = obj
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._obj.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int = -1, /) -> bytes:
        length = self._obj.size - self._pos if size < 0 else size
        data = self._obj.read_range(self._pos, length)
        self._pos += len(data)
        return data

    def readinto(self, buffer: Any, /) -> int:  # for io.BufferedReader
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _line_batch(
    file: FileRef, etag: str | None, first: int, values: pa.Array, errors: pa.Array | None
) -> pa.RecordBatch:
    n = len(values)
    error_column = errors if errors is not None else pa.nulls(n, pa.string())
    return pa.RecordBatch.from_arrays(
        [*lineage_columns(file, etag, first, n), values, error_column], schema=LINE_SCHEMA
    )


def _error_batch(file: FileRef, etag: str | None, reason: str) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [*lineage_columns(file, etag, None, 1), pa.nulls(1, pa.string()), pa.array([reason], pa.string())],
        schema=LINE_SCHEMA,
    )
