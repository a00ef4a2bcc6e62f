"""How far each target has read the metadata table's change feed, as status and maintenance see it.

A target's durable position is its checkpoint (in the target table) or, before its first batch, the
starting point recorded in its error table. Versions after it that route nothing to the target count as
read: ingest moves its cursor over them in memory and makes that durable now and then (`Ingest`), so
a quiet target holds back neither status's lag nor the metadata table's log cleanup and vacuum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from s3events.ingest.error_table import ErrorTable
from s3events.ingest.feed import MetadataFeed
from s3events.ingest.model import Checkpoint
from s3events.ingest.plan import caught_up_to
from s3events.ingest.target import TargetSpec
from s3events.ingest.target_table import TargetTable


def pending_after(checkpoint: Checkpoint | None, latest: int, *, start_latest: bool = False) -> int | None:
    """The oldest metadata version a target with `checkpoint` has not fully ingested, or None when it is
    caught up with the metadata table at version `latest`. `start_latest`: a target without a
    checkpoint starts at the latest version (missing.checkpoint.strategy=latest)."""
    if checkpoint is None:
        return None if start_latest or latest < 0 else 0
    return checkpoint.version + 1 if checkpoint.version < latest else None


def stored_position(spec: TargetSpec, storage: dict[str, str]) -> Checkpoint | None:
    """The target's checkpoint; before its first batch, the starting point its runs recorded."""
    stored = TargetTable(spec.path, spec.app_id, storage_options=storage).checkpoint()
    if stored is None:
        stored = ErrorTable(spec.error_table_path, spec.app_id, storage_options=storage).origin()
    return stored


def first_unread(
    specs: Sequence[TargetSpec],
    stored: Mapping[str, Checkpoint | None],
    feed: MetadataFeed,
    latest: int,
    *,
    start_latest: bool = False,
) -> dict[str, int | None]:
    """Per target, the oldest metadata version (up to `latest`) holding an entry routed to it that it has
    not ingested; None when it is caught up. One change-feed read serves every target."""
    pending = {
        spec.name: pending_after(stored.get(spec.name), latest, start_latest=start_latest) for spec in specs
    }
    # A target inside a bootstrap needs the log and files of its snapshot's version however old they
    # grow: it counts as not having read version 0 (the log kept whole while it reads the snapshot).
    bootstrapping = {name for name, checkpoint in stored.items() if checkpoint and checkpoint.in_snapshot}
    lagging = [v for name, v in pending.items() if v is not None and name not in bootstrapping]
    if not lagging:
        return pending
    changes = feed.changes_after(min(lagging) - 1, up_to=latest)
    for spec in specs:
        oldest = pending[spec.name]
        if oldest is None or spec.name in bootstrapping:
            continue
        start = stored.get(spec.name) or Checkpoint(oldest - 1, 0)
        reach = caught_up_to(
            start,
            [r for r in changes.rows if r.commit_version > start.version],
            route=spec.route,
            latest_version=latest,
            mirror=spec.on_object_removed == "delete",
        )
        pending[spec.name] = reach.version + 1 if reach.version < latest else None
    return pending
