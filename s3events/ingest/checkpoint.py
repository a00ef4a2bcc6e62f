"""A target's checkpoint as Delta app transactions: two ids, written in the same commit as the data.

`<app_id>` holds the metadata version fully ingested; `<app_id>/position` the number of routed entries
of the next version already ingested. Two plain numbers rather than one opaque encoding.
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


def app_ids(app_id: str) -> tuple[str, str]:
    return app_id, f"{app_id}/position"


def to_transactions(app_id: str, checkpoint: Checkpoint) -> dict[str, int]:
    version_id, position_id = app_ids(app_id)
    # Never -1 in practice: metadata version 0 is the empty CREATE, so a batch ends at version >= 0.
    return {version_id: checkpoint.version, position_id: checkpoint.position}


def from_transactions(app_id: str, stored: Mapping[str, int | None]) -> Checkpoint | None:
    version_id, position_id = app_ids(app_id)
    version = stored.get(version_id)
    if version is None:
        return None
    return Checkpoint(version=version, position=stored.get(position_id) or 0)
