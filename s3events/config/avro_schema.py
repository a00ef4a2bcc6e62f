"""An Avro schema (`.avsc`) as a target's columns: a record's fields -> canonical Spark DDL types, as
Spark's Avro reader maps them (`spark-avro`), without Spark.

Logical types: decimal (bytes or fixed) -> DECIMAL(p,s), date -> DATE, timestamp-millis/-micros ->
TIMESTAMP, local-timestamp-millis/-micros -> TIMESTAMP_NTZ, uuid -> STRING; time-millis/-micros keep
their base type (INT, BIGINT). enum -> STRING, fixed -> BINARY, map -> MAP<STRING,T>. The only union
allowed is a nullable one, `["null", T]` in either order: every column is nullable anyway.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from s3events.config.ddl_schema import DdlError, quoted

_PRIMITIVES = {
    "boolean": "boolean",
    "int": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "bytes": "binary",
    "string": "string",
}
_LOGICAL = {
    ("date", "int"): "date",
    ("timestamp-millis", "long"): "timestamp",
    ("timestamp-micros", "long"): "timestamp",
    ("local-timestamp-millis", "long"): "timestamp_ntz",
    ("local-timestamp-micros", "long"): "timestamp_ntz",
    ("uuid", "string"): "string",
}


def avro_columns(text: str) -> Mapping[str, str]:
    """The top-level record's fields as name -> canonical Spark DDL type; DdlError naming the field."""
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise DdlError(None, f"not an Avro schema (invalid JSON: {exc})") from None
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise DdlError(None, 'an Avro schema file must hold one record ("type": "record")')
    return MappingProxyType(_fields(schema, "", {}))


def _fields(record: dict[str, Any], path: str, named: dict[str, Any]) -> dict[str, str]:
    _register(record, named)
    record["__visiting"] = True  # a named reference to it from inside is a recursive type
    try:
        return _record_fields(record, path, named)
    finally:
        record.pop("__visiting", None)


def _record_fields(record: dict[str, Any], path: str, named: dict[str, Any]) -> dict[str, str]:
    fields = record.get("fields")
    if not isinstance(fields, list):
        raise DdlError(path or None, 'a record needs a "fields" list')
    columns: dict[str, str] = {}
    for field in fields:
        name = field.get("name") if isinstance(field, dict) else None
        if not isinstance(name, str) or not name:
            raise DdlError(path or None, 'a field needs a "name"')
        where = f"{path}.{name}" if path else name
        columns[name] = _type(field.get("type"), where, named)
    return columns


def _register(schema: dict[str, Any], named: dict[str, Any]) -> None:
    name = schema.get("name")
    if isinstance(name, str):
        namespace = schema.get("namespace")
        named[name] = schema
        if isinstance(namespace, str) and "." not in name:
            named[f"{namespace}.{name}"] = schema


def _type(schema: Any, where: str, named: dict[str, Any]) -> str:
    if isinstance(schema, list):
        return _union(schema, where, named)
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        schema = schema if schema in named else schema.rsplit(".", 1)[-1]  # namespaces: inherited
        if schema in named:
            if named[schema].get("__visiting"):
                raise DdlError(where, f"the record {schema} refers to itself (no Spark type holds that)")
            return _type(named[schema], where, named)
        raise DdlError(where, f"{schema!r} is not an Avro type (or a name defined before it)")
    if not isinstance(schema, dict):
        raise DdlError(where, f"{schema!r} is not an Avro type")
    kind = schema.get("type")
    logical = _logical(schema, where)
    if logical is not None:
        return logical
    if kind == "record":
        fields = _fields(schema, where, named)
        return "struct<" + ",".join(f"{quoted(n)}:{t}" for n, t in fields.items()) + ">"
    if kind == "array":
        return f"array<{_type(schema.get('items'), where, named)}>"
    if kind == "map":
        return f"map<string,{_type(schema.get('values'), where, named)}>"
    if kind in ("enum", "fixed"):
        _register(schema, named)
        return "string" if kind == "enum" else "binary"
    if isinstance(kind, str) and kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    return _type(kind, where, named)


def _logical(schema: dict[str, Any], where: str) -> str | None:
    logical, base = schema.get("logicalType"), schema.get("type")
    if logical is None:
        return None
    if logical == "decimal" and base in ("bytes", "fixed"):
        precision, scale = schema.get("precision"), schema.get("scale", 0)
        if not isinstance(precision, int) or not isinstance(scale, int) or not 0 <= scale <= precision <= 38:
            raise DdlError(where, f"decimal precision {precision} and scale {scale}: Spark takes 1..38, 0..p")
        return f"decimal({precision},{scale})"
    found = _LOGICAL.get((str(logical), str(base)))
    return found  # an unknown logical type is read as its base type, as Avro readers do


def _union(branches: list[Any], where: str, named: dict[str, Any]) -> str:
    others = [b for b in branches if b != "null"]
    if len(branches) != 2 or len(others) != 1:
        shown = json.dumps(branches)
        raise DdlError(where, f'the union {shown} is not ["null", T]: give the field one type (nullable)')
    return _type(others[0], where, named)
