"""Why a `schema.evolution=fail` target stands still, kept where `s3events status` can read it.

A refused batch commits nothing, so its reason (file, line, field) is written beside the table, in
`_s3events/refused.json` (Delta readers and VACUUM leave `_` folders alone), with the checkpoint the
batch starts at. It holds while the target's checkpoint has not moved past that point: the first batch
that commits after the fix makes it stale, with no write needed to clear it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime

import pyarrow.fs as pafs

from s3events.infra.parquet_files import filesystem_for
from s3events.ingest.model import Checkpoint

log = logging.getLogger(__name__)

REFUSAL_PATH = "_s3events/refused.json"


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str
    start: Checkpoint  # the refused batch's start: the target's checkpoint while it stays refused
    at: str  # when it was refused (ISO 8601)

    def holds(self, stored: Checkpoint | None) -> bool:
        """Still the target's state: its checkpoint has not moved past the refused batch's start."""
        return stored is None or stored <= self.start


def record(table_uri: str, storage: Mapping[str, str], reason: str, start: Checkpoint, at: datetime) -> None:
    """Write the refusal (best effort: the refusal itself fails the target; a note it could not write is
    logged, not raised)."""
    body = json.dumps({"reason": reason, "start": asdict(start), "at": at.isoformat()}).encode()
    try:
        filesystem, root = filesystem_for(table_uri, storage)
        if isinstance(filesystem, pafs.LocalFileSystem):  # object stores have no folders to make
            filesystem.create_dir(f"{root}/_s3events", recursive=True)
        with filesystem.open_output_stream(f"{root}/{REFUSAL_PATH}") as out:
            out.write(body)
    except OSError as exc:
        log.warning("%s: cannot record the refusal for status: %s", table_uri, exc)


def read(table_uri: str, storage: Mapping[str, str]) -> Refusal | None:
    """The refusal last recorded for the table, or None."""
    filesystem, root = filesystem_for(table_uri, storage)
    try:
        with filesystem.open_input_stream(f"{root}/{REFUSAL_PATH}") as src:
            doc = json.loads(src.read())
    except FileNotFoundError:
        return None
    return Refusal(str(doc["reason"]), Checkpoint(**doc["start"]), str(doc["at"]))
