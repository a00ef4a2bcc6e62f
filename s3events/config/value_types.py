"""Value types of configuration keys: how a key's text is parsed, what it allows, how it is shown. Each
type carries its allowed range or choices; a `Key` (`registry`) names one."""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, Generic, TypeVar
from urllib.parse import urlsplit

# S3 bucket names: 3-63 characters of lower-case letters, digits, dots and hyphens.
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")

T_co = TypeVar("T_co", covariant=True)
S = TypeVar("S", bound=str)


class InvalidValue(ValueError):
    """A text that does not parse as its type. The message shows the value and what is allowed; the caller
    adds the key (see `Key.parse`)."""


# --------------------------------------------------------------------------------------------- value types


class ValueType(ABC, Generic[T_co]):
    """How one key's text becomes a typed value. Subclasses are frozen dataclasses."""

    type_name: ClassVar[str]

    @abstractmethod
    def parse(self, text: str) -> T_co:
        """Parse stripped, non-empty text; raise `InvalidValue` naming the value and what is allowed."""

    @abstractmethod
    def allowed(self) -> str:
        """What is allowed, for error messages and the reference (e.g. `0..20`, `delete, redrive`)."""

    def format(self, value: object) -> str:
        """The properties-file text of a value (the inverse of `parse`)."""
        return str(value)


@dataclass(frozen=True)
class StrType(ValueType[str]):
    """Any non-empty text, optionally restricted to a regular expression (`pattern`, a full match)."""

    pattern: str | None = None
    pattern_doc: str | None = None
    type_name: ClassVar[str] = "string"

    def parse(self, text: str) -> str:
        if self.pattern is not None and re.fullmatch(self.pattern, text) is None:
            raise InvalidValue(f"{text!r} is not valid; allowed {self.allowed()}")
        return text

    def allowed(self) -> str:
        if self.pattern is None:
            return "any text"
        return self.pattern_doc or f"text matching {self.pattern}"


def _range_text(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"{low}..{high}"
    if low is not None:
        return f">= {low}"
    if high is not None:
        return f"<= {high}"
    return "any number"


@dataclass(frozen=True)
class IntType(ValueType[int]):
    """A whole number within `min..max` (inclusive; either bound may be open)."""

    min: int | None = None
    max: int | None = None
    type_name: ClassVar[str] = "int"

    def parse(self, text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise InvalidValue(f"{text!r} is not an integer; allowed {self.allowed()}") from None
        if (self.min is not None and value < self.min) or (self.max is not None and value > self.max):
            raise InvalidValue(f"{text} is out of range; allowed {self.allowed()}")
        return value

    def allowed(self) -> str:
        return _range_text(self.min, self.max)


@dataclass(frozen=True)
class FloatType(ValueType[float]):
    """A finite number within `min..max` (inclusive; either bound may be open)."""

    min: float | None = None
    max: float | None = None
    type_name: ClassVar[str] = "float"

    def parse(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise InvalidValue(f"{text!r} is not a number; allowed {self.allowed()}") from None
        if not math.isfinite(value):
            raise InvalidValue(f"{text!r} is not a finite number; allowed {self.allowed()}")
        if (self.min is not None and value < self.min) or (self.max is not None and value > self.max):
            raise InvalidValue(f"{text} is out of range; allowed {self.allowed()}")
        return value

    def allowed(self) -> str:
        return _range_text(self.min, self.max)

    def format(self, value: object) -> str:
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)


@dataclass(frozen=True)
class BoolType(ValueType[bool]):
    """`true` or `false`, in any letter case; nothing else (no yes/no/1/0)."""

    type_name: ClassVar[str] = "bool"

    def parse(self, text: str) -> bool:
        lowered = text.lower()
        if lowered == "true":
            return True
        if lowered == "false":
            return False
        raise InvalidValue(f"{text!r} is not a boolean; allowed {self.allowed()}")

    def allowed(self) -> str:
        return "true, false"

    def format(self, value: object) -> str:
        return "true" if value else "false"


@dataclass(frozen=True)
class ChoiceType(ValueType[S]):
    """One of a fixed set of strings. Matching ignores letter case; the value is the declared spelling.

    Generic over the value type, so a key can return a `Literal`:
    `Key[Mode]` with `type=ChoiceType(get_args(Mode))` where `Mode = Literal["append", "merge"]`.
    """

    choices: tuple[S, ...]
    type_name: ClassVar[str] = "choice"

    def __post_init__(self) -> None:
        if not self.choices:
            raise ValueError("ChoiceType needs at least one choice")

    def parse(self, text: str) -> S:
        for choice in self.choices:
            if choice.lower() == text.lower():
                return choice
        raise InvalidValue(f"{text!r} is not one of the allowed values; allowed {self.allowed()}")

    def allowed(self) -> str:
        return ", ".join(self.choices)


@dataclass(frozen=True)
class UrlType(ValueType[str]):
    """An absolute `http://` or `https://` URL with a host."""

    type_name: ClassVar[str] = "url"

    def parse(self, text: str) -> str:
        try:
            parts = urlsplit(text)
            parts.port  # noqa: B018 - raises ValueError for a malformed port
        except ValueError:
            raise InvalidValue(f"{text!r} is not a valid URL; allowed {self.allowed()}") from None
        has_space = any(char.isspace() for char in text)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname or has_space:
            raise InvalidValue(f"{text!r} is not a valid URL; allowed {self.allowed()}")
        return text

    def allowed(self) -> str:
        return "an http:// or https:// URL"


def _parse_s3_uri(text: str, *, need_prefix: bool) -> str:
    rest = text[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    if _BUCKET_RE.fullmatch(bucket) is None:
        raise InvalidValue(f"{text!r} does not name a valid S3 bucket (3-63 of a-z, 0-9, '.', '-')")
    if need_prefix and not prefix.strip("/"):
        raise InvalidValue(
            f"{text!r} is a bucket root; a table needs a prefix, e.g. s3://{bucket}/tables/name"
        )
    return text.rstrip("/") if prefix.strip("/") else f"s3://{bucket}"


@dataclass(frozen=True)
class TablePathType(ValueType[str]):
    """Where a Delta table lives: `s3://bucket/prefix` or a local filesystem path.

    Other schemes are rejected: Spark's `s3a://` is not used (delta-rs writes the tables and speaks
    `s3://`), and no other object store is supported. A trailing '/' is dropped, so derived sibling paths
    (`<path>_quarantine`) stay siblings.
    """

    type_name: ClassVar[str] = "table path"

    def parse(self, text: str) -> str:
        scheme = _SCHEME_RE.match(text)
        if scheme is not None:
            name = scheme.group(1)
            if name.lower() != "s3":
                hint = ""
                if name.lower() in ("s3a", "s3n"):
                    hint = f" (write s3:// instead of {name}://; delta-rs, not Spark, writes the tables)"
                raise InvalidValue(
                    f"{text!r} has unsupported scheme '{name}://'; allowed {self.allowed()}{hint}"
                )
            return _parse_s3_uri("s3://" + text[len("s3://") :], need_prefix=True)
        if "\x00" in text:
            raise InvalidValue(f"{text!r} is not a valid local path")
        return text.rstrip("/") or "/"

    def allowed(self) -> str:
        return "s3://bucket/prefix or a local path"


@dataclass(frozen=True)
class S3UriType(ValueType[str]):
    """An `s3://bucket` or `s3://bucket/prefix` URI (a place to list objects)."""

    type_name: ClassVar[str] = "s3 uri"

    def parse(self, text: str) -> str:
        if not text.startswith("s3://"):
            raise InvalidValue(f"{text!r} is not an S3 URI; allowed {self.allowed()}")
        bucket, _, prefix = text[len("s3://") :].partition("/")
        _parse_s3_uri(text, need_prefix=False)
        return f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"

    def allowed(self) -> str:
        return "s3://bucket or s3://bucket/prefix"


@dataclass(frozen=True)
class ListType(ValueType[tuple[str, ...]]):
    """Comma-separated items, each trimmed, empty items dropped; each item is parsed by `item`."""

    item: ValueType[str] = field(default_factory=StrType)
    unique: bool = False
    type_name: ClassVar[str] = "list"

    def parse(self, text: str) -> tuple[str, ...]:
        items: list[str] = []
        for raw in text.split(","):
            stripped = raw.strip()
            if not stripped:
                continue
            value = self.item.parse(stripped)
            if self.unique and value in items:
                raise InvalidValue(f"{value!r} is listed twice in {text!r}; each item may appear once")
            items.append(value)
        return tuple(items)

    def allowed(self) -> str:
        inner = self.item.allowed()
        text = "comma-separated list" if inner == "any text" else f"comma-separated list of {inner}"
        return text + (", no repeats" if self.unique else "")

    def format(self, value: object) -> str:
        if isinstance(value, Iterable) and not isinstance(value, str):
            return ",".join(str(item) for item in value)
        return str(value)


@dataclass(frozen=True)
class KeyValueListType(ValueType[Mapping[str, str]]):
    """Comma-separated `k=v` pairs (trimmed, empty items dropped) as a read-only mapping.

    Neither keys nor values may contain ','; a key may appear once.
    """

    type_name: ClassVar[str] = "k=v list"

    def parse(self, text: str) -> Mapping[str, str]:
        pairs: dict[str, str] = {}
        for raw in text.split(","):
            item = raw.strip()
            if not item:
                continue
            name, sep, value = item.partition("=")
            name = name.strip()
            if not sep or not name:
                raise InvalidValue(f"{item!r} in {text!r} is not k=v; allowed {self.allowed()}")
            if name in pairs:
                raise InvalidValue(f"{name!r} is set twice in {text!r}; each option may appear once")
            pairs[name] = value.strip()
        return MappingProxyType(pairs)

    def allowed(self) -> str:
        return "comma-separated k=v pairs"

    def format(self, value: object) -> str:
        if isinstance(value, Mapping):
            return ",".join(f"{k}={v}" for k, v in value.items())
        return str(value)
