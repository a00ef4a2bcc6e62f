"""Batch deduplication by object identity, before any MERGE sees the batch."""

from __future__ import annotations

from datetime import UTC, datetime

from s3events.events.model import ObjectEvent
from s3events.events.record import EventRecord, dedupe

T0 = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)


def record(key: str, etag: str = "e1", name: str = "ObjectCreated:Put", message: str = "m1") -> EventRecord:
    event = ObjectEvent(bucket="b", key=key, event_name=name, event_time=T0, size=1, etag=etag)
    return EventRecord(event=event, source="sqs", captured_at=T0, message_id=message)


def test_same_object_from_two_messages_is_kept_once():
    unique, dropped = dedupe([record("a", message="m1"), record("a", message="m2"), record("b")])
    assert [r.event.key for r in unique] == ["a", "b"] and dropped == 1
    assert unique[0].message_id == "m1"


def test_put_and_complete_multipart_of_one_object_are_one_identity():
    unique, dropped = dedupe([record("a"), record("a", name="ObjectCreated:CompleteMultipartUpload")])
    assert len(unique) == 1 and dropped == 1


def test_new_content_under_the_same_key_is_a_new_event():
    unique, dropped = dedupe([record("a", etag="e1"), record("a", etag="e2")])
    assert len(unique) == 2 and dropped == 0


def test_creation_and_removal_of_one_key_are_both_kept():
    unique, _ = dedupe([record("a"), record("a", name="ObjectRemoved:Delete")])
    assert sorted(r.event.kind for r in unique) == ["created", "removed"]


def test_same_content_uploaded_again_later_keeps_the_later_upload():
    later = EventRecord(
        event=ObjectEvent(
            bucket="b", key="a", event_name="ObjectCreated:Put", event_time=T0.replace(minute=5), etag="e1"
        ),
        source="sqs",
        captured_at=T0,
        message_id="m3",
    )
    unique, dropped = dedupe([record("a"), record("a", name="ObjectRemoved:Delete"), later])
    assert [(r.event.kind, r.message_id) for r in unique] == [("created", "m3"), ("removed", "m1")]
    assert dropped == 1
