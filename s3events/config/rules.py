"""Cross-key rules: constraints that involve more than one key, checked by `Settings.validate_for`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from s3events.config import keys
from s3events.errors import ConfigError

if TYPE_CHECKING:
    from s3events.config.settings import Settings


@dataclass(frozen=True, slots=True)
class Rule:
    """A check over several keys; `check` raises ConfigError naming the key to change."""

    name: str
    commands: frozenset[str]
    check: Callable[[Settings], None]


def _merge_needs_record_key(settings: Settings) -> None:
    for target in settings.targets:
        mode = settings.get_for(target, keys.TARGET_MODE)
        if mode == "merge" and not settings.get_for(target, keys.TARGET_RECORD_KEY):
            raise ConfigError(
                keys.TARGET_RECORD_KEY.concrete(target),
                f"required when {keys.TARGET_MODE.concrete(target)}=merge: merge updates the rows whose "
                f"record key equals an incoming record's, so name the key column(s), e.g. "
                f"{keys.TARGET_RECORD_KEY.concrete(target)}=id (or use mode=append)",
            )


def _backfill_interval_needs_sources(settings: Settings) -> None:
    if settings.get(keys.BACKFILL_INTERVAL_SECONDS) > 0 and not settings.get(keys.BACKFILL_SOURCES):
        raise ConfigError(
            keys.BACKFILL_SOURCES.name,
            f"required when {keys.BACKFILL_INTERVAL_SECONDS.name} > 0: name the s3://bucket/prefix "
            f"locations to list (or set {keys.BACKFILL_INTERVAL_SECONDS.name}=0 to turn backfill off)",
        )


def _table_paths(settings: Settings) -> Iterator[tuple[str, str]]:
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


def _distinct_table_paths(settings: Settings) -> None:
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
    Rule("backfill interval needs sources", frozenset({"capture"}), _backfill_interval_needs_sources),
)
"""Every cross-key rule and the commands it applies to."""
