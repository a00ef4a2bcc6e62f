"""ORC files, read stripe by stripe with pyarrow.orc on the executors (the Spark path of whole-file
formats: `whole_spark.read_on_spark` with this module's reader).

Columns as pyarrow reads them (ORC's decimal, date and timestamp types kept; timestamps come back from
Spark in microseconds, as for Parquet), `_source_line` the row's 0-based index in the file. A file that
is not ORC, is cut short, or has a stripe that does not decode is one error row.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.orc as orc

from s3events.infra.aws import AwsOptions
from s3events.ingest.files.formats.whole_fast import Unreadable, WholeFileParser, known_of
from s3events.ingest.files.formats.whole_file import WholeFileReader, schema_with_lineage, with_lineage
from s3events.ingest.files.lines import codec_for_key
from s3events.ingest.files.objects import (
    IN_MEMORY_PARQUET_BYTES,
    ObjectReadError,
    S3Object,
    open_object,
    whole_source,
)
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec


def _open(file: FileRef, obj: S3Object) -> orc.ORCFile:
    source = whole_source(obj, codec_for_key(file.key), IN_MEMORY_PARQUET_BYTES)
    try:
        return orc.ORCFile(source)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ObjectReadError(file.uri, f"not a readable ORC file: {exc}") from exc


def orc_schema(file: FileRef, aws: AwsOptions) -> pa.Schema:
    """The columns the file's footer declares (no stripe is read)."""
    obj = open_object(file, aws)
    try:
        return schema_with_lineage(_open(file, obj).schema)
    finally:
        obj.close()


def read_orc(file: FileRef, aws: AwsOptions, *, batch_rows: int = 65536) -> Iterator[pa.RecordBatch]:
    """The file's rows stripe by stripe, in batches of at most `batch_rows`, with lineage."""
    obj = open_object(file, aws)
    try:
        orc_file = _open(file, obj)
        row = 0
        for stripe in range(orc_file.nstripes):
            try:
                rows = orc_file.read_stripe(stripe)
            except (pa.ArrowException, OSError, ValueError) as exc:
                raise ObjectReadError(
                    file.uri, f"corrupt ORC stripe {stripe} after row {row}: {exc}"
                ) from exc
            for start in range(0, rows.num_rows, batch_rows):
                part = rows.slice(start, batch_rows)
                yield with_lineage(part, file, obj.etag, row)
                row += part.num_rows
    finally:
        obj.close()


def orc_batches(data: bytes, batch_rows: int = 65536) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The fast path's reading of a fetched object: its columns and its batches, stripe by stripe."""
    try:
        orc_file = orc.ORCFile(pa.BufferReader(data))
        schema = orc_file.schema
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise Unreadable(f"not a readable ORC file: {exc}") from exc
    return schema, _stripes(orc_file, batch_rows)


def _stripes(orc_file: orc.ORCFile, batch_rows: int) -> Iterator[pa.RecordBatch]:
    for stripe in range(orc_file.nstripes):
        try:
            rows = orc_file.read_stripe(stripe)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise Unreadable(f"corrupt ORC stripe {stripe}: {exc}") from exc
        for start in range(0, rows.num_rows, batch_rows):
            yield rows.slice(start, batch_rows)


def fast_parser(
    target: TargetSpec, *, declared: pa.Schema | None, existing: pa.Schema | None
) -> WholeFileParser:
    return WholeFileParser(known_of(existing), orc_batches)


READER = WholeFileReader(schema=orc_schema, rows=read_orc)
