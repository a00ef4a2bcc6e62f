"""A target's checkpoint as Delta app transactions, written in the same commit as the data.

`<app_id>` holds the metadata version fully ingested; `<app_id>/position` the number of routed entries
of the next version already ingested. Plain numbers rather than one opaque encoding.

A target bootstrapping from the metadata table's snapshot also records where it stands in it:
`<app_id>/snapshot` (the snapshot's metadata version V), `<app_id>/snapshot/file` (data files of V, sorted
by path, fully ingested) and `<app_id>/snapshot/row` (rows of the next file done). App transactions are
never removed, so they count only while `<app_id>` is below V; the commit that finishes the snapshot
moves `<app_id>` to V, and the change feed goes on from V + 1.

`<app_id>/origin` (in the error table, whose schema is known before any data) holds where a target
without a checkpoint starts, so `strategy=latest` means the same point on every run.
"""

from __future__ import annotations

from collections.abc import Mapping

from s3events.ingest.model import Checkpoint


def origin_id(app_id: str) -> str:
    """The app id of a target's recorded starting point (missing.checkpoint.strategy=latest): the metadata
    version its first run found, kept in the target's error table until the target has a checkpoint."""
    return f"{app_id}/origin"


def app_ids(app_id: str) -> tuple[str, ...]:
    """Every app id a checkpoint is stored under: version, position, and the snapshot's three."""
    return app_id, f"{app_id}/position", *_snapshot_ids(app_id)


def _snapshot_ids(app_id: str) -> tuple[str, str, str]:
    return f"{app_id}/snapshot", f"{app_id}/snapshot/file", f"{app_id}/snapshot/row"


def to_transactions(app_id: str, checkpoint: Checkpoint) -> dict[str, int]:
    """The app transactions recording `checkpoint`; the snapshot's only while it is being read."""
    version_id, position_id, *_ = app_ids(app_id)
    stored = {version_id: checkpoint.version, position_id: checkpoint.position}
    if checkpoint.in_snapshot:
        snapshot, file, row = _snapshot_ids(app_id)
        stored |= {
            snapshot: checkpoint.snapshot,
            file: checkpoint.snapshot_file,
            row: checkpoint.snapshot_row,
        }
    return stored


def from_transactions(app_id: str, stored: Mapping[str, int | None]) -> Checkpoint | None:
    version_id, position_id, *_ = app_ids(app_id)
    version = stored.get(version_id)
    if version is None:
        return None
    position = stored.get(position_id) or 0
    snapshot_id, file_id, row_id = _snapshot_ids(app_id)
    snapshot = stored.get(snapshot_id)
    if snapshot is None or snapshot <= version:  # no snapshot, or one read to its end
        return Checkpoint(version=version, position=position)
    return Checkpoint(version, position, snapshot, stored.get(file_id) or 0, stored.get(row_id) or 0)
