"""What a catalog entry says about a target table, and when it has to change (pure).

A target's entry is written from its Delta table's shape: location, columns (Hive types) and partition
columns. It is created at the target's first commit and rewritten only when that shape changes, never per
commit: Glue keeps a table version per update (Hudi's per-commit sync exhausts them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Literal

# Table parameters s3events writes beside the ones readers need.
VERSION_PARAMETER = "s3events.table.version"  # the Delta version whose shape the entry describes
PARTITIONS_PARAMETER = "s3events.partition.columns"  # JSON list: Delta partition columns, in order

Action = Literal["create", "update"]

_PRIMITIVES = {
    "string": "string",
    "long": "bigint",
    "integer": "int",
    "short": "smallint",
    "byte": "tinyint",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp",
}


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str  # Hive type text, e.g. bigint, array<struct<a:string>>


@dataclass(frozen=True, slots=True)
class TableShape:
    """What the catalog entry of a table holds that a reader depends on."""

    location: str
    columns: tuple[Column, ...]
    partition_columns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TableState:
    """A target table as it stands: its shape at Delta version `version`."""

    version: int
    shape: TableShape


@dataclass(frozen=True, slots=True)
class Entry:
    """A catalog entry as read back; `version` is None for entries s3events did not write."""

    shape: TableShape
    version: int | None


@dataclass(frozen=True, slots=True)
class CatalogTarget:
    """A target as the catalog sees it: its name in s3events, its table name there, its Delta location."""

    name: str
    table: str
    location: str


def hive_type(delta_type: Any) -> str:
    """A Delta schema type (its JSON form: a name, or a dict for struct, array, map) as Hive writes it."""
    if isinstance(delta_type, str):
        if delta_type.startswith("decimal"):
            return delta_type.replace(" ", "")
        return _PRIMITIVES.get(delta_type, delta_type)
    kind = delta_type["type"]
    if kind == "struct":
        fields = ",".join(f"{f['name']}:{hive_type(f['type'])}" for f in delta_type["fields"])
        return f"struct<{fields}>"
    if kind == "array":
        return f"array<{hive_type(delta_type['elementType'])}>"
    if kind == "map":
        return f"map<{hive_type(delta_type['keyType'])},{hive_type(delta_type['valueType'])}>"
    raise ValueError(f"unknown Delta type {delta_type!r}")


def shape_of(
    location: str, schema_json: str | Mapping[str, Any], partition_columns: tuple[str, ...]
) -> TableShape:
    """A table's shape from its Delta schema (JSON, as the Delta log writes it) and partition columns."""
    schema = json.loads(schema_json) if isinstance(schema_json, str) else schema_json
    columns = tuple(Column(f["name"], hive_type(f["type"])) for f in schema["fields"])
    return TableShape(same_location(location), columns, tuple(partition_columns))


def catalog_location(path: str) -> str:
    """A target path as a catalog location: a local path becomes a file: URI (readers resolve it)."""
    if "://" in path or path.startswith("file:"):
        return same_location(path)
    return PurePosixPath(path).as_uri() if path.startswith("/") else path


def same_location(location: str) -> str:
    """One spelling per location: s3a:// and s3n:// as s3://, no trailing '/'."""
    for alias in ("s3a://", "s3n://"):
        if location.startswith(alias):
            location = "s3://" + location[len(alias) :]
    return location.rstrip("/") or location


def action_for(registered: TableShape | None, current: TableShape) -> Action | None:
    """What the entry needs after a commit: created, updated (its shape changed), or nothing."""
    if registered is None:
        return "create"
    return None if _comparable(registered) == _comparable(current) else "update"


def _comparable(shape: TableShape) -> tuple[object, ...]:
    # Hive and Glue fold column names and types to lower case.
    columns = tuple((c.name.lower(), c.type.lower()) for c in shape.columns)
    partitions = tuple(name.lower() for name in shape.partition_columns)
    return (same_location(shape.location), columns, partitions)


def elsewhere(entry: Entry | None, target: CatalogTarget) -> bool:
    """The entry names another location: it belongs to another table, and s3events leaves it alone."""
    return entry is not None and same_location(entry.shape.location) != same_location(target.location)


def behind(entry: Entry | None, state: TableState | None) -> int | None:
    """Delta versions the entry lags its table by (None: in step, or nothing to register yet). An entry
    whose shape matches is in step whatever version it names: later commits kept the shape."""
    if state is None:
        return None
    if entry is None:
        return state.version + 1
    if action_for(entry.shape, state.shape) is None:
        return None
    return state.version - (entry.version if entry.version is not None else -1)


def entry_parameters(state: TableState) -> dict[str, str]:
    """Parameters every entry carries: Athena's and Spark's markers of a Delta table, and s3events' own."""
    return {
        "EXTERNAL": "TRUE",
        "table_type": "DELTA",  # Athena reads the table natively from its Delta log
        "spark.sql.sources.provider": "delta",  # Spark (with delta-spark) resolves the table by name
        VERSION_PARAMETER: str(state.version),
        PARTITIONS_PARAMETER: json.dumps(list(state.shape.partition_columns)),
    }


def entry_from(location: str, columns: tuple[Column, ...], parameters: Mapping[str, str]) -> Entry:
    """An entry read back from a catalog's location, columns and parameters."""
    try:
        partitions = tuple(json.loads(parameters.get(PARTITIONS_PARAMETER, "[]")))
    except ValueError:
        partitions = ()
    version_text = parameters.get(VERSION_PARAMETER, "")
    version = int(version_text) if version_text.isdigit() else None
    return Entry(TableShape(same_location(location), columns, partitions), version)
