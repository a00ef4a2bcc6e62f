"""What the metadata table stores per object event: the event plus where and when we learned of it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from s3events.events.model import EventSource, ObjectEvent


@dataclass(frozen=True, slots=True)
class EventRecord:
    event: ObjectEvent
    source: EventSource
    captured_at: datetime
    message_id: str | None = None  # None for backfill


@dataclass(frozen=True, slots=True)
class QuarantineRecord:
    """A poison message: kept with its reason and (truncated) raw body, so nothing is silently lost."""

    message_id: str
    receive_count: int
    reason: str
    raw_body: str
    raw_body_bytes: int
    truncated: bool
    queue_url: str
    sent_at: datetime | None
    quarantined_at: datetime


def dedupe(records: list[EventRecord]) -> tuple[list[EventRecord], int]:
    """One record per event id: the latest by event time (the first of equals). Returns (unique records in
    first-seen order, number dropped).

    A MERGE inserts every source duplicate, so the batch must be unique before it reaches the table. The
    latest is kept because a later created event of the same identity is a re-creation (see
    `MetadataTable`): a batch holding an upload, its removal and the same bytes uploaded again must
    keep the last upload, or the object would look removed.
    """
    chosen: dict[str, EventRecord] = {}
    for record in records:
        event_id = record.event.event_id
        held = chosen.get(event_id)
        if held is None or record.event.event_time > held.event.event_time:
            chosen[event_id] = record  # a dict keeps the position of the first insertion
    return list(chosen.values()), len(records) - len(chosen)
