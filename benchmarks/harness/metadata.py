"""Metadata tables written directly, for benchmarks that measure what comes after capture (capture's
own speed is `capture_throughput`'s subject, and moto's SQS would only slow the set-up)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Literal

from s3events.events.model import ObjectEvent
from s3events.events.record import EventRecord
from s3events.metadata.table import MetadataTable


def write_created_events(
    path: str,
    bucket: str,
    objects: Sequence[tuple[str, str, int]],
    *,
    chunk: int | None = None,
    at: datetime | None = None,
    seconds_apart: float = 0.0,
    source: Literal["sqs", "backfill"] = "sqs",
    message_prefix: str | None = "bench-",
    custom_metadata: Mapping[str, str] | None = None,
) -> None:
    """A created event per object ((key, etag, size), the object's real etag and size) committed to the
    metadata table at `path` as capture (`source="sqs"`) or backfill would write it, `chunk` events a
    commit (default: all in one). Events happen at `at` (default now), each commit's `seconds_apart`
    times its first object's index later; message ids are `message_prefix` + the object's index (None:
    the key, as backfill's synthetic events)."""
    table = MetadataTable(path, storage_options={})
    start_time = at or datetime.now(UTC)
    step = chunk or max(1, len(objects))
    for start in range(0, len(objects), step):
        when = start_time + timedelta(seconds=start * seconds_apart)
        records = [
            EventRecord(
                event=ObjectEvent(
                    bucket=bucket,
                    key=key,
                    event_name="ObjectCreated:Put",
                    event_time=when,
                    size=size,
                    etag=etag,
                ),
                source=source,
                captured_at=when,
                message_id=key if message_prefix is None else f"{message_prefix}{start + i}",
            )
            for i, (key, etag, size) in enumerate(objects[start : start + step])
        ]
        table.commit(records, custom_metadata=dict(custom_metadata or {}))
