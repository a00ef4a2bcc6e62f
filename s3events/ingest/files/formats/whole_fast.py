"""The fast path of formats read whole into columns besides Parquet (Avro, ORC, binary): the object's batches
typed and cast exactly as the Spark path (`whole_spark.read_on_spark`) would, then written by the task
itself, without Spark's schema probe, read and write. A file the parser cannot give exactly so (not
readable, corrupt in a later block or stripe, no rows, a type or name the Spark path treats otherwise)
is declined and read by the Spark path, which records its error row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

import pyarrow as pa

from s3events.ingest.files.formats.base import FileDeclined, ParsedFile
from s3events.ingest.files.formats.parquet_format import batch_types, spark_keeps, typed_part
from s3events.ingest.files.formats.whole_file import BINARY_SCHEMA
from s3events.ingest.files.lineage import FIXED
from s3events.ingest.files.lines import codec_for_key
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec


class Unreadable(Exception):
    """The bytes are not (or no longer) readable as the format: why, for the decline."""


# bytes -> (the file's columns, its batches); raises Unreadable, also while iterating the batches
Batches = Callable[[bytes], tuple[pa.Schema, Iterator[pa.RecordBatch]]]


def known_of(existing: pa.Schema | None) -> pa.Schema:
    """The table's data columns (the Spark path reads no declared schema for these formats)."""
    return pa.schema([f for f in existing or [] if f.name not in FIXED])


@dataclass(frozen=True, slots=True)
class WholeFileParser:
    known: pa.Schema
    batches: Batches
    raw: bool = False  # the Spark path reads the bytes as they are, whatever the key's extension

    @property
    def schema_from_every_file(self) -> bool:
        return True  # the Spark path unifies the schemas of all the batch's files at once

    @property
    def new_columns_sorted(self) -> bool:
        return False

    def keeps_type(self, t: pa.DataType) -> bool:
        return spark_keeps(t)

    def parse(
        self, data: bytes, file: FileRef, etag: str | None, hints: dict[str, pa.DataType]
    ) -> ParsedFile:
        if self.raw and codec_for_key(file.key) is not None:
            return ParsedFile(None, "compressed by its key's extension (the Spark path keeps the bytes)")
        try:
            schema, batches = self.batches(data)
        except Unreadable as exc:
            return ParsedFile(None, str(exc))
        typed = batch_types(self.known, schema)
        if isinstance(typed, str):
            return ParsedFile(None, typed)
        return ParsedFile(None, parts=_parts(batches, typed, file, etag))


def _parts(
    batches: Iterator[pa.RecordBatch], typed: pa.Schema, file: FileRef, etag: str | None
) -> Iterator[pa.Table]:
    row = 0
    try:
        for batch in batches:
            yield typed_part(batch, typed, file, etag, row)
            row += batch.num_rows
    except Unreadable as exc:
        raise FileDeclined(str(exc)) from exc
    if row == 0:
        raise FileDeclined("no rows")


def binary_batches(data: bytes, *, max_bytes: int) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """A binary object as its one row (`content`, `size`); over `max_bytes`, the Spark path's error row."""
    if len(data) > max_bytes:
        raise Unreadable(f"{len(data)} bytes, over binary.max.bytes ({max_bytes})")
    columns = [pa.array([data], pa.binary()), pa.array([len(data)], pa.int64())]
    return BINARY_SCHEMA, iter([pa.record_batch(columns, schema=BINARY_SCHEMA)])


def binary_fast_parser(
    target: TargetSpec, *, declared: pa.Schema | None, existing: pa.Schema | None
) -> WholeFileParser:
    return WholeFileParser(
        known_of(existing), partial(binary_batches, max_bytes=target.binary_max_bytes), raw=True
    )
