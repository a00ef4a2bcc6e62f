"""Avro object container files, read with fastavro on the executors (the Spark path of whole-file formats:
`whole_spark.read_on_spark` with this module's reader).

Types as Spark's spark-avro gives them: records are structs, arrays lists, maps maps (string keys), enums
strings, fixed and bytes binary, a union of null and one type that type (nullable), int|long long and
float|double double; logical types kept: decimal (bytes or fixed) as decimal(p, s), date as date,
timestamp-millis/micros as timestamp (UTC), local-timestamp-millis/micros as timestamp_ntz, uuid as
string, time-millis/micros as int/long (Spark has no time type). A union of other types, a decimal wider
than Spark's 38 digits, an unreadable header or a corrupt or truncated block make the object one error
row. Why fastavro: docs/architecture.md ("Avro").
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from itertools import islice
from typing import IO, Any, cast

import fastavro
import pyarrow as pa

from s3events.errors import S3EventsError
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

_PRIMITIVES = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_LOGICAL = {
    "date": pa.date32(),
    "timestamp-millis": pa.timestamp("us", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "local-timestamp-millis": pa.timestamp("us"),
    "local-timestamp-micros": pa.timestamp("us"),
    "time-millis": pa.time32("ms"),  # fastavro gives datetime.time: built as time, cast to int below
    "time-micros": pa.time64("us"),
}
_MAX_DECIMAL_DIGITS = 38  # Spark's DecimalType
_OPEN = pa.null()  # a record whose fields are being typed


class UnsupportedAvro(Exception):
    """An Avro schema with a type Spark has none for."""


def arrow_type(schema: Any, named: dict[str, pa.DataType] | None = None) -> pa.DataType:
    """The Arrow type fastavro's values of an Avro (writer) schema are built as."""
    named = {} if named is None else named
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema in named:
            if named[schema] == _OPEN:
                raise UnsupportedAvro(f"the recursive type {schema} (Spark has no type for it)")
            return named[schema]
        raise UnsupportedAvro(f"unknown type name {schema!r}")
    if isinstance(schema, list):
        return _union(schema, named)
    kind, logical = schema["type"], schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
        if precision > _MAX_DECIMAL_DIGITS:
            raise UnsupportedAvro(f"decimal({precision}, {scale}) is wider than Spark's 38 digits")
        return _named(schema, pa.decimal128(precision, scale), named)
    if logical in _LOGICAL and isinstance(kind, str) and kind in ("int", "long"):
        return _LOGICAL[logical]
    if kind == "record":
        named[schema["name"]] = _OPEN  # a reference before the record's end is a recursion
        fields = [pa.field(f["name"], arrow_type(f["type"], named)) for f in schema["fields"]]
        return _named(schema, pa.struct(fields), named)
    if kind == "enum":
        return _named(schema, pa.string(), named)
    if kind == "fixed":
        return _named(schema, pa.binary(), named)
    if kind == "array":
        return pa.list_(arrow_type(schema["items"], named))
    if kind == "map":
        return pa.map_(pa.string(), arrow_type(schema["values"], named))
    return arrow_type(kind, named)  # {"type": "string", "logicalType": "uuid"} and the like


def _named(schema: dict[str, Any], t: pa.DataType, named: dict[str, pa.DataType]) -> pa.DataType:
    if "name" in schema:  # fastavro gives full names (namespace.name), references use the same
        named[schema["name"]] = t
    return t


def _union(branches: list[Any], named: dict[str, pa.DataType]) -> pa.DataType:
    types = [arrow_type(b, named) for b in branches if b != "null"]
    distinct = list(dict.fromkeys(types))
    if len(distinct) == 1:
        return distinct[0]
    if set(distinct) <= {pa.int32(), pa.int64()}:
        return pa.int64()
    if set(distinct) <= {pa.float32(), pa.float64()}:
        return pa.float64()
    raise UnsupportedAvro(f"a union of {', '.join(map(str, distinct))} (Spark reads it as a struct)")


def spark_form(t: pa.DataType) -> pa.DataType:
    """`t` with time types as the integers Spark reads them as (time-millis int, time-micros long)."""
    if pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_time64(t):
        return pa.int64()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(spark_form(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(spark_form(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, spark_form(t.item_type))
    return t


def _zero_width(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return all(_zero_width(f.type) for f in t)
    return pa.types.is_null(t)


def _has_uuid(schema: Any) -> bool:
    return '"uuid"' in str(schema).replace("'", '"')


def _plain(value: Any) -> Any:
    """A record with uuid.UUID values (fastavro's for logicalType uuid) as strings."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _reader(source: IO[bytes]) -> tuple[Any, pa.Schema]:
    """fastavro's reader of `source` and the columns its writer schema gives; UnsupportedAvro, or
    anything the decoder raises on bytes that are not Avro."""
    records = fastavro.reader(source)
    built = arrow_type(records.writer_schema)
    if not pa.types.is_struct(built):
        raise UnsupportedAvro(f"the Avro schema is {built}, not a record")
    if _zero_width(built):  # a lying block count would have fastavro make records of no bytes forever
        raise UnsupportedAvro("records of no bytes (every field null)")
    return records, pa.schema(list(built))


def _open(file: FileRef, obj: S3Object) -> tuple[Any, pa.Schema]:
    source = whole_source(obj, codec_for_key(file.key), IN_MEMORY_PARQUET_BYTES)
    try:
        return _reader(cast(IO[bytes], source))
    except UnsupportedAvro as exc:
        raise ObjectReadError(file.uri, f"Avro type not supported: {exc}") from exc
    except S3EventsError:
        raise
    except Exception as exc:  # hostile bytes raise anything from the decoder: the object's error row
        raise ObjectReadError(file.uri, f"not a readable Avro file: {type(exc).__name__}: {exc}") from exc


def _batches(records: Any, schema: pa.Schema, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The records as batches of Spark's types; _Corrupt saying after which record when they do not
    decode (a corrupt or truncated block, a value that lies about its type)."""
    target = pa.schema([f.with_type(spark_form(f.type)) for f in schema])
    plain = _has_uuid(records.writer_schema)
    row = 0
    while True:
        try:
            chunk = list(islice(records, batch_rows))
            if plain:
                chunk = [_plain(r) for r in chunk]
            batch = pa.RecordBatch.from_pylist(chunk, schema=schema).cast(target)
        except S3EventsError:
            raise
        except Exception as exc:
            raise _Corrupt(f"corrupt Avro data after record {row}: {type(exc).__name__}: {exc}") from exc
        if not chunk:
            return
        yield batch
        row += len(chunk)


class _Corrupt(Exception):
    pass


def avro_schema(file: FileRef, aws: AwsOptions) -> pa.Schema:
    """The columns the object's header declares (no data block is read)."""
    obj = open_object(file, aws)
    try:
        _, schema = _open(file, obj)
        return schema_with_lineage(pa.schema([f.with_type(spark_form(f.type)) for f in schema]))
    finally:
        obj.close()


def read_avro(file: FileRef, aws: AwsOptions, *, batch_rows: int = 65536) -> Iterator[pa.RecordBatch]:
    """The object's records as batches with lineage (`_source_line` = the record's 0-based index)."""
    obj = open_object(file, aws)
    try:
        records, schema = _open(file, obj)
        row = 0
        try:
            for batch in _batches(records, schema, batch_rows):
                yield with_lineage(batch, file, obj.etag, row)
                row += batch.num_rows
        except _Corrupt as exc:
            raise ObjectReadError(file.uri, str(exc)) from exc
    finally:
        obj.close()


def avro_batches(data: bytes, batch_rows: int = 65536) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The fast path's reading of a fetched object: its columns (Spark's types) and its batches."""
    try:
        records, schema = _reader(io.BytesIO(data))
    except Exception as exc:  # as in _open: anything, on hostile bytes
        raise Unreadable(f"not a readable Avro file: {type(exc).__name__}: {exc}") from exc
    return pa.schema([f.with_type(spark_form(f.type)) for f in schema]), _fast(records, schema, batch_rows)


def _fast(records: Any, schema: pa.Schema, batch_rows: int) -> Iterator[pa.RecordBatch]:
    try:
        yield from _batches(records, schema, batch_rows)
    except _Corrupt as exc:
        raise Unreadable(str(exc)) from exc


def fast_parser(
    target: TargetSpec, *, declared: pa.Schema | None, existing: pa.Schema | None
) -> WholeFileParser:
    return WholeFileParser(known_of(existing), avro_batches)


READER = WholeFileReader(schema=avro_schema, rows=read_avro)
