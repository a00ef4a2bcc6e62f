"""The declaration machinery: `Key` (one declaration per key, of a `value_types` type) and the `Registry`
of all keys.

Style model: Hudi's ConfigProperty. A key is declared once, with its name, value type (which carries the
allowed range or choices), default, doc line and the commands that need it; the loader, `Settings`, the
generated reference (docs/configuration.md) and the sample properties file all derive from that declaration.

Templated keys hold per-instance settings: `s3events.ingest.target.<name>.path` is declared once and used as
`s3events.ingest.target.events.path` for every `<name>` listed in the key named by `instances_from`
(`s3events.ingest.targets`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from difflib import get_close_matches
from typing import Any, Generic, Protocol, TypeVar

from s3events.config.value_types import InvalidValue, ValueType
from s3events.errors import ConfigError

PREFIX = "s3events."
PLACEHOLDER = "<name>"
NAME_PATTERN = r"[A-Za-z0-9_-]+"
"""What a template instance name (a target name) may look like."""

_CREDENTIAL_WORDS = ("secret", "access.key", "password", "session.token", "credential")

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
S = TypeVar("S", bound=str)


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


@dataclass(frozen=True)
class Removed:
    """A key that no longer exists: a configuration that sets it fails at start-up saying why (before
    the first release a key that does nothing is removed rather than kept and ignored)."""

    name: str  # may hold `<name>`, as a templated key's does
    why: str  # completes "removed: ..."

    def matches(self, name: str) -> bool:
        head, templated, tail = self.name.partition(PLACEHOLDER)
        if not templated:
            return name == self.name
        return re.fullmatch(f"{re.escape(head)}{NAME_PATTERN}{re.escape(tail)}", name) is not None


# -------------------------------------------------------------------------------------------- registry


class Registry:
    """All declared keys, in declaration order, with name lookup for plain and templated keys."""

    def __init__(self, keys: Iterable[Key[Any]], removed: Iterable[Removed] = ()) -> None:
        self._keys: tuple[Key[Any], ...] = tuple(keys)
        self.removed: tuple[Removed, ...] = tuple(removed)
        self._by_name: dict[str, Key[Any]] = {}
        for key in self._keys:
            if key.name in self._by_name:
                raise ValueError(f"key {key.name!r} is declared twice")
            self._by_name[key.name] = key
        for key in self._keys:
            if key.instances_from is not None and key.instances_from not in self._by_name:
                raise ValueError(f"{key.name}: instances_from {key.instances_from!r} is not declared")
        for gone in self.removed:
            if gone.name in self._by_name:
                raise ValueError(f"key {gone.name!r} is declared and removed")

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
        Raises ConfigError for an unknown key (with a did-you-mean), a removed one (saying why) or an
        undeclared instance name.
        """
        key = self._by_name.get(name)
        if key is not None and not key.templated:
            return key, None
        gone = next((r for r in self.removed if r.matches(name)), None)
        if gone is not None:
            raise ConfigError(name, f"removed: {gone.why}; delete the key")
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
