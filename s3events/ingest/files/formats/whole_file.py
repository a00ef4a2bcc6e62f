"""Formats read a whole object at a time into Arrow batches on the executors (Avro, ORC, binary):
what the Spark path (`whole_spark.read_on_spark`) needs of each, and the binary format's reader.

Each reader is a pair of picklable functions: `schema(file, aws)`, the columns the object gives (probed
first, cheaply, so the batch's schemas are unified before any rows are read), and `rows(file, aws)`, its
batches with lineage columns appended (`_source_line` = the row's 0-based index in the object). Both raise
ObjectReadError for anything wrong with one object: it becomes that object's error row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

import pyarrow as pa

from s3events.infra.aws import AwsOptions
from s3events.ingest.files.lineage import LINEAGE_FIELDS, lineage_columns
from s3events.ingest.files.lines import codec_for_key
from s3events.ingest.files.objects import MAX_OBJECT_BYTES, ObjectReadError, open_object, whole_source
from s3events.ingest.model import FileRef

Schema = Callable[[FileRef, AwsOptions], pa.Schema | None]
Rows = Callable[[FileRef, AwsOptions], Iterator[pa.RecordBatch]]


@dataclass(frozen=True, slots=True)
class WholeFileReader:
    """How the Spark path reads one whole-file format."""

    schema: Schema
    rows: Rows


def with_lineage(batch: pa.RecordBatch, file: FileRef, etag: str | None, first_row: int) -> pa.RecordBatch:
    """`batch` with the lineage columns appended (after its own: `whole_spark` selects them by name)."""
    clash = sorted(set(batch.schema.names) & {f.name for f in LINEAGE_FIELDS})
    if clash:
        raise ObjectReadError(file.uri, f"the file already has lineage column(s) {', '.join(clash)}")
    lineage = lineage_columns(file, etag, first_row, batch.num_rows)
    schema = pa.schema([*batch.schema, *LINEAGE_FIELDS])
    return pa.RecordBatch.from_arrays([*batch.columns, *lineage], schema=schema)


def read_whole(file: FileRef, aws: AwsOptions) -> tuple[bytes, str | None]:
    """The object's bytes (decompressed by its key's extension) and etag, at most MAX_OBJECT_BYTES:
    for formats whose records are found only by reading the whole object (multi-line JSON, XML)."""
    obj = open_object(file, aws)
    try:
        if obj.size > MAX_OBJECT_BYTES:
            raise ObjectReadError(
                file.uri, f"{obj.size} bytes: larger than {MAX_OBJECT_BYTES} bytes, the most read whole"
            )
        return whole_source(obj, codec_for_key(file.key), MAX_OBJECT_BYTES).read(), obj.etag
    finally:
        obj.close()


def schema_with_lineage(data: pa.Schema) -> pa.Schema:
    return pa.schema([*data, *LINEAGE_FIELDS])


# -- binary: one row per object, its bytes as they are ----------------------------------------------------

BINARY_SCHEMA = pa.schema([pa.field("content", pa.binary()), pa.field("size", pa.int64())])


def binary_reader(max_bytes: int) -> WholeFileReader:
    return WholeFileReader(schema=_binary_schema, rows=partial(read_binary, max_bytes=max_bytes))


def _binary_schema(file: FileRef, aws: AwsOptions) -> pa.Schema:
    return schema_with_lineage(BINARY_SCHEMA)  # the same for every object: no request


def read_binary(file: FileRef, aws: AwsOptions, *, max_bytes: int) -> Iterator[pa.RecordBatch]:
    """The object as one row (`content`, `size`), undecompressed whatever its key's extension (like
    Auto Loader's binaryFile); larger than `max_bytes`: ObjectReadError, before any byte is read."""
    obj = open_object(file, aws)
    try:
        if obj.size > max_bytes:
            raise ObjectReadError(
                file.uri, f"{obj.size} bytes, over binary.max.bytes ({max_bytes}): not ingested"
            )
        content = obj.read() if obj.size else b""
        batch = pa.record_batch(
            [pa.array([content], pa.binary()), pa.array([obj.size], pa.int64())], schema=BINARY_SCHEMA
        )
        yield with_lineage(batch, file, obj.etag, 0)
    finally:
        obj.close()
