"""Small frozen models parsed at the boundary. Everything from SQS is untrusted until it is one of these."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

EventKind = Literal["created", "removed"]
EventSource = Literal["sqs", "backfill"]

# "LifecycleExpiration:Delete" also covers "LifecycleExpiration:DeleteMarkerCreated".
_REMOVED_PREFIXES = ("ObjectRemoved", "LifecycleExpiration:Delete")


def bare_etag(value: str) -> str:
    """An ETag as identities and `If-Match` use it: without the one pair of quotes S3 puts around it in
    headers and listings (notifications send it bare). The one rule for every path an ETag comes in."""
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


@dataclass(frozen=True, slots=True)
class ObjectEvent:
    """One S3 object event. `key` is already URL-decoded (exactly once)."""

    bucket: str
    key: str
    event_name: str  # e.g. "ObjectCreated:Put", "ObjectRemoved:Delete"
    event_time: datetime  # timezone-aware, UTC
    size: int | None = None
    etag: str | None = None  # without surrounding quotes
    version_id: str | None = None
    sequencer: str | None = None

    @property
    def kind(self) -> EventKind:
        """Removed for ObjectRemoved:* and LifecycleExpiration:Delete(MarkerCreated), else created."""
        return "removed" if self.event_name.startswith(_REMOVED_PREFIXES) else "created"

    @property
    def event_id(self) -> str:
        """Identity used for deduplication: the same object event always yields the same id.

        Created: (bucket, key, version id or etag). Removed events carry no etag, so a removal is
        told apart from a later removal of the same key by version id, else sequencer, else event time.
        A version id of "null" (what S3 sends for versioning-suspended buckets) counts as no version id:
        every overwrite of such a key has that same version id.
        """
        version_id = self.version_id if self.version_id != "null" else None
        if self.kind == "created":
            discriminator = version_id or self.etag or ""
        else:
            discriminator = version_id or self.sequencer or self.event_time.isoformat()
        raw = "\x00".join((self.bucket, self.key, discriminator, self.kind))
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class TestEvent:
    """`s3:TestEvent`, sent by S3 when a notification is configured. Recognised, written nowhere."""

    bucket: str | None


@dataclass(frozen=True, slots=True)
class Poison:
    """A message that is not a usable S3 event. Recorded in the quarantine table, never a crash."""

    reason: str


@dataclass(frozen=True, slots=True)
class Parsed:
    """What one SQS message body turned out to be: events, a test event, or poison.

    `poison` may be set together with `events` when only some records of a message are bad: the good
    ones are captured and the raw message is quarantined. `ignored` holds the event names of recognised
    S3 events this service does not capture (e.g. "ObjectRestore:Completed", "Object Tags Added").
    """

    events: tuple[ObjectEvent, ...] = ()
    test_event: TestEvent | None = None
    poison: Poison | None = None
    ignored: tuple[str, ...] = ()
