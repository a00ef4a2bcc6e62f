"""The declaration machinery: value types, `Key` (one declaration per key) and the `Registry` of all keys.

Style model: Hudi's ConfigProperty. A key is declared once, with its name, value type (which carries the
allowed range or choices), default, doc line and the commands that need it; the loader, `Settings`, the
generated reference (docs/configuration.md) and the sample properties file all derive from that declaration.

Templated keys hold per-instance settings: `s3events.ingest.target.<name>.path` is declared once and used as
`s3events.ingest.target.events.path` for every `<name>` listed in the key named by `instances_from`
(`s3events.ingest.targets`).
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from difflib import get_close_matches
from types import MappingProxyType
from typing import Any, ClassVar, Generic, Protocol, TypeVar
from urllib.parse import urlsplit

from s3events.errors import ConfigError

PREFIX = "s3events."
PLACEHOLDER = "<name>"
NAME_PATTERN = r"[A-Za-z0-9_-]+"
"""What a template instance name (a target name) may look like."""

# S3 bucket names: 3-63 characters of lower-case letters, digits, dots and hyphens.
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_CREDENTIAL_WORDS = ("secret", "access.key", "password", "session.token", "credential")
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")

T = TypeVar("T")
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


# ------------------------------------------------------------------------------------------------ keys


class SettingsView(Protocol):
    """What a derived default (`Key.default_from`) may read: the other settings."""

    def get(self, key: Key[T]) -> T: ...

    def get_for(self, target: str, key: Key[T]) -> T: ...


@dataclass(frozen=True, kw_only=True, eq=False)
class Key(Generic[T_co]):
    """One configuration key, declared once.

    The type parameter is what `Settings.get` returns: include `None` (`Key[str | None]`) when the key
    may be unset.
    A key with `default_from` has a derived default: `default_from(settings, target)` computes it from
    other keys (`target` is the instance name for templated keys, else None); `default_text` describes it.
    """

    name: str
    type: ValueType[T_co]
    doc: str
    default: T_co | None = None
    default_from: Callable[[SettingsView, str | None], T_co | None] | None = None
    default_text: str | None = None
    required_for: AbstractSet[str] = frozenset()
    secret: bool = False
    group: str = "General"
    instances_from: str | None = None
    """For a templated key: the name of the list key that declares the instance names."""

    _pattern: re.Pattern[str] | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        object.__setattr__(self, "required_for", frozenset(self.required_for))
        if not self.name.startswith(PREFIX):
            raise ValueError(f"key {self.name!r} must start with {PREFIX!r}")
        if not self.doc.strip() or "\n" in self.doc:
            raise ValueError(f"key {self.name!r} needs a one-line doc")
        if self.default_from is not None and not self.default_text:
            raise ValueError(f"key {self.name!r}: a derived default needs default_text for the reference")
        count = self.name.count(PLACEHOLDER)
        if count > 1:
            raise ValueError(f"key {self.name!r} has more than one {PLACEHOLDER}")
        if count == 1:
            if self.instances_from is None:
                raise ValueError(f"templated key {self.name!r} needs instances_from")
            head, tail = self.name.split(PLACEHOLDER)
            pattern = re.compile(f"{re.escape(head)}(?P<name>{NAME_PATTERN}){re.escape(tail)}")
            object.__setattr__(self, "_pattern", pattern)
        elif self.instances_from is not None:
            raise ValueError(f"key {self.name!r} has instances_from but no {PLACEHOLDER}")

    @property
    def templated(self) -> bool:
        return self._pattern is not None

    @property
    def allowed(self) -> str:
        return self.type.allowed()

    def concrete(self, target: str | None = None) -> str:
        """The key name as written in a file: the template with `<name>` filled in."""
        if not self.templated:
            if target is not None:
                raise TypeError(f"{self.name} is not a per-target key")
            return self.name
        if target is None:
            raise TypeError(f"{self.name} is a per-target key: give the target name")
        return self.name.replace(PLACEHOLDER, target)

    def match(self, name: str) -> str | None:
        """For a templated key: the instance name if `name` is an instance of this template."""
        if self._pattern is None:
            return None
        found = self._pattern.fullmatch(name)
        return found.group("name") if found else None

    def parse(self, text: str, *, target: str | None = None) -> T_co | None:
        """Parse a value as written in a file. Empty (after trimming) means unset: returns None."""
        stripped = text.strip()
        if not stripped:
            return None
        try:
            return self.type.parse(stripped)
        except InvalidValue as exc:
            message = str(exc) if not self.secret else f"the value is not valid; allowed {self.allowed}"
            raise ConfigError(self.concrete(target), message) from None

    def format(self, value: object) -> str:
        if value is None:
            return ""
        return self.type.format(value)

    def default_display(self) -> str:
        """The default as the reference shows it: derived text, the formatted value, or '' when unset."""
        if self.default_text:
            return self.default_text
        return self.format(self.default)


def is_missing(value: object) -> bool:
    """Unset, or an empty list / text / mapping: what a required key may not be."""
    if value is None:
        return True
    if isinstance(value, str | tuple | list | Mapping):
        return len(value) == 0
    return False


# -------------------------------------------------------------------------------------------- registry


class Registry:
    """All declared keys, in declaration order, with name lookup for plain and templated keys."""

    def __init__(self, keys: Iterable[Key[Any]]) -> None:
        self._keys: tuple[Key[Any], ...] = tuple(keys)
        self._by_name: dict[str, Key[Any]] = {}
        for key in self._keys:
            if key.name in self._by_name:
                raise ValueError(f"key {key.name!r} is declared twice")
            self._by_name[key.name] = key
        for key in self._keys:
            if key.instances_from is not None and key.instances_from not in self._by_name:
                raise ValueError(f"{key.name}: instances_from {key.instances_from!r} is not declared")

    def __iter__(self) -> Iterator[Key[Any]]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, Key) and self._by_name.get(key.name) is key

    @property
    def plain(self) -> tuple[Key[Any], ...]:
        return tuple(key for key in self._keys if not key.templated)

    @property
    def templated(self) -> tuple[Key[Any], ...]:
        return tuple(key for key in self._keys if key.templated)

    @property
    def instance_keys(self) -> tuple[Key[Any], ...]:
        """The list keys that declare template instances (e.g. `s3events.ingest.targets`)."""
        names = dict.fromkeys(key.instances_from for key in self._keys if key.instances_from)
        return tuple(self._by_name[name] for name in names if name is not None)

    def candidates(self, declared: Mapping[str, Sequence[str]]) -> list[str]:
        """Every valid key name: plain names, and templates filled in with each declared instance
        (the bare template when none is declared)."""
        names: list[str] = []
        for key in self._keys:
            if not key.templated:
                names.append(key.name)
                continue
            instances = declared.get(key.instances_from or "", ())
            if instances:
                names.extend(key.concrete(instance) for instance in instances)
            else:
                names.append(key.name)
        return names

    def resolve(self, name: str, declared: Mapping[str, Sequence[str]]) -> tuple[Key[Any], str | None]:
        """The key a name written in a file refers to, and its instance name for templated keys.

        `declared` maps each instance list key (`s3events.ingest.targets`) to the names it declares.
        Raises ConfigError for an unknown key (with a did-you-mean) or an undeclared instance name.
        """
        key = self._by_name.get(name)
        if key is not None and not key.templated:
            return key, None
        for template in self.templated:
            instance = template.match(name)
            if instance is None:
                continue
            names = tuple(declared.get(template.instances_from or "", ()))
            if instance not in names:
                listed = ", ".join(names) if names else "none"
                hint = _did_you_mean(instance, names)
                raise ConfigError(
                    name,
                    f"{instance!r} is not declared in {template.instances_from} (declared: {listed}); "
                    f"add it there or fix the key{hint}",
                )
            return template, instance
        raise ConfigError(name, self._unknown_message(name, declared))

    def _unknown_message(self, name: str, declared: Mapping[str, Sequence[str]]) -> str:
        message = "unknown key"
        if not name.startswith(PREFIX):
            message += f" (every key starts with {PREFIX!r})"
        lowered = name.lower()
        if any(word in lowered for word in _CREDENTIAL_WORDS):
            message += (
                "; credentials are never read from properties files: use the AWS credential chain "
                "(environment variables, a profile, or an instance/container role)"
            )
        hint = _did_you_mean(name, self.candidates(declared))
        return message + (hint or "; see docs/configuration.md for every key")


def _did_you_mean(word: str, candidates: Sequence[str]) -> str:
    # Key names share long prefixes, so many score as "close": offer one name when one is very close.
    matches = get_close_matches(word, list(candidates), n=1, cutoff=0.9)
    if not matches:
        matches = get_close_matches(word, list(candidates), n=3, cutoff=0.6)
    if not matches:
        return ""
    if len(matches) == 1:
        return f"; did you mean {matches[0]}?"
    return f"; did you mean one of: {', '.join(matches)}?"
