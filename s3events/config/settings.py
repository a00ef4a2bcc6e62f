"""`Settings`: the immutable, typed result of loading the configuration (see `loader.load_settings`)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NoReturn, TypeVar, cast

from s3events.config import keys, rules
from s3events.config.registry import Key, is_missing
from s3events.errors import ConfigError

T = TypeVar("T")

_REDACTED = "***"


class Settings:
    """Typed configuration values; unset keys answer with their (possibly derived) default.

    Build one with `load_settings`. Values were parsed and range-checked while loading; `validate_for`
    checks what one command needs (required keys and cross-key rules).
    """

    __slots__ = ("_source", "_values")

    _values: Mapping[tuple[str, str | None], Any]
    _source: str | None

    def __init__(self, values: Mapping[tuple[str, str | None], Any], *, source: str | None = None) -> None:
        """Prefer `load_settings`. `values` maps (declared key name, target name or None) to a parsed
        value."""
        object.__setattr__(self, "_values", MappingProxyType(dict(values)))
        object.__setattr__(self, "_source", source)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("Settings is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("Settings is immutable")

    def __repr__(self) -> str:
        return f"Settings(source={self._source!r}, values={self.as_redacted_dict()!r})"

    # --------------------------------------------------------------------------------------- reading

    @property
    def source(self) -> str | None:
        """The properties file these settings were loaded from (None when there was none)."""
        return self._source

    @property
    def targets(self) -> tuple[str, ...]:
        """The target names declared in `s3events.ingest.targets`, in order."""
        return self.get(keys.INGEST_TARGETS)

    def get(self, key: Key[T]) -> T:
        """The value of a plain key: as set, else its derived default, else its default."""
        if key.templated:
            raise TypeError(f"{key.name} is a per-target key: use get_for(target, key)")
        return self._lookup(key, None)

    def get_for(self, target: str, key: Key[T]) -> T:
        """The value of a per-target key (`s3events.ingest.target.<name>.*`) for one declared target."""
        if not key.templated:
            raise TypeError(f"{key.name} is not a per-target key: use get(key)")
        self._check_target(target, key)
        return self._lookup(key, target)

    def is_set(self, key: Key[Any], target: str | None = None) -> bool:
        """Whether the key was given a non-empty value (in the file or an override), not defaulted."""
        return (key.name, target) in self._values

    def require(self, key: Key[T | None]) -> T:
        """The value of a plain key that must be set; ConfigError "missing required key" otherwise."""
        value = self.get(key)
        if is_missing(value):
            rules.missing(key, None, None)
        assert value is not None
        return value

    def require_for(self, target: str, key: Key[T | None]) -> T:
        """`require` for a per-target key."""
        value = self.get_for(target, key)
        if is_missing(value):
            rules.missing(key, target, None)
        assert value is not None
        return value

    # ------------------------------------------------------------------------------------ validating

    def validate_for(self, command: str) -> None:
        """Check everything `command` needs (`rules.validate_for`). Raises ConfigError."""
        rules.validate_for(self, command)

    # ------------------------------------------------------------------------------------- reporting

    def as_redacted_dict(self) -> dict[str, str | None]:
        """Every effective value (set or default) as text, keyed by concrete key name, for logging.

        Values of keys declared `secret` are shown as '***'; unset optional keys as None.
        """
        result: dict[str, str | None] = {}
        for key in keys.REGISTRY:
            if not key.templated:
                result[key.name] = self._display(key, None)
                continue
            for target in self.targets:
                result[key.concrete(target)] = self._display(key, target)
        return result

    # ------------------------------------------------------------------------------------- internals

    def _lookup(self, key: Key[T], target: str | None) -> T:
        slot = (key.name, target)
        if slot in self._values:
            return cast(T, self._values[slot])
        if key.default_from is not None:
            derived = key.default_from(self, target)
            if derived is not None:
                return derived
        # A key whose default is None is declared Key[X | None], so None is a T there.
        return cast(T, key.default)

    def _display(self, key: Key[Any], target: str | None) -> str | None:
        value = self._lookup(key, target)
        if value is None:
            return None
        return _REDACTED if key.secret else key.format(value)

    def _check_target(self, target: str, key: Key[Any]) -> None:
        if target not in self.targets:
            declared = ", ".join(self.targets) or "none"
            raise ConfigError(
                key.concrete(target),
                f"{target!r} is not declared in {keys.INGEST_TARGETS.name} (declared: {declared})",
            )
