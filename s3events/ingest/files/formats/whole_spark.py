"""The Spark path of the formats read whole into columns that keep one (Avro, ORC, binary): each file's
schema probed by a task, the schemas unified over the batch (`promote_options="permissive"`, the first
spelling of a name in file order kept), then every file read by its format's reader (`whole_file`) and
cast to that schema (`safe=False`). A file that cannot be read is one error row, and a file that breaks
after its first rows (a corrupt later block) contributes no rows: all or nothing per file. Parquet has
one path (`parquet_format`).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from s3events.infra.aws import AwsOptions
from s3events.ingest.files import case_clash
from s3events.ingest.files.formats.whole_file import Rows, Schema, WholeFileReader
from s3events.ingest.files.frames import FilesFrame, collected, files_where, without_files
from s3events.ingest.files.line_parse import evolve
from s3events.ingest.files.lineage import INGESTED_AT, LINEAGE
from s3events.ingest.files.objects import LINE_SCHEMA, ObjectReadError
from s3events.ingest.files.post_parse import ERROR_SCHEMA
from s3events.ingest.model import FileRef

_READ_ERROR = "__s3events_read_error"  # rows: why a file broke (a name no data column takes)


def read_on_spark(
    spark: SparkSession,
    files: FilesFrame,
    aws: AwsOptions,
    existing: pa.Schema | None,
    cached: list[DataFrame],
    reader: WholeFileReader,
) -> tuple[DataFrame, DataFrame]:
    """(rows, error rows) of the batch's files through Spark, by the format's `reader`: each file's
    schema first (a task reads its first rows), unified over the batch, then every file read and cast
    to it."""
    read_schema, errors = _batch_schema(files, aws, existing, reader)
    probed_bad = frozenset(uri for uri, _, _ in errors)
    read = files.map(
        partial(_read_partition, aws=aws, schema=read_schema, probed_bad=probed_bad, rows_of=reader.rows),
        from_arrow_schema(read_schema),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    cached.append(read)  # read once: the rows and the broken files both come from it
    failed = F.col(_READ_ERROR).isNotNull()
    broken = read.where(failed)
    # All or nothing per file, as for text: a file with a corrupt later row group contributes no rows.
    good = without_files(read.where(~failed), files_where(read, failed)).drop(_READ_ERROR)
    bad_schema = from_arrow_schema(pa.schema([f for f in ERROR_SCHEMA if f.name != INGESTED_AT]))
    bad = spark.createDataFrame(
        [(uri, etag, None, None, error, None) for uri, etag, error in errors], bad_schema
    ).unionByName(
        broken.select(
            "_source_file",
            "_source_etag",
            F.lit(None).cast("long").alias("_source_line"),
            F.lit(None).cast("string").alias("raw"),
            F.col(_READ_ERROR).alias("error"),
            "_event_time",
        )
    )
    return good, bad


def _batch_schema(
    files: FilesFrame, aws: AwsOptions, existing: pa.Schema | None, reader: WholeFileReader
) -> tuple[pa.Schema, list[tuple[str, str | None, str]]]:
    """The schema every file is read with (lineage, the table's and the files' unified columns, the
    read-error marker), and (uri, etag, why) of the files the probe could not read or whose names
    clash in case with an earlier file's (in key order) or the table's."""
    probed = files.map(
        partial(_schema_partition, aws=aws, schema_of=reader.schema),
        "uri string, etag string, schema binary, error string",
    )
    rows = collected(probed)
    errors = [(r["uri"], r["etag"], r["error"]) for r in rows if r["error"] is not None]
    schemas, known = [], list(existing.names) if existing is not None else []
    for r in sorted((r for r in rows if r["schema"] is not None), key=lambda r: r["uri"]):
        schema = pa.ipc.read_schema(pa.py_buffer(r["schema"]))
        clash = case_clash.file_clash(schema.names, known)  # the first file's spelling is kept
        if clash is not None:
            errors.append((r["uri"], r["etag"], clash))
            continue
        schemas.append(schema)
        known += schema.names
    unified = pa.unify_schemas(schemas, promote_options="permissive") if schemas else pa.schema([])
    data_schema = evolve(existing, from_arrow_schema(unified))
    read_schema = pa.schema(
        [
            *[pa.field(n, LINE_SCHEMA.field(n).type) for n in LINEAGE],
            *to_arrow_schema(data_schema, timezone="UTC"),
            pa.field(_READ_ERROR, pa.string()),  # a file that broke after the probe: one row saying why
        ]
    )
    return read_schema, errors


def _schema_partition(
    refs: Iterator[FileRef], *, aws: AwsOptions, schema_of: Schema
) -> Iterator[pa.RecordBatch]:
    out: list[dict[str, Any]] = []
    for ref in refs:
        try:
            schema = schema_of(ref, aws)
            payload = schema.serialize().to_pybytes() if schema is not None else None
            out.append({"uri": ref.uri, "etag": ref.etag, "schema": payload, "error": None})
        except ObjectReadError as exc:
            out.append({"uri": ref.uri, "etag": ref.etag, "schema": None, "error": exc.reason})
    yield pa.RecordBatch.from_pylist(
        out,
        schema=pa.schema(
            [("uri", pa.string()), ("etag", pa.string()), ("schema", pa.binary()), ("error", pa.string())]
        ),
    )


def _read_partition(
    refs: Iterator[FileRef],
    *,
    aws: AwsOptions,
    schema: pa.Schema,
    probed_bad: frozenset[str],
    rows_of: Rows,
) -> Iterator[pa.RecordBatch]:
    for ref in refs:
        if ref.uri in probed_bad:
            continue  # its error row comes from the probe
        try:
            for record_batch in rows_of(ref, aws):
                columns = [
                    record_batch.column(f.name).cast(f.type, safe=False)
                    if f.name in record_batch.schema.names
                    else pa.nulls(record_batch.num_rows, f.type)
                    for f in schema
                ]
                yield pa.RecordBatch.from_arrays(columns, schema=schema)
        except ObjectReadError as exc:  # after the probe read its first rows: a corrupt later row group
            marker = {
                "_source_file": ref.uri,
                "_source_etag": ref.etag,
                "_event_time": ref.event_time,
                _READ_ERROR: exc.reason,
            }
            yield pa.RecordBatch.from_pylist([marker], schema=schema)
