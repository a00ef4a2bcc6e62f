"""What one command needs of the configuration (`validate_for`): its required keys, and the cross-key
rules, constraints that involve more than one key. Rules read values through `Values`, the part of
`Settings` they use, so this module and `settings` do not import each other."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol, TypeVar

from s3events.config import keys
from s3events.config.registry import Key, SettingsView, is_missing
from s3events.errors import ConfigError

T = TypeVar("T")


class Values(SettingsView, Protocol):
    """What rules read of `Settings`: the other settings, and the declared targets."""

    @property
    def targets(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True)
class Rule:
    """A check over several keys; `check` raises ConfigError naming the key to change."""

    name: str
    commands: frozenset[str]
    check: Callable[[Values], None]


def _merge_needs_record_key(settings: Values) -> None:
    for target in settings.targets:
        mode = settings.get_for(target, keys.TARGET_MODE)
        if mode == "merge" and not settings.get_for(target, keys.TARGET_RECORD_KEY):
            raise ConfigError(
                keys.TARGET_RECORD_KEY.concrete(target),
                f"required when {keys.TARGET_MODE.concrete(target)}=merge: merge updates the rows whose "
                f"record key equals an incoming record's, so name the key column(s), e.g. "
                f"{keys.TARGET_RECORD_KEY.concrete(target)}=id (or use mode=append)",
            )


def _deletes_need_a_merge_target(settings: Values) -> None:
    """delete.field removes a key's row, which only merge mode has; a mirroring target's rows follow
    objects, not records."""
    for target in settings.targets:
        field = keys.TARGET_DELETE_FIELD.concrete(target)
        values = keys.TARGET_DELETE_VALUES.concrete(target)
        if not settings.get_for(target, keys.TARGET_DELETE_FIELD):
            if settings.get_for(target, keys.TARGET_DELETE_VALUES):
                raise ConfigError(values, f"is set but {field} is not: name the column the values are in")
            continue
        if not settings.get_for(target, keys.TARGET_DELETE_VALUES):
            raise ConfigError(values, f"required with {field}: the values that mark a delete, e.g. D or true")
        mode = keys.TARGET_MODE.concrete(target)
        if settings.get_for(target, keys.TARGET_MODE) != "merge":
            raise ConfigError(
                field,
                f"set with {mode}={settings.get_for(target, keys.TARGET_MODE)}: record deletes remove a "
                f"record key's row, so they need {mode}=merge (or unset {field})",
            )
        removed = keys.TARGET_ON_OBJECT_REMOVED.concrete(target)
        if settings.get_for(target, keys.TARGET_ON_OBJECT_REMOVED) == "delete":
            raise ConfigError(
                field,
                f"set beside {removed}=delete: a mirroring target's rows follow their objects, record "
                f"deletes follow keys; use one of them ({removed}=ignore, or unset {field})",
            )


def _xml_needs_row_tag(settings: Values) -> None:
    """An XML file has no record boundary of its own: the element that is one row must be named."""
    for target in settings.targets:
        if settings.get_for(target, keys.TARGET_FORMAT) != "xml":
            continue
        options = settings.get_for(target, keys.TARGET_READER_OPTIONS)
        if not {k.lower(): v for k, v in options.items()}.get("rowtag", "").strip():
            raise ConfigError(
                keys.TARGET_READER_OPTIONS.concrete(target),
                f"has no rowTag, which {keys.TARGET_FORMAT.concrete(target)}=xml requires: name the element "
                f"that is one record, e.g. {keys.TARGET_READER_OPTIONS.concrete(target)}=rowTag=record",
            )


def _key_column_types_name_key_columns(settings: Values) -> None:
    for target in settings.targets:
        pattern = settings.get_for(target, keys.TARGET_KEY_PATTERN)
        named = {
            *(re.compile(pattern).groupindex if pattern else ()),
            *settings.get_for(target, keys.TARGET_KEY_COLUMNS),
        }
        known = ", ".join(sorted(named)) or "none"
        for name in settings.get_for(target, keys.TARGET_KEY_COLUMN_TYPES):
            if name not in named:
                raise ConfigError(
                    keys.TARGET_KEY_COLUMN_TYPES.concrete(target),
                    f"types column {name!r}, which is neither a named group of "
                    f"{keys.TARGET_KEY_PATTERN.concrete(target)} nor listed in "
                    f"{keys.TARGET_KEY_COLUMNS.concrete(target)}; key columns: {known}",
                )


_RESERVED_COLUMNS = ("_source_file", "_source_etag", "_source_line", "_event_time", "_ingested_at")
_RESCUE_FORMATS = ("json", "csv")


def _ddl_names(ddl: str) -> list[str]:
    """The top-level column names of a DDL schema ('a INT, b STRUCT<c: INT>' -> a, b)."""
    names, depth, start = [], 0, 0
    for i, char in enumerate(ddl + ","):
        depth += (char in "<(") - (char in ">)")
        if char == "," and depth == 0:
            names.append(ddl[start:i].strip().split(" ")[0].strip("`"))
            start = i + 1
    return [n for n in names if n]


def _rescued_column_fits(settings: Values) -> None:
    """The rescued column is a column of its own: no lineage, partition, key or declared column, and only
    where the rows come from records whose fields it can hold (json, csv)."""
    for target in settings.targets:
        name = settings.get_for(target, keys.TARGET_RESCUED_COLUMN)
        mode = settings.get_for(target, keys.TARGET_SCHEMA_EVOLUTION)
        key = keys.TARGET_RESCUED_COLUMN.concrete(target)
        if name is None and mode != "rescue":
            continue
        fmt = settings.get_for(target, keys.TARGET_FORMAT)
        if fmt not in _RESCUE_FORMATS:
            raise ConfigError(
                keys.TARGET_SCHEMA_EVOLUTION.concrete(target) if name is None else key,
                f"a rescued column holds record fields: it needs {keys.TARGET_FORMAT.concrete(target)} "
                f"in {', '.join(_RESCUE_FORMATS)}, not {fmt}",
            )
        name = name or "_rescued_data"
        pattern = settings.get_for(target, keys.TARGET_KEY_PATTERN)
        taken = {
            "a lineage column": _RESERVED_COLUMNS,
            "Spark's corrupt-record column": ("_corrupt_record",),
            f"named in {keys.TARGET_PARTITION_BY.concrete(target)}": settings.get_for(
                target, keys.TARGET_PARTITION_BY
            ),
            f"named in {keys.TARGET_RECORD_KEY.concrete(target)}": settings.get_for(
                target, keys.TARGET_RECORD_KEY
            ),
            f"a column of {keys.TARGET_SCHEMA.concrete(target)}": _ddl_names(
                settings.get_for(target, keys.TARGET_SCHEMA) or ""
            ),
            "a key column": (
                *(re.compile(pattern).groupindex if pattern else ()),
                *settings.get_for(target, keys.TARGET_KEY_COLUMNS),
            ),
        }
        for where, names in taken.items():
            if name.lower() in {n.lower() for n in names}:
                raise ConfigError(
                    key,
                    f"{name!r} is {where}; the rescued column needs a name of its own, e.g. _rescued_data",
                )


_INFERRING_FORMATS = ("json", "csv")


def _schema_keys_fit(settings: Values) -> None:
    """schema.hints and schema.infer.types type what inference gives, which only json and csv have; a
    target's columns are declared once (schema or schema.file)."""
    for target in settings.targets:
        fmt = settings.get_for(target, keys.TARGET_FORMAT)
        for key, unset in ((keys.TARGET_SCHEMA_HINTS, {}), (keys.TARGET_SCHEMA_INFER_TYPES, True)):
            if settings.get_for(target, key) != unset and fmt not in _INFERRING_FORMATS:
                raise ConfigError(
                    key.concrete(target),
                    f"types inferred columns, which {keys.TARGET_FORMAT.concrete(target)}={fmt} has not: "
                    f"it applies to {', '.join(_INFERRING_FORMATS)}",
                )
        for name in settings.get_for(target, keys.TARGET_SCHEMA_HINTS):
            if name.lower() in {*_RESERVED_COLUMNS, "_corrupt_record"}:
                raise ConfigError(
                    keys.TARGET_SCHEMA_HINTS.concrete(target),
                    f"column {name!r} is the writer's own (lineage or Spark's corrupt-record column); "
                    "hint the records' fields",
                )
        if settings.get_for(target, keys.TARGET_SCHEMA) and settings.get_for(target, keys.TARGET_SCHEMA_FILE):
            raise ConfigError(
                keys.TARGET_SCHEMA_FILE.concrete(target),
                f"set either {keys.TARGET_SCHEMA.concrete(target)} or "
                f"{keys.TARGET_SCHEMA_FILE.concrete(target)}, not both",
            )


def _backfill_interval_needs_sources(settings: Values) -> None:
    if settings.get(keys.BACKFILL_INTERVAL_SECONDS) > 0 and not settings.get(keys.BACKFILL_SOURCES):
        raise ConfigError(
            keys.BACKFILL_SOURCES.name,
            f"required when {keys.BACKFILL_INTERVAL_SECONDS.name} > 0: name the s3://bucket/prefix "
            f"locations to list (or set {keys.BACKFILL_INTERVAL_SECONDS.name}=0 to turn backfill off)",
        )


def _table_paths(settings: Values) -> Iterator[tuple[str, str]]:
    """(concrete key name, path) of every Delta table the settings name."""
    for key in (keys.METADATA_TABLE_PATH, keys.QUARANTINE_TABLE_PATH):
        value = settings.get(key)
        if value:
            yield key.name, value
    for target in settings.targets:
        for key in (keys.TARGET_PATH, keys.TARGET_ERROR_TABLE_PATH):
            value = settings.get_for(target, key)
            if value:
                yield key.concrete(target), value


def _comparable(path: str) -> str:
    return path if path.startswith("s3://") else os.path.abspath(path)


def _distinct_table_paths(settings: Values) -> None:
    seen: list[tuple[str, str, str]] = []
    for name, path in _table_paths(settings):
        here = _comparable(path)
        for other_name, other_path, there in seen:
            if here == there:
                raise ConfigError(
                    name, f"{path} is also the table of {other_name}; every table needs its own path"
                )
            if here.startswith(there.rstrip("/") + "/") or there.startswith(here.rstrip("/") + "/"):
                raise ConfigError(
                    name,
                    f"{path} and the table of {other_name} ({other_path}) are nested; a Delta table may "
                    f"not contain another",
                )
        seen.append((name, path, here))


RULES: tuple[Rule, ...] = (
    Rule("distinct table paths", frozenset(keys.COMMANDS), _distinct_table_paths),
    Rule("merge needs record.key", frozenset({"ingest"}), _merge_needs_record_key),
    Rule("deletes need a merge target", frozenset({"ingest"}), _deletes_need_a_merge_target),
    Rule("key column types name key columns", frozenset({"ingest"}), _key_column_types_name_key_columns),
    Rule("backfill interval needs sources", frozenset({"capture"}), _backfill_interval_needs_sources),
    Rule("xml needs rowTag", frozenset({"ingest"}), _xml_needs_row_tag),
    Rule("schema keys fit", frozenset({"ingest"}), _schema_keys_fit),
    Rule("rescued column fits", frozenset({"ingest"}), _rescued_column_fits),
)
"""Every cross-key rule and the commands it applies to."""


def validate_for(settings: Values, command: str) -> None:
    """Check everything `command` needs: every key whose `required_for` names it (per-target keys for
    every declared target) and the cross-key rules that apply to it. Raises ConfigError."""
    if command not in keys.COMMANDS:
        raise ValueError(f"unknown command {command!r}; known: {', '.join(keys.COMMANDS)}")
    for key in keys.REGISTRY.plain:
        if command in key.required_for and is_missing(settings.get(key)):
            missing(key, None, command)
    for key in keys.REGISTRY.templated:
        if command not in key.required_for:
            continue
        for target in settings.targets:
            if is_missing(settings.get_for(target, key)):
                missing(key, target, command)
    for rule in RULES:
        if command in rule.commands:
            rule.check(settings)


def missing(key: Key[Any], target: str | None, command: str | None) -> NoReturn:
    """ConfigError: `key` (of `target`) has no value, and `command` (or the commands it is required
    for) needs one."""
    needed = f"`s3events {command}`" if command else ", ".join(sorted(key.required_for)) or "this step"
    name = key.concrete(target)
    raise ConfigError(
        name,
        f"missing required key {name} (needed by {needed}): {key.doc} "
        f"Set it in the properties file or pass --conf {name}=VALUE.",
    )
