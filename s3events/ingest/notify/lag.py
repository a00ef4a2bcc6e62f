"""How far a target's notifications are behind, as `s3events status` (another process) reads it: data
commits at or after the cursor its table records. The newest announced commit is recorded by the next
one, so a healthy target shows 0 or 1."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from s3events.config import Settings, keys
from s3events.infra.delta import open_table
from s3events.ingest.notify.announce import destinations
from s3events.ingest.notify.history import commit_infos
from s3events.ingest.notify.model import cursor_id, notices
from s3events.ingest.target import TargetSpec

READ_AT_MOST = 1000  # versions a status run reads past the cursor


def notify_lag(path: str, app_id: str, storage: Mapping[str, str]) -> tuple[int, bool] | None:
    """(data commits not recorded as announced, whether there may be more past READ_AT_MOST versions);
    None when the table or its cursor does not exist yet."""
    table = open_table(path, dict(storage))
    if table is None:
        return None
    cursor = table.transaction_version(cursor_id(app_id))
    if cursor is None:
        return None
    latest = int(table.version())
    last = min(latest, cursor + READ_AT_MOST - 1)
    infos, gone = commit_infos(path, storage, first=cursor, last=last)
    return len(notices("", path, infos)) + len(gone), last < latest


def notify_problems(settings: Settings, specs: Sequence[TargetSpec], storage: Mapping[str, str]) -> list[str]:
    """One problem per announcing target past s3events.ingest.notify.max.lag.versions, or unreadable."""
    limit = settings.get(keys.INGEST_NOTIFY_MAX_LAG_VERSIONS)
    problems = []
    for spec in specs:
        if not destinations(settings, spec.name):
            continue
        try:
            found = notify_lag(spec.path, spec.app_id, storage)
        except Exception as exc:
            problems.append(f"{spec.name}: cannot read its notification cursor: {type(exc).__name__}: {exc}")
            continue
        if found is None:
            continue
        lag, more = found
        if lag > limit:
            behind = f"at least {lag}" if more else str(lag)
            problems.append(
                f"{spec.name}: {behind} data commit(s) not announced to its notification destinations "
                f"(max {limit}; s3events_ingest_notify_failures_total says which)"
            )
    return problems
