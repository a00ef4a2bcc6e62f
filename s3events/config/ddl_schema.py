"""Spark DDL column lists with nested types (`amount DECIMAL(18,2), tags MAP<STRING,STRING>`), parsed
without Spark: a config mistake must fail at start-up, naming the column, before any session exists.

`parse_columns` gives an ordered mapping name -> the type in canonical Spark DDL (`decimal(18,2)`,
`map<string,string>`, `struct<`a`:int>`), which `pyspark.sql.types.StructType.fromDDL` reads back.
Types: the simple ones of `column_types.SIMPLE_TYPES`, BINARY, TIMESTAMP_NTZ, CHAR(n)/VARCHAR(n) (as
STRING), DECIMAL(p,s), ARRAY<T>, MAP<K,V>, STRUCT<name: T, ...>.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from s3events.config.column_types import simple_type
from s3events.config.value_types import InvalidValue, ValueType

_TOKEN = re.compile(r"\s*(`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")
_EXTRA_SIMPLE = {"binary": "binary", "timestamp_ntz": "timestamp_ntz", "timestamp_ltz": "timestamp"}
_ALLOWED = (
    "comma-separated 'name TYPE' with Spark SQL types: STRING, TINYINT, SMALLINT, INT, BIGINT, FLOAT, "
    "DOUBLE, DECIMAL(p,s), BOOLEAN, DATE, TIMESTAMP, TIMESTAMP_NTZ, BINARY, ARRAY<T>, MAP<K,V>, "
    "STRUCT<name: T, ...>"
)


class DdlError(ValueError):
    """A DDL text that is not a column list; `column` names the column it stopped at (None: none yet)."""

    def __init__(self, column: str | None, why: str) -> None:
        super().__init__(f"column {column!r}: {why}" if column else why)
        self.column = column


def quoted(name: str) -> str:
    """`name` between backticks, a backtick inside doubled (Spark's quoting)."""
    return "`" + name.replace("`", "``") + "`"


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items: list[str] = []
        at = 0
        while at < len(text):
            if text[at:].strip() == "":
                break
            found = _TOKEN.match(text, at)
            if found is None:
                raise DdlError(None, f"unexpected {text[at:].strip()[:20]!r}")
            self.items.append(found.group(1))
            at = found.end()
        self.at = 0

    def peek(self) -> str | None:
        return self.items[self.at] if self.at < len(self.items) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise DdlError(None, f"expected {expected or 'more'} but found {token or 'the end'}")
        self.at += 1
        return token


def _name(tokens: _Tokens) -> str:
    token = tokens.take()
    if token.startswith("`"):
        return token[1:-1].replace("``", "`")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token):
        raise DdlError(None, f"{token!r} is not a column name")
    return token


def _type(tokens: _Tokens) -> str:
    word = tokens.take().lower()
    if word == "array":
        tokens.take("<")
        item = _type(tokens)
        tokens.take(">")
        return f"array<{item}>"
    if word == "map":
        tokens.take("<")
        key = _type(tokens)
        tokens.take(",")
        value = _type(tokens)
        tokens.take(">")
        return f"map<{key},{value}>"
    if word == "struct":
        tokens.take("<")
        fields = []
        while tokens.peek() != ">":
            name = _name(tokens)
            if tokens.peek() == ":":
                tokens.take(":")
            fields.append(f"{quoted(name)}:{_type(tokens)}")
            if tokens.peek() == ",":
                tokens.take(",")
        tokens.take(">")
        return f"struct<{','.join(fields)}>"
    args = _arguments(tokens)
    if word in ("char", "varchar") and len(args) == 1:
        return "string"
    if word in ("decimal", "dec", "numeric"):
        canonical = simple_type(f"decimal({','.join(args)})" if args else "decimal")
    else:
        canonical = None if args else (simple_type(word) or _EXTRA_SIMPLE.get(word))
    if canonical is None:
        shown = f"{word}({','.join(args)})" if args else word
        raise DdlError(None, f"{shown.upper()} is not a Spark SQL type allowed here")
    return canonical


def _arguments(tokens: _Tokens) -> list[str]:
    if tokens.peek() != "(":
        return []
    tokens.take("(")
    args = [tokens.take()]
    while tokens.peek() == ",":
        tokens.take(",")
        args.append(tokens.take())
    tokens.take(")")
    if not all(a.isdigit() for a in args):
        raise DdlError(None, f"type arguments must be numbers, not {', '.join(args)}")
    return args


def parse_columns(text: str) -> Mapping[str, str]:
    """name -> canonical Spark DDL type, in the order written; DdlError naming the column at fault."""
    tokens = _Tokens(text)
    columns: dict[str, str] = {}
    while tokens.peek() is not None:
        name: str | None = None
        try:
            name = _name(tokens)
            if tokens.peek() == ":":
                tokens.take(":")
            canonical = _type(tokens)
            if tokens.peek() is not None:
                tokens.take(",")
        except DdlError as exc:
            raise DdlError(name, str(exc)) from None
        if name.lower() in {n.lower() for n in columns}:
            raise DdlError(name, "is named twice")
        columns[name] = canonical
    if not columns:
        raise DdlError(None, "names no column")
    return MappingProxyType(columns)


def ddl_text(columns: Mapping[str, str]) -> str:
    """The columns as one DDL text `StructType.fromDDL` reads."""
    return ", ".join(f"{quoted(name)} {canonical}" for name, canonical in columns.items())


@dataclass(frozen=True)
class DdlColumnsType(ValueType[Mapping[str, str]]):
    """A Spark DDL column list with nested types, as a read-only mapping name -> canonical DDL type."""

    type_name: ClassVar[str] = "DDL columns"

    def parse(self, text: str) -> Mapping[str, str]:
        try:
            return parse_columns(text)
        except DdlError as exc:
            raise InvalidValue(f"{exc} in {text!r}; allowed {self.allowed()}") from None

    def allowed(self) -> str:
        return _ALLOWED

    def format(self, value: object) -> str:
        return ddl_text(value) if isinstance(value, Mapping) else str(value)
