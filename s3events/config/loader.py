"""`load_settings`: the properties file plus `--conf key=value` overrides, as typed `Settings`."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import javaproperties

from s3events.config import keys
from s3events.config.interpolation import interpolate
from s3events.config.settings import Settings
from s3events.errors import ConfigError

PROPS_OPTION = "--props"
CONF_OPTION = "--conf"


def load_settings(
    props_path: str | os.PathLike[str] | None,
    overrides: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Load and check the configuration.

    1. Read `props_path` (a Java `.properties` file, UTF-8; None = no file). A key set twice is an error.
    2. Apply `overrides` (`key=value` texts from repeated `--conf`); later ones win over the file and
       over earlier ones.
    3. Replace `${VAR}` / `${VAR:-default}` in values from `env` (default: `os.environ`).
    4. Reject unknown keys (with a did-you-mean) and per-target keys of undeclared targets.
    5. Parse and range-check every value. An empty value means unset: the default applies.

    Every mistake raises ConfigError naming the key (or `--props` / `--conf`), the value and what is
    allowed. Required keys are checked per command by `Settings.validate_for`.
    """
    if isinstance(overrides, str):
        raise TypeError("overrides must be a sequence of 'key=value' texts, not one text")
    environment = os.environ if env is None else env

    raw: dict[str, str] = {}
    source: str | None = None
    if props_path is not None:
        source = os.fspath(props_path)
        raw.update(read_properties(source))
    for text in overrides:
        name, value = parse_override(text)
        raw[name] = value

    # Instance lists first: they decide which per-target key names exist.
    parsed: dict[tuple[str, str | None], Any] = {}
    declared: dict[str, tuple[str, ...]] = {}
    for list_key in keys.REGISTRY.instance_keys:
        list_text = raw.get(list_key.name)
        names = None
        if list_text is not None:
            names = list_key.parse(interpolate(list_text, key=list_key.name, env=environment))
        if names is not None:
            parsed[(list_key.name, None)] = names
        declared[list_key.name] = tuple(names or ())

    for name, text in raw.items():
        key, target = keys.REGISTRY.resolve(name, declared)
        if key in keys.REGISTRY.instance_keys:
            continue
        typed = key.parse(interpolate(text, key=name, env=environment), target=target)
        if typed is not None:
            parsed[(key.name, target)] = typed
    return Settings(parsed, source=source)


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """The key/value pairs of a `.properties` file (UTF-8), in file order. ConfigError if it cannot be read
    or sets a key twice."""
    shown = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fp:
            pairs: list[tuple[str, str]] = javaproperties.load(fp, object_pairs_hook=list)
    except FileNotFoundError:
        raise ConfigError(PROPS_OPTION, f"properties file {shown} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(PROPS_OPTION, f"properties file {shown} is a directory") from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(PROPS_OPTION, f"cannot read properties file {shown}: {reason}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(PROPS_OPTION, f"properties file {shown} is not UTF-8 text: {exc.reason}") from None
    except ValueError as exc:  # javaproperties.InvalidUEscapeError and the like
        raise ConfigError(PROPS_OPTION, f"properties file {shown} is malformed: {exc}") from None
    result: dict[str, str] = {}
    for name, value in pairs:
        if name in result:
            raise ConfigError(name, f"set more than once in {shown}; keep one line")
        result[name] = value
    return result


def parse_override(text: str) -> tuple[str, str]:
    """`key=value` (from `--conf`) as (key, value); the value may contain '='."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ConfigError(CONF_OPTION, f"{text!r} is not key=value, e.g. --conf s3events.log.level=DEBUG")
    return name, value
