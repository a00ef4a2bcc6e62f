"""Helpers shared by the unit tests."""

from __future__ import annotations

from datetime import UTC, datetime

from s3events.ingest.model import FileRef


def file_ref(key: str) -> FileRef:
    """The object a fast-path parse is about: `key` in bucket `b`, etag `e1`, from metadata version 1."""
    return FileRef(
        bucket="b",
        key=key,
        etag="e1",
        version_id=None,
        size=0,
        event_time=datetime(2026, 11, 22, tzinfo=UTC),
        event_id="ev1",
        event_kind="created",
        commit_version=1,
    )
