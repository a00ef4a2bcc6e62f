"""Capture's duplicate check reads only recently captured files (real delta-rs table), so its cost does
not grow with the table, while duplicates inside the window are still dropped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from deltalake import DeltaTable

from s3events.events.model import ObjectEvent
from s3events.events.record import EventRecord
from s3events.metadata.table import MetadataTable

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)


def record(key: str, captured_at: datetime) -> EventRecord:
    event = ObjectEvent(
        bucket="landing", key=key, event_name="ObjectCreated:Put", event_time=captured_at, size=1, etag=key
    )
    return EventRecord(event=event, source="sqs", captured_at=captured_at, message_id=f"m-{key}")


def test_duplicate_check_skips_files_captured_before_the_window_and_still_drops_recent_duplicates(tmp_path):
    path = str(tmp_path / "metadata")
    table = MetadataTable(path, storage_options={}, dedupe_window=timedelta(days=15))
    for day in range(40, 15, -5):  # five commits captured 40..20 days ago: outside the window
        table.commit([record(f"old-{day}", NOW - timedelta(days=day))], custom_metadata={})
    table.commit([record("recent", NOW - timedelta(hours=1))], custom_metadata={})

    result = table.commit(
        [record("recent", NOW - timedelta(hours=1)), record("new", NOW)], custom_metadata={}
    )

    assert (result.written, result.duplicates) == (1, 1)
    merge = DeltaTable(path).history(1)[0]
    assert merge["operation"] == "MERGE"
    metrics = merge["operationMetrics"]
    assert metrics["num_target_files_skipped_during_scan"] >= 5
    assert metrics["num_target_files_scanned"] <= 1


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

    assert (result.written, result.duplicates) == (1, 1)
    assert DeltaTable(path).to_pyarrow_table().num_rows == 4
    metrics = DeltaTable(path).history(1)[0]["operationMetrics"]
    assert metrics["num_target_files_scanned"] >= 1  # the redriven event's old file was read


def test_a_batch_of_recent_events_still_skips_files_before_the_window(tmp_path):
    path = str(tmp_path / "metadata")
    table = MetadataTable(path, storage_options={}, dedupe_window=timedelta(days=15))
    for day in (40, 30, 20):
        table.commit([record(f"old-{day}", NOW - timedelta(days=day))], custom_metadata={})

    table.commit([record("now", NOW)], custom_metadata={})

    metrics = DeltaTable(path).history(1)[0]["operationMetrics"]
    assert metrics["num_target_files_skipped_during_scan"] >= 3
