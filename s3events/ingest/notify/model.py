"""Commit notifications, pure: what a data commit records about its batch, the message announcing it,
and the cursor that says which commits are announced.

Every batch commit of a target carries its summary in the commit's commitInfo (`SUMMARY_KEY`), so the
message for any version can be built again from the table's history after a kill. The cursor is an app
transaction in the same table, `<app_id>/notify`: the first table version not yet announced. It rides in
the target's next commit (no commit of its own), so the newest announced commit is recorded by the one
after it; a restart announces every summarised commit from the cursor on, in version order. Consumers
dedupe on (path, version).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

DestinationKind = Literal["sns", "sqs", "eventbridge"]

SUMMARY_KEY = "s3events.batch"  # commitInfo key: the batch's summary as JSON
MESSAGE_SCHEMA = "s3events.commit/1"  # the message's "schema" field; bumped on an incompatible change
EVENT_SOURCE = "s3events"  # EventBridge source
EVENT_DETAIL_TYPE = "Delta table commit"  # EventBridge detail-type


def cursor_id(app_id: str) -> str:
    """The app id of a target's notification cursor: the first table version not yet announced."""
    return f"{app_id}/notify"


@dataclass(frozen=True, slots=True)
class Destination:
    kind: DestinationKind
    address: str  # topic ARN, queue URL or event bus name

    @property
    def fifo(self) -> bool:
        """A FIFO topic or queue needs a message group and a deduplication id."""
        return self.kind != "eventbridge" and self.address.endswith(".fifo")

    @property
    def label(self) -> str:
        """A bounded metric label: the kind (a target has at most one destination of each)."""
        return self.kind


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """What a batch commit announces besides its version: input files, rows written, error rows, rows
    deleted (mirror targets), whether the commit (or one just before it) changed the table's schema, and
    for a target with a transform the rows its SQL removed and which SQL it was (`TransformSpec.identity`)."""

    files: int
    rows: int
    error_rows: int
    rows_deleted: int = 0
    schema_changed: bool = False
    rows_filtered: int = 0
    transform: str | None = None

    def to_metadata(self) -> dict[str, str]:
        return {SUMMARY_KEY: json.dumps(asdict(self), separators=(",", ":"))}

    @classmethod
    def from_commit(cls, info: Mapping[str, Any]) -> BatchSummary | None:
        """The summary a commit's commitInfo holds; None for commits that are not batch commits
        (maintenance, checkpoint moves, the schema change before a batch) or hold an unreadable one."""
        raw = info.get(SUMMARY_KEY)
        if not isinstance(raw, str):
            return None
        try:
            fields = json.loads(raw)
            return cls(
                files=int(fields["files"]),
                rows=int(fields["rows"]),
                error_rows=int(fields["error_rows"]),
                rows_deleted=int(fields.get("rows_deleted", 0)),
                schema_changed=bool(fields.get("schema_changed", False)),
                rows_filtered=int(fields.get("rows_filtered", 0)),
                transform=_text(fields.get("transform")),
            )
        except (ValueError, KeyError, TypeError):
            return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def schema_changed(before: Sequence[str] | None, written: Sequence[str]) -> bool:
    """Whether writing columns `written` to a table of columns `before` (None: no table yet) changes its
    schema: a new table, or new columns (a changed type is refused before any commit)."""
    return before is None or not set(written) <= set(before)


@dataclass(frozen=True, slots=True)
class CommitNotice:
    """One data commit of one target, as announced."""

    target: str
    path: str
    version: int
    checkpoint: str  # the metadata position the commit recorded, "version:position"
    summary: BatchSummary
    committed_at: datetime | None
    table_id: str | None = None  # the Delta table's id (metaData.id): new when the table is rebuilt

    @property
    def dedupe_id(self) -> str:
        """What consumers dedupe on, and a FIFO destination's deduplication id: (path, version)."""
        return f"{self.path}@{self.version}"

    def message(self) -> dict[str, Any]:
        """The message's JSON object (docs/notifications.md documents its schema)."""
        version, _, position = self.checkpoint.partition(":")
        return {
            "schema": MESSAGE_SCHEMA,
            "target": self.target,
            "path": self.path,
            "table_id": self.table_id,
            "version": self.version,
            "committed_at": _iso(self.committed_at),
            "checkpoint": {"metadata_version": _int(version), "position": _int(position)},
            **asdict(self.summary),
        }

    def body(self) -> str:
        return json.dumps(self.message(), separators=(",", ":"), sort_keys=True)


def notices(
    target: str, path: str, history: Iterable[Mapping[str, Any]], *, table_id: str | None = None
) -> list[CommitNotice]:
    """The announceable commits among `history` (commitInfo dicts with their "version", any order) of
    the table `table_id`, in version order."""
    found = []
    for info in history:
        summary = BatchSummary.from_commit(info)
        if summary is None or not isinstance(info.get("version"), int):
            continue
        stamp = info.get("timestamp")
        found.append(
            CommitNotice(
                target=target,
                path=path,
                version=info["version"],
                checkpoint=str(info.get("s3events.checkpoint", "")),
                summary=summary,
                committed_at=datetime.fromtimestamp(stamp / 1000, UTC) if isinstance(stamp, int) else None,
                table_id=table_id,
            )
        )
    return sorted(found, key=lambda n: n.version)


class Cursor:
    """Which versions each destination has accepted, in this process. A destination that fails stops at
    the failed version (order is kept); the others go on. `durable` is the first version not announced to
    every destination: what the target's next commit records."""

    def __init__(self, start: int, destinations: Iterable[Destination]) -> None:
        self._next = dict.fromkeys(destinations, start)

    def due(self, destination: Destination, pending: Sequence[CommitNotice]) -> list[CommitNotice]:
        """The notices `destination` still has to get, in version order."""
        return [n for n in pending if n.version >= self._next[destination]]

    def accepted(self, destination: Destination, notice: CommitNotice) -> None:
        self._next[destination] = max(self._next[destination], notice.version + 1)

    def settle(self, pending: Sequence[CommitNotice], read_through: int) -> None:
        """A destination that got every notice of `pending` (read from the table's versions up to
        `read_through`) is past those versions: the rest of them announce nothing."""
        for destination in self._next:
            if not self.due(destination, pending):
                self._next[destination] = max(self._next[destination], read_through + 1)

    @property
    def durable(self) -> int:
        return min(self._next.values())

    def lag(self, pending: Sequence[CommitNotice]) -> int:
        """Data commits some destination has not accepted yet."""
        return sum(1 for n in pending if n.version >= self.durable)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _int(text: str) -> int | None:
    return int(text) if text.lstrip("-").isdigit() else None
