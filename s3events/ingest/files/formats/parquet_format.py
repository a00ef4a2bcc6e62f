"""Parquet objects, one path: read row group by row group in the fast path's task, every file ending as
rows or one error row.

A file's rows are its columns as pyarrow reads them, a 0-based row index as `_source_line`, each column
cast (`cast(safe=False)`) to the batch's type: the table's for a column it has, else the type Spark
gives back for the file's (a timestamp[ns] column becomes timestamp[us]). A column with only nulls and
no type yet is left to the table (as the other fast paths leave one). When the tasks' types for a new
column disagree, or two files spell a name two ways, `parquet_batch` probes every file's schema and the
batch is read again with the schemas unified in file order (`promote_options="permissive"`; the first
spelling kept, a later file that clashes or whose type does not unify is its error row).

One error row, no rows, for: a file that is not readable Parquet (a key with a compression extension
too: Parquet compresses inside the file), a corrupt row group, lineage column names, names that differ
only in case from each other or the table's, a type Spark has none for (unsigned integers, ...), or a
value the cast refuses. A file without rows gives no rows and no columns. An object over the in-memory
limit is read with ranged GETs (footer, then column chunks), so a task holds one part at a time: rows
are yielded in parts of at most `batch_rows`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from s3events.infra.aws import AwsOptions
from s3events.ingest.files import case_clash
from s3events.ingest.files.formats.base import FileDeclined, FileFailed, ParsedFile
from s3events.ingest.files.lineage import FIXED, LINEAGE_FIELDS, lineage_columns
from s3events.ingest.files.lines import codec_for_key
from s3events.ingest.files.merge_input import TYPE_ERRORS
from s3events.ingest.files.objects import (
    IN_MEMORY_PARQUET_BYTES,
    CorruptParquetData,
    ObjectReadError,
    open_object,
    parquet_batches,
    whole_source,
)
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec

_NO_COLUMNS = pa.schema(LINEAGE_FIELDS)
_PROBES = 8  # files whose footers the driver reads at once


def fast_parser(
    target: TargetSpec, *, declared: pa.Schema | None, existing: pa.Schema | None
) -> ParquetParser:
    """The parser: always, typed by the table's columns (Parquet reads no options and no declared
    schema)."""
    return ParquetParser(pa.schema([f for f in existing or [] if f.name not in FIXED]))


@dataclass(frozen=True, slots=True)
class ParquetParser:
    known: pa.Schema  # the table's data columns, or after a probe the batch's (`parquet_batch`)
    batch_rows: int = 65536  # rows per part
    refused: Mapping[str, str] = field(default_factory=dict)  # uri -> why the batch's schema refuses it

    @property
    def schema_from_every_file(self) -> bool:
        return True  # new columns are typed from every file: a task's types may need the batch's

    @property
    def new_columns_sorted(self) -> bool:
        return False  # in the files' order, as the unified schema gives them

    def keeps_type(self, t: pa.DataType) -> bool:
        return pa.types.is_null(t) or spark_keeps(t)

    def parse(
        self, data: bytes, file: FileRef, etag: str | None, hints: dict[str, pa.DataType]
    ) -> ParsedFile:
        refused = self._refused(file)
        return refused or self._read(pa.BufferReader(data), file, etag)

    def streamed(self, file: FileRef, aws: AwsOptions) -> ParsedFile:
        """A file the task could not fetch whole: read with ranged GETs past the in-memory bound."""
        refused = self._refused(file)
        if refused is not None:
            return refused
        try:
            obj = open_object(file, aws)
            return self._read(whole_source(obj, None, IN_MEMORY_PARQUET_BYTES), file, obj.etag)
        except ObjectReadError as exc:
            return _failed(exc.reason)

    @property
    def first_line(self) -> int:
        return 0  # a row index

    def for_batch(
        self, files: tuple[FileRef, ...], existing: pa.Schema | None, aws: AwsOptions
    ) -> ParquetParser:
        """The parser for a batch whose tasks could not agree (a new column typed two ways, a name spelt
        two ways): every file's schema probed on the driver, unified in file order."""
        with ThreadPoolExecutor(max_workers=_PROBES, thread_name_prefix="s3events-probe") as pool:
            probed = list(pool.map(partial(_probe, aws=aws), files))
        names = list(existing.names) if existing is not None else []
        refused: dict[str, str] = {}
        unified = pa.schema([])
        for ref, schema in sorted(zip(files, probed, strict=True), key=lambda p: p[0].uri):
            typed = self.types(schema) if schema is not None else None
            if schema is None or typed is None or isinstance(typed, str):
                continue  # no rows, or an error row: its parse says why
            clash = case_clash.file_clash(schema.names, names)  # the first file's spelling is kept
            if clash is not None:
                refused[ref.uri] = clash
                continue
            try:
                unified = pa.unify_schemas([unified, typed], promote_options="permissive")
            except TYPE_ERRORS as exc:
                refused[ref.uri] = f"a column's type does not unify with the batch's earlier files: {exc}"
                continue
            names += schema.names
        new = [f for f in unified if f.name not in self.known.names and not pa.types.is_null(f.type)]
        return ParquetParser(pa.schema([*self.known, *new]), self.batch_rows, refused)

    def _refused(self, file: FileRef) -> ParsedFile | None:
        if file.uri in self.refused:
            return _failed(self.refused[file.uri])
        codec = codec_for_key(file.key)
        if codec is not None:
            return _failed(f"not a readable Parquet file: its key says {codec} (Parquet compresses inside)")
        return None

    def _read(self, source: Any, file: FileRef, etag: str | None) -> ParsedFile:
        try:
            parquet = pq.ParquetFile(source)
            schema = parquet.schema_arrow
        except (pa.ArrowException, OSError) as exc:
            return _failed(f"not a readable Parquet file: {exc}")
        typed = self.types(schema)
        if isinstance(typed, str):
            return _failed(typed)
        if parquet.metadata.num_rows == 0:
            return ParsedFile(_NO_COLUMNS.empty_table())  # no rows: no columns either
        return ParsedFile(None, parts=self._parts(parquet, typed, file, etag))

    def types(self, schema: pa.Schema, *, open_nulls: bool = True) -> pa.Schema | str:
        """The types this file's columns are cast to, or why the file is an error row. `open_nulls`: an
        all-null column the table lacks stays null (the table decides its type)."""
        lineage = sorted(set(schema.names) & FIXED)
        if lineage:
            return f"the file already has lineage column(s) {', '.join(lineage)}"
        clash = case_clash.file_clash(schema.names, [*FIXED, *self.known.names])
        if clash is not None:
            return clash
        table = {f.name: f for f in self.known}
        fields = []
        for f in schema:
            known = table.get(f.name)
            wanted = known.type if known is not None else spark_type(f.type)
            if wanted is None and open_nulls and pa.types.is_null(f.type):
                wanted = f.type
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
        except (CorruptParquetData, FileDeclined) as exc:
            raise FileFailed(str(exc)) from exc
        except ObjectReadError as exc:  # a ranged read: the object changed or went away
            raise FileFailed(exc.reason) from exc


def _failed(reason: str) -> ParsedFile:
    return ParsedFile(None, reason, failed=True)


def _probe(ref: FileRef, aws: AwsOptions) -> pa.Schema | None:
    """The file's columns, from its footer (ranged GETs), or None: no rows, or not readable."""
    if codec_for_key(ref.key) is not None:
        return None
    try:
        parquet = pq.ParquetFile(whole_source(open_object(ref, aws), None, 0))
        return parquet.schema_arrow if parquet.metadata.num_rows else None
    except (ObjectReadError, pa.ArrowException, OSError):
        return None


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
    the file's), or why it could give them otherwise; for the formats read whole into columns."""
    return ParquetParser(known).types(schema, open_nulls=False)


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
