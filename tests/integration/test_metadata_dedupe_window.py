"""Capture's duplicate check reads only recently captured files (real delta-rs table), so its cost does
not grow with the table, while duplicates inside the window are still dropped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from deltalake import DeltaTable

from s3events.events.model import ObjectEvent
from s3events.events.record import EventRecord
from s3events.metadata.schema import id_bucket
from s3events.metadata.table import MetadataTable

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)


def record(key: str, captured_at: datetime) -> EventRecord:
    event = ObjectEvent(
        bucket="landing", key=key, event_name="ObjectCreated:Put", event_time=captured_at, size=1, etag=key
    )
    return EventRecord(event=event, source="sqs", captured_at=captured_at, message_id=f"m-{key}")


def record_beside(other: EventRecord, key: str, captured_at: datetime) -> EventRecord:
    """A record of another object whose event id falls in the same identity bucket as `other`'s."""
    n = 0
    while True:
        found = record(f"{key}-{n}", captured_at)
        if id_bucket(found.event.event_id) == id_bucket(other.event.event_id):
            return found
        n += 1


def data_files(path: str) -> set[Path]:
    return {f for f in Path(path).rglob("*.parquet") if "_delta_log" not in f.parts}


def remove_files(files: set[Path]) -> None:
    """Delete data files from under the table: a commit that read one of them would fail."""
    assert files
    for f in files:
        f.unlink()


def test_duplicate_check_skips_files_captured_before_the_window_and_still_drops_recent_duplicates(tmp_path):
    path = str(tmp_path / "metadata")
    table = MetadataTable(path, storage_options={}, dedupe_window=timedelta(days=15))
    recent, new = record("recent", NOW - timedelta(hours=1)), record("new", NOW)
    for day in range(40, 15, -5):  # five commits captured 40..20 days ago, in the batch's buckets
        old = [record_beside(r, f"old-{day}", NOW - timedelta(days=day)) for r in (recent, new)]
        table.commit(old, custom_metadata={})
    old_files = data_files(path)
    table.commit([recent], custom_metadata={})
    remove_files(old_files)

    result = table.commit([recent, new], custom_metadata={})

    assert (result.written, result.duplicates) == (1, 1)


def test_without_a_window_the_whole_table_is_checked(tmp_path):
    path = str(tmp_path / "metadata")
    table = MetadataTable(path, storage_options={})
    table.commit([record("ancient", NOW - timedelta(days=400))], custom_metadata={})

    result = table.commit([record("ancient", NOW - timedelta(days=400))], custom_metadata={})

    assert (result.written, result.duplicates) == (0, 1)


def test_a_message_redriven_after_the_window_still_finds_its_events_row(tmp_path):
    # A DLQ redrive gives the message a new enqueue time: it can come back up to 28 days after its event.
    path = str(tmp_path / "metadata")
    table = MetadataTable(path, storage_options={}, dedupe_window=timedelta(days=15))
    event_at = NOW - timedelta(days=25)
    table.commit([record("redriven", event_at)], custom_metadata={})  # captured back then
    for day in (10, 5):
        table.commit([record(f"recent-{day}", NOW - timedelta(days=day))], custom_metadata={})

    again = record("redriven", event_at)
    redriven = EventRecord(event=again.event, source="sqs", captured_at=NOW, message_id="m-redriven-copy")
    result = table.commit([redriven, record("fresh", NOW)], custom_metadata={})

    assert (result.written, result.duplicates) == (1, 1)  # the redriven event's old file was read
    assert DeltaTable(path).to_pyarrow_table().num_rows == 4


def test_a_batch_of_recent_events_still_skips_files_before_the_window(tmp_path):
    path = str(tmp_path / "metadata")
    table = MetadataTable(path, storage_options={}, dedupe_window=timedelta(days=15))
    for day in (40, 30, 20):
        table.commit([record(f"old-{day}", NOW - timedelta(days=day))], custom_metadata={})
    remove_files(data_files(path))

    result = table.commit([record("now", NOW)], custom_metadata={})

    assert (result.written, result.duplicates) == (1, 0)
