"""Value types of the key-column keys: a list of typed columns as Spark DDL writes it (`year INT, dt DATE`,
its simple types only), and a regular expression with named groups in Python's syntax (`(?P<name>...)`)
or Java's (`(?<name>...)`, rewritten to Python's)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from s3events.config.value_types import InvalidValue, ValueType

# Spark's simple type names and their synonyms -> the name Spark's `simpleString` gives.
SIMPLE_TYPES: Mapping[str, str] = MappingProxyType(
    {
        "string": "string",
        "varchar": "string",
        "tinyint": "tinyint",
        "byte": "tinyint",
        "smallint": "smallint",
        "short": "smallint",
        "int": "int",
        "integer": "int",
        "bigint": "bigint",
        "long": "bigint",
        "float": "float",
        "real": "float",
        "double": "double",
        "boolean": "boolean",
        "date": "date",
        "timestamp": "timestamp",
    }
)
_DECIMAL = re.compile(r"(?:decimal|dec|numeric)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?", re.IGNORECASE)
_COLUMN = re.compile(
    r"\s*(?:`(?P<quoted>[^`]+)`|(?P<name>[A-Za-z_][A-Za-z0-9_]*))\s+"
    r"(?P<type>(?:decimal|dec|numeric)\s*(?:\(\s*\d+\s*(?:,\s*\d+\s*)?\))?|[A-Za-z]+)\s*(?:,|$)",
    re.IGNORECASE,
)
_JAVA_GROUP = re.compile(r"(?<!\\)\(\?<([A-Za-z_][A-Za-z0-9_]*)>")


def simple_type(text: str) -> str | None:
    """The canonical name of a simple Spark type (`decimal(p,s)` with its precision and scale), or None."""
    decimal = _DECIMAL.fullmatch(text.strip())
    if decimal is not None:
        precision, scale = int(decimal.group(1) or 10), int(decimal.group(2) or 0)
        if not 1 <= precision <= 38 or scale > precision:
            return None
        return f"decimal({precision},{scale})"
    return SIMPLE_TYPES.get(text.strip().lower())


@dataclass(frozen=True)
class ColumnTypesType(ValueType[Mapping[str, str]]):
    """`name TYPE, ...` with Spark's simple types, as a read-only mapping name -> canonical type name."""

    type_name: ClassVar[str] = "column types"

    def parse(self, text: str) -> Mapping[str, str]:
        columns: dict[str, str] = {}
        at = 0
        while at < len(text):
            found = _COLUMN.match(text, at)
            if found is None or found.end() == at:
                raise InvalidValue(f"{text[at:]!r} in {text!r} is not 'name TYPE'; allowed {self.allowed()}")
            name = found.group("quoted") or found.group("name")
            canonical = simple_type(found.group("type"))
            if canonical is None:
                raise InvalidValue(
                    f"column {name!r}: {found.group('type')!r} is not a type allowed here; allowed "
                    f"{self.allowed()}"
                )
            if name in columns:
                raise InvalidValue(f"column {name!r} is typed twice in {text!r}")
            columns[name] = canonical
            at = found.end()
        return MappingProxyType(columns)

    def allowed(self) -> str:
        return (
            "comma-separated 'name TYPE' with TYPE one of STRING, TINYINT, SMALLINT, INT, BIGINT, FLOAT, "
            "DOUBLE, DECIMAL(p,s), BOOLEAN, DATE, TIMESTAMP"
        )

    def format(self, value: object) -> str:
        if isinstance(value, Mapping):
            return ", ".join(f"{k} {str(v).upper()}" for k, v in value.items())
        return str(value)


def python_pattern(text: str) -> str:
    """`text` with Java's named groups `(?<name>...)` written as Python's `(?P<name>...)`."""
    return _JAVA_GROUP.sub(r"(?P<\1>", text)


@dataclass(frozen=True)
class NamedGroupsPattern(ValueType[str]):
    """A regular expression with at least one named group, in Python's syntax or Java's (kept as Python's)."""

    type_name: ClassVar[str] = "regex"

    def parse(self, text: str) -> str:
        pattern = python_pattern(text)
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise InvalidValue(f"{text!r} is not a regular expression: {exc}") from None
        if not compiled.groupindex:
            raise InvalidValue(f"{text!r} has no named group; allowed {self.allowed()}")
        return pattern

    def allowed(self) -> str:
        return "a regular expression with named groups, (?P<name>...) or (?<name>...)"
