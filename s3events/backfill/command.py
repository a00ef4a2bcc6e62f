"""`s3events backfill`'s options, checked: a bad value is a ConfigError naming the option (exit 2)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from s3events.backfill.model import BackfillOptions, TimeWindow, parse_time
from s3events.config import keys
from s3events.config.value_types import InvalidValue, S3UriType
from s3events.errors import ConfigError


@dataclass(frozen=True, slots=True)
class BackfillRequest:
    sources: tuple[str, ...]  # normalized s3:// URIs from --source; empty: the configured ones
    options: BackfillOptions

    @property
    def conf_overrides(self) -> list[str]:
        """`--source` stands in for `s3events.backfill.sources` (which the command requires otherwise)."""
        return [f"{keys.BACKFILL_SOURCES.name}={','.join(self.sources)}"] if self.sources else []


def backfill_request(
    sources: Sequence[str], *, since: str | None, until: str | None, dry_run: bool
) -> BackfillRequest:
    checked: list[str] = []
    for text in sources:
        try:
            uri = S3UriType().parse(text.strip())
        except InvalidValue as exc:
            raise ConfigError("--source", str(exc)) from None
        if "," in uri:  # the same limit as the comma-separated key it stands in for
            raise ConfigError("--source", f"{text!r} contains ','; a source cannot contain a comma")
        if uri not in checked:
            checked.append(uri)
    try:
        window = TimeWindow(since=_time("--since", since), until=_time("--until", until))
    except ValueError as exc:
        raise ConfigError("--until", str(exc)) from None
    return BackfillRequest(tuple(checked), BackfillOptions(window=window, dry_run=dry_run))


def _time(option: str, text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return parse_time(text)
    except ValueError:
        raise ConfigError(
            option, f"{text!r} is not an ISO 8601 time, e.g. 2026-01-31T12:00:00Z (no offset means UTC)"
        ) from None
