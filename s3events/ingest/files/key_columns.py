"""Columns from the object key: the named groups of `key.pattern` and Hive-style `name=value` folders
(`key.columns`), typed by `key.column.types` (else STRING). One rule for both paths: the fast path adds
them to a file's Arrow table (`with_key_columns`), the line path joins the same one-row tables
(`key_rows`) to Spark's rows. A record field of the same name wins where it has a value; where it has
none, the key's text is cast to that field's type.

An object whose key does not match while `key.columns.required=true`, or whose value does not cast to
its declared type, is one error row and nothing else (`failure`).

Pure pyarrow: no AWS, no Spark.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

import pyarrow as pa
import pyarrow.compute as pc

from s3events.ingest.files.lineage import TIMESTAMP

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # Spark's (and Hive's) folder name for a null value
_ARROW_TYPES: Mapping[str, pa.DataType] = {
    "string": pa.string(),
    "tinyint": pa.int8(),
    "smallint": pa.int16(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "date": pa.date32(),
    "timestamp": TIMESTAMP,
}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:Infinity|NaN|inf)", re.IGNORECASE)
_DATE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
_TRUE = {"t", "true", "y", "yes", "1"}  # Spark's string -> boolean cast
_FALSE = {"f", "false", "n", "no", "0"}


def arrow_type(name: str) -> pa.DataType:
    """The Arrow type of a canonical type name (`config.column_types.simple_type`)."""
    decimal = _DECIMAL.fullmatch(name)
    if decimal is not None:
        return pa.decimal128(int(decimal.group(1)), int(decimal.group(2)))
    return _ARROW_TYPES[name]


@dataclass(frozen=True, slots=True)
class KeyColumns:
    """A target's key columns: `pattern` (Python syntax) and `hive` folder names, their declared types
    (canonical names; absent = STRING), and whether every key must give them."""

    pattern: str | None = None
    hive: tuple[str, ...] = ()
    types: tuple[tuple[str, str], ...] = ()
    required: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        """The columns, in order: the pattern's groups, then the folders."""
        groups = (
            sorted(re.compile(self.pattern).groupindex.items(), key=lambda kv: kv[1]) if self.pattern else []
        )
        names = [name for name, _ in groups]
        return (*names, *(name for name in self.hive if name not in names))

    def declared(self, name: str) -> pa.DataType:
        return arrow_type(dict(self.types).get(name, "string"))

    def texts(self, key: str) -> dict[str, str | None] | str:
        """Each column's text in the decoded `key` (None: no value), or why the object has none."""
        texts: dict[str, str | None] = dict.fromkeys(self.names)
        if self.pattern is not None:
            found = re.search(self.pattern, key)
            if found is None and self.required:
                return f"key.pattern {self.pattern} does not match the key"
            if found is not None:
                texts.update(found.groupdict())
        folders = hive_values(key)
        for name in self.hive:
            if name in folders:
                texts[name] = folders[name]
            elif self.required and texts.get(name) is None:
                return f"the key has no {name}=... folder (key.columns)"
        return {name: None if text in ("", HIVE_NULL) else text for name, text in texts.items()}

    def failure(self, key: str) -> str | None:
        """Why the object at `key` gives no rows (one error row instead), or None."""
        texts = self.texts(key)
        if isinstance(texts, str):
            return texts
        for name, text in texts.items():
            if text is not None:
                try:
                    cast_text(text, self.declared(name))
                except ValueError as exc:
                    return f"key column {name}: {exc}"
        return None

    def row(self, key: str, record_types: Mapping[str, pa.DataType]) -> pa.Table:
        """The key's columns as one row: typed as the records' field of that name where they have one
        (a text that does not cast to it is null), else as declared. The key has no `failure`."""
        texts = self.texts(key)
        assert not isinstance(texts, str), texts
        columns: dict[str, pa.Array] = {}
        for name, text in texts.items():
            kind = record_types.get(name, self.declared(name))
            try:
                value = None if text is None else cast_text(text, kind)
            except ValueError:
                value = None
            columns[name] = pa.array([value], kind)
        return pa.table(columns)


def hive_values(key: str) -> dict[str, str]:
    """`name=value` folders of `key` (its last segment is the object's name, not a folder), `%XX` escapes
    undone in both as Spark's partition discovery does; the folder nearest the object wins."""
    values: dict[str, str] = {}
    for segment in key.split("/")[:-1]:
        name, sep, value = segment.partition("=")
        if sep and name:
            values[unescape(name)] = unescape(value)
    return values


def unescape(text: str) -> str:
    """Spark's `unescapePathName`: `%XX` (two hex digits) is the character of that code; anything else
    stays as written."""
    out: list[str] = []
    at = 0
    while at < len(text):
        hexa = text[at + 1 : at + 3]
        if text[at] == "%" and len(hexa) == 2 and all(c in "0123456789abcdefABCDEF" for c in hexa):
            out.append(chr(int(hexa, 16)))
            at += 3
        else:
            out.append(text[at])
            at += 1
    return "".join(out)


def cast_text(text: str, kind: pa.DataType) -> object:
    """`text` as a value of `kind`, as Spark's cast of a string reads it (trimmed); ValueError if it
    does not cast. Types a key cannot hold (nested, binary) give None."""
    value = text.strip()
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return text
    if pa.types.is_integer(kind):
        if not _INTEGER.fullmatch(value):
            raise ValueError(f"{text!r} is not an integer")
        number = int(value)
        bits = kind.bit_width - 1
        if not -(1 << bits) <= number < (1 << bits):
            raise ValueError(f"{text!r} is out of range for {kind}")
        return number
    if pa.types.is_floating(kind):
        if not _NUMBER.fullmatch(value):
            raise ValueError(f"{text!r} is not a number")
        return float(value)
    if pa.types.is_decimal(kind):
        return _decimal(text, kind)
    if pa.types.is_boolean(kind):
        if value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise ValueError(f"{text!r} is not a boolean")
    if pa.types.is_date(kind):
        found = _DATE.fullmatch(value)
        try:
            return date(*(int(g) for g in found.groups())) if found else _no_date(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a date (yyyy-mm-dd)") from None
    if pa.types.is_timestamp(kind):
        return _timestamp(text)
    return None


def _no_date(text: str) -> date:
    raise ValueError(f"{text!r} is not a date (yyyy-mm-dd)")


def _decimal(text: str, kind: pa.Decimal128Type) -> Decimal:
    if not _NUMBER.fullmatch(text.strip()):
        raise ValueError(f"{text!r} is not a decimal number")
    try:
        value = Decimal(text.strip()).quantize(Decimal(1).scaleb(-kind.scale), rounding=ROUND_HALF_UP)
    except InvalidOperation:
        raise ValueError(f"{text!r} does not fit {kind}") from None
    if not value.is_finite() or len(value.as_tuple().digits) > kind.precision:
        raise ValueError(f"{text!r} does not fit {kind}")
    return value


def _timestamp(text: str) -> datetime:
    value = text.strip()
    try:
        parsed = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError:
        raise ValueError(f"{text!r} is not a timestamp (ISO 8601)") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def with_key_columns(table: pa.Table, columns: KeyColumns, key: str) -> pa.Table:
    """`table` (one object's rows) with the key's columns: a record field of the same name keeps its
    values and takes the key's where it has none; the others are added after the data columns."""
    record = {
        f.name: f.type for f in table.schema if f.name in columns.names and not pa.types.is_null(f.type)
    }
    row = columns.row(key, record)
    n = table.num_rows
    for name in columns.names:
        value = pa.repeat(row.column(name)[0], n)
        if name in record:
            index = table.column_names.index(name)
            table = table.set_column(index, name, pc.coalesce(table.column(index), value))
        elif name in table.column_names:  # all null in this file: the key's value, its own type
            table = table.set_column(table.column_names.index(name), name, value)
        else:
            table = table.append_column(name, value)
    return table


def object_key(uri: str) -> str:
    """The key of an `s3://bucket/key` URI (`_source_file`)."""
    return uri.split("/", 3)[3]
