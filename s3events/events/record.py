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
    """Keep the first record per event id. Returns (unique records, number dropped).

    A MERGE inserts every source duplicate, so the batch must be unique before it reaches the table.
    """
    seen: set[str] = set()
    unique: list[EventRecord] = []
    for record in records:
        event_id = record.event.event_id
        if event_id not in seen:
            seen.add(event_id)
            unique.append(record)
    return unique, len(records) - len(unique)
