"""Small frozen models of the ingest flow: what to read, where a target stands, and one planned batch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

EventKind = Literal["created", "removed"]


@dataclass(frozen=True, slots=True)
class FileRef:
    """One metadata-table row as ingest sees it: an object event and the metadata version that holds it."""

    bucket: str
    key: str  # decoded
    etag: str | None
    version_id: str | None
    size: int | None
    event_time: datetime
    event_id: str
    event_kind: EventKind
    commit_version: int  # the metadata table version whose commit inserted (or refreshed) this row
    # A known object created again (after a removal, or the same bytes uploaded again): its content may
    # already be in a target. A target that mirrors S3 reads it again (replacing older rows); one that
    # appends reads it only when it holds no rows of that content (a first read may have failed).
    recreated: bool = False

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, commit_version: int, recreated: bool = False) -> FileRef:
        """A metadata-table row (as `to_pylist` gives it) read at `commit_version`."""
        return cls(
            bucket=row["bucket"],
            key=row["key"],
            etag=row["etag"],
            version_id=row["version_id"],
            size=row["size"],
            event_time=row["event_time"],
            event_id=row["event_id"],
            event_kind=row["event_kind"],
            commit_version=commit_version,
            recreated=recreated,
        )


@dataclass(frozen=True, slots=True, order=True)
class Checkpoint:
    """Where a target stands: every routed entry of metadata versions <= `version` is ingested, plus the
    first `position` routed entries (in plan order) of version `version + 1`.

    `version = -1` means nothing is ingested yet. Stored as Delta app transactions in the target's own
    commits, so it can never drift from the data.

    A target bootstrapping from the metadata table's snapshot (`in_snapshot`) stands inside the snapshot
    of version `snapshot`: the routed rows of its first `snapshot_file` data files (sorted by path) are
    ingested, plus those among the first `snapshot_row` rows of the next file. Once the snapshot is read
    the target stands at `Checkpoint(snapshot)` and follows the change feed from `snapshot + 1`. The
    fields order checkpoints as a target moves: nothing < inside a snapshot < after it.
    """

    version: int = -1
    position: int = 0
    snapshot: int = -1
    snapshot_file: int = 0
    snapshot_row: int = 0

    @classmethod
    def bootstrap(cls, version: int) -> Checkpoint:
        """The start of reading the snapshot of metadata version `version`."""
        return cls(-1, 0, version, 0, 0)

    @property
    def in_snapshot(self) -> bool:
        return self.snapshot > self.version

    @property
    def label(self) -> str:
        """`version:position`, or `snapshot@V:file/row` while bootstrapping (log lines)."""
        if self.in_snapshot:
            return f"snapshot@{self.snapshot}:{self.snapshot_file}/{self.snapshot_row}"
        return f"{self.version}:{self.position}"


@dataclass(frozen=True, slots=True)
class SnapshotRow:
    """One row of the metadata table's snapshot as a bootstrap reads it: the event, and where the row
    lies (its data file's index among the snapshot's files sorted by path, its row index in that file)."""

    entry: FileRef
    file: int
    row: int


@dataclass(frozen=True, slots=True)
class Limits:
    max_files: int = 1000
    max_bytes: int = 1 << 30


@dataclass(frozen=True, slots=True)
class Deletion:
    """Rows of one object to remove from a target that mirrors S3: those ingested from events before
    `before` (a removal removes them; a later upload of the object replaces them)."""

    uri: str
    before: datetime


@dataclass(frozen=True, slots=True)
class Batch:
    """One bounded unit of work for one target; committing it moves the checkpoint from start to end."""

    files: tuple[FileRef, ...]  # created objects to read, in plan order
    removals: tuple[FileRef, ...]  # removed objects whose rows to delete (only with on.object.removed=delete)
    start: Checkpoint
    end: Checkpoint

    @property
    def total_bytes(self) -> int:
        return sum(f.size or 0 for f in self.files)
