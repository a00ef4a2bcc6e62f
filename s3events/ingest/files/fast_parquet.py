"""Parquet objects read row group by row group inside Spark executors: the Parquet fast path's parser.

The Spark path (`read._read_parquet`) reads a file with `objects.read_parquet`: its columns as pyarrow
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
from functools import lru_cache

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from s3events.ingest.files.fast_parse import FileDeclined, Parsed
from s3events.ingest.files.lines import codec_for_key
from s3events.ingest.files.objects import (
    INGESTED_AT,
    LINEAGE_FIELDS,
    CorruptParquetData,
    lineage_columns,
    parquet_batches,
)
from s3events.ingest.model import FileRef

_RESERVED = {f.name for f in LINEAGE_FIELDS} | {INGESTED_AT}


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

    def parse(self, data: bytes, file: FileRef, etag: str | None, hints: dict[str, pa.DataType]) -> Parsed:
        if codec_for_key(file.key) is not None:
            return Parsed(None, "compressed by its key's extension (the Spark path reads the bytes as is)")
        try:
            parquet = pq.ParquetFile(pa.BufferReader(data))
            schema = parquet.schema_arrow
        except (pa.ArrowException, OSError) as exc:
            return Parsed(None, f"not a readable Parquet file: {exc}")
        typed = self._types(schema)
        if isinstance(typed, str):
            return Parsed(None, typed)
        if parquet.metadata.num_rows == 0:
            return Parsed(None, "no rows")  # the Spark path takes no columns from a file without rows
        return Parsed(None, parts=self._parts(parquet, typed, file, etag))

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
        out = pa.schema([*LINEAGE_FIELDS, *typed])
        try:
            for row, batch in parquet_batches(parquet, self.batch_rows):
                try:  # the Spark path's cast (read._read_parquet_partition); its failure fails that path too
                    columns = [
                        c if c.type == f.type else c.cast(f.type, safe=False)
                        for c, f in zip(batch.columns, typed, strict=True)
                    ]
                except (pa.ArrowException, NotImplementedError) as exc:
                    raise FileDeclined(f"a value does not cast to the batch's type: {exc}") from exc
                lineage = lineage_columns(file, etag, row, batch.num_rows)
                yield pa.Table.from_arrays([*lineage, *columns], schema=out)
        except CorruptParquetData as exc:
            raise FileDeclined(str(exc)) from exc


@lru_cache(maxsize=256)  # a schema conversion through Spark's types: ~4 ms a column otherwise
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
