"""Parquet objects read row group by row group inside Spark executors: the Parquet fast path's parser.

The Spark path (`read_on_spark`) reads a file with `objects.read_parquet`: its columns as pyarrow
reads them, a 0-based row index as `_source_line`, then casts every column to the batch's schema (the
table's type for a column it has, else the types of all the batch's files unified) and hands the rows
through Spark. This parser gives the same rows from the same pyarrow reader, with the same lineage
function and the same cast (`cast(safe=False)`) to the same types: the table's type for a column it
has, else the type Spark gives back for the file's (a timestamp[ns] column becomes timestamp[us], as
there). What it leaves to the Spark path: a file that is not readable Parquet, is corrupt in a later row
group, has no rows, lineage column names, names Spark would confuse (case), a type Spark has none for
(unsigned integers, dictionaries, all-null columns), a value the cast refuses, or a key with a
compression extension (the Spark path reads such bytes as they are). New columns are typed from every
file of the batch there (`schema_from_every_file`).

Rows are yielded in parts of at most `batch_rows`, so the task holds no more of a large file than its
flush bound; a part that fails to decode raises `FileDeclined` and the task drops what it had of the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from s3events.infra.aws import AwsOptions
from s3events.ingest.files import case_clash
from s3events.ingest.files.formats.base import FileDeclined, ParsedFile
from s3events.ingest.files.formats.whole_file import Rows, Schema, WholeFileReader
from s3events.ingest.files.frames import FilesFrame, collected
from s3events.ingest.files.line_parse import evolve
from s3events.ingest.files.lineage import FIXED, INGESTED_AT, LINEAGE, LINEAGE_FIELDS, lineage_columns
from s3events.ingest.files.lines import codec_for_key
from s3events.ingest.files.objects import (
    LINE_SCHEMA,
    CorruptParquetData,
    ObjectReadError,
    parquet_batches,
    read_parquet,
)
from s3events.ingest.files.post_parse import ERROR_SCHEMA
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec

_READ_ERROR = "__s3events_read_error"  # Spark path rows: why a file broke (a name no data column takes)


def fast_parser(
    target: TargetSpec, *, declared: pa.Schema | None, existing: pa.Schema | None
) -> ParquetParser:
    """The fast path's parser: always, typed by the table's columns (the Spark path reads no options
    and no declared schema for Parquet)."""
    return ParquetParser(pa.schema([f for f in existing or [] if f.name not in FIXED]))


_RESERVED = FIXED


@dataclass(frozen=True, slots=True)
class ParquetParser:
    known: pa.Schema  # the table's data columns (the Spark path reads no declared schema for Parquet)
    batch_rows: int = 65536  # rows per part, as the Spark path's reader gives them

    @property
    def schema_from_every_file(self) -> bool:
        return True  # the Spark path unifies the schemas of all the batch's files at once

    @property
    def new_columns_sorted(self) -> bool:
        return False  # in the files' order, as the unified schema gives them

    def keeps_type(self, t: pa.DataType) -> bool:
        return spark_keeps(t)

    def parse(
        self, data: bytes, file: FileRef, etag: str | None, hints: dict[str, pa.DataType]
    ) -> ParsedFile:
        if codec_for_key(file.key) is not None:
            return ParsedFile(
                None, "compressed by its key's extension (the Spark path reads the bytes as is)"
            )
        try:
            parquet = pq.ParquetFile(pa.BufferReader(data))
            schema = parquet.schema_arrow
        except (pa.ArrowException, OSError) as exc:
            return ParsedFile(None, f"not a readable Parquet file: {exc}")
        typed = self._types(schema)
        if isinstance(typed, str):
            return ParsedFile(None, typed)
        if parquet.metadata.num_rows == 0:
            return ParsedFile(None, "no rows")  # the Spark path takes no columns from a file without rows
        return ParsedFile(None, parts=self._parts(parquet, typed, file, etag))

    def _types(self, schema: pa.Schema) -> pa.Schema | str:
        """The types the Spark path casts this file's columns to, or why it could give them otherwise."""
        names = [n.lower() for n in schema.names]
        if len(set(names)) < len(names):
            return "column names that differ only in case"
        clash = sorted({n for n in schema.names if n.lower() in {r.lower() for r in _RESERVED}})
        if clash:
            return f"lineage column name(s) {', '.join(clash)}"
        table = {f.name.lower(): f for f in self.known}
        fields = []
        for f in schema:
            known = table.get(f.name.lower())
            if known is not None and known.name != f.name:
                return f"column {f.name} differs only in case from the table's {known.name}"
            wanted = known.type if known is not None else spark_type(f.type)
            if wanted is None:
                return f"column {f.name}: Spark has no type for {f.type}"
            fields.append(pa.field(f.name, wanted))
        return pa.schema(fields)

    def _parts(
        self, parquet: pq.ParquetFile, typed: pa.Schema, file: FileRef, etag: str | None
    ) -> Iterator[pa.Table]:
        try:
            for row, batch in parquet_batches(parquet, self.batch_rows):
                yield typed_part(batch, typed, file, etag, row)
        except CorruptParquetData as exc:
            raise FileDeclined(str(exc)) from exc


def typed_part(
    batch: pa.RecordBatch, typed: pa.Schema, file: FileRef, etag: str | None, row: int
) -> pa.Table:
    """A whole-file format's batch (rows from `row` on) as the Spark path gives it: lineage first, then
    the columns cast to the batch's types (`_read_partition`'s cast; its failure fails that path too)."""
    try:
        columns = [
            c if c.type == f.type else c.cast(f.type, safe=False)
            for c, f in zip(batch.columns, typed, strict=True)
        ]
    except (pa.ArrowException, NotImplementedError) as exc:
        raise FileDeclined(f"a value does not cast to the batch's type: {exc}") from exc
    lineage = lineage_columns(file, etag, row, batch.num_rows)
    return pa.Table.from_arrays([*lineage, *columns], schema=pa.schema([*LINEAGE_FIELDS, *typed]))


def batch_types(known: pa.Schema, schema: pa.Schema) -> pa.Schema | str:
    """The types the Spark path casts a file's columns to (the table's `known` ones, else Spark's for
    the file's), or why it could give them otherwise; for every format read whole into columns."""
    return ParquetParser(known)._types(schema)


@lru_cache(
    maxsize=256
)  # a conversion through Spark's types is costly per column (measured: docs/architecture.md)
def spark_type(t: pa.DataType) -> pa.DataType | None:
    """The type a column of type `t` comes back from Spark with (mapInArrow in, toArrow out); None when
    Spark has none (or the Spark path types it itself: an all-null column)."""
    if pa.types.is_null(t):
        return None
    try:
        back = to_arrow_schema(from_arrow_schema(pa.schema([pa.field("c", t)])), timezone="UTC")
    except (TypeError, ValueError, NotImplementedError, pa.ArrowException):
        return None
    return back.field(0).type


def spark_keeps(t: pa.DataType) -> bool:
    """Whether Spark gives a column of type `t` back unchanged."""
    return spark_type(t) == t


# -- the Spark path: every file's schema first, then its rows ----------------------------------------


def read_on_spark(
    spark: SparkSession,
    files: FilesFrame,
    aws: AwsOptions,
    existing: pa.Schema | None,
    cached: list[DataFrame],
    reader: WholeFileReader | None = None,
) -> tuple[DataFrame, DataFrame]:
    """(rows, error rows) of the batch's Parquet files through Spark (or another whole-file format's,
    by its `reader`): each file's schema first (a task reads its first row), unified over the batch, then
    every file read and cast to it."""
    reader = reader or PARQUET
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
    probed_bad = frozenset(uri for uri, _, _ in errors)
    read = files.map(
        partial(_read_partition, aws=aws, schema=read_schema, probed_bad=probed_bad, rows_of=reader.rows),
        from_arrow_schema(read_schema),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    cached.append(read)  # read once: the rows and the broken files both come from it
    broken = read.where(F.col(_READ_ERROR).isNotNull())
    # All or nothing per file, as for text: a file with a corrupt later row group contributes no rows.
    good = (
        read.where(F.col(_READ_ERROR).isNull())
        .join(F.broadcast(broken.select("_source_file").distinct()), "_source_file", "left_anti")
        .drop(_READ_ERROR)
    )
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


def parquet_schema(ref: FileRef, aws: AwsOptions) -> pa.Schema | None:
    """The columns of the file's first row (None without rows: such a file gives no columns)."""
    first = next(read_parquet(ref, aws, batch_rows=1), None)
    return first.schema if first is not None else None


PARQUET = WholeFileReader(schema=parquet_schema, rows=read_parquet)


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
