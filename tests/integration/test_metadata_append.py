"""How a metadata commit lands (real delta-rs tables): new events are appended as the version right after
the one the duplicate check read, so a writer that got in between makes the commit check again; a
re-created object still goes through the MERGE that refreshes its row."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from s3events.events.model import ObjectEvent
from s3events.events.record import EventRecord
from s3events.ingest.feed import MetadataFeed
from s3events.metadata.table import MetadataTable
from tests.conftest import read_table

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)
WINDOW = timedelta(days=15)


def record(key: str, *, at: datetime = NOW, etag: str | None = None) -> EventRecord:
    event = ObjectEvent(
        bucket="landing", key=key, event_name="ObjectCreated:Put", event_time=at, size=1, etag=etag or key
    )
    return EventRecord(event=event, source="sqs", captured_at=at, message_id=f"m-{key}")


def event_ids(path: str) -> Counter[str]:
    return Counter(r["event_id"] for r in read_table(path))


class RacedTable(MetadataTable):
    """A metadata table whose first duplicate check is followed, before its commit, by another writer's
    commit of `racing` events: the moment two captures (or capture and backfill) race for one event."""

    def __init__(self, path: str, racing: list[EventRecord]) -> None:
        super().__init__(path, storage_options={}, dedupe_window=WINDOW)
        self._racing = racing
        self._other = MetadataTable(path, storage_options={}, dedupe_window=WINDOW)

    def _held(self, table: Any, batch: pa.Table) -> pa.Table:
        held = super()._held(table, batch)
        if self._racing:
            racing, self._racing = self._racing, []
            self._other.commit(racing, custom_metadata={"writer": "other"})
        return held


def test_new_events_are_appended_without_change_data_files_and_the_feed_shows_them_as_inserts(tmp_path):
    path = str(tmp_path / "metadata")
    table = MetadataTable(path, storage_options={}, dedupe_window=WINDOW)
    first = table.commit([record("a"), record("b")], custom_metadata={})

    second = table.commit([record("b"), record("c"), record("d")], custom_metadata={})

    assert (second.written, second.duplicates, second.version) == (2, 1, (first.version or 0) + 1)
    assert DeltaTable(path).history(1)[0]["operation"] == "WRITE"
    assert not list(Path(path).rglob("_change_data"))
    changes = MetadataFeed(path, storage_options={}).changes_after(0, up_to=second.version or 0).rows
    assert sorted((c.key, c.recreated) for c in changes) == [(k, False) for k in "abcd"]


def test_a_batch_of_duplicates_only_makes_no_commit(tmp_path):
    path = str(tmp_path / "metadata")
    table = MetadataTable(path, storage_options={}, dedupe_window=WINDOW)
    first = table.commit([record("a"), record("b")], custom_metadata={})

    again = table.commit([record("a"), record("b")], custom_metadata={})

    assert (again.written, again.duplicates, again.version) == (0, 2, first.version)


def test_a_writer_that_commits_the_same_events_between_our_check_and_our_commit_makes_ours_check_again(
    tmp_path,
):
    path = str(tmp_path / "metadata")
    MetadataTable(path, storage_options={}, dedupe_window=WINDOW).commit([record("seed")], custom_metadata={})
    batch = [record("x"), record("y"), record("z")]
    table = RacedTable(path, racing=batch[:2])

    result = table.commit(batch, custom_metadata={})

    assert (result.written, result.duplicates, result.conflicts) == (1, 2, 1)
    assert sorted(event_ids(path).values()) == [1, 1, 1, 1]  # seed, x, y, z: each once


def test_an_object_created_again_refreshes_its_row_through_the_merge(tmp_path):
    path = str(tmp_path / "metadata")
    table = MetadataTable(path, storage_options={}, dedupe_window=WINDOW)
    first = table.commit([record("same", at=NOW - timedelta(hours=1))], custom_metadata={})

    # the same bytes uploaded again later: the same identity, a later created event
    again = table.commit([record("same", at=NOW), record("other")], custom_metadata={})

    assert (again.written, again.recreated, again.duplicates) == (2, 1, 0)
    assert DeltaTable(path).history(1)[0]["operation"] == "MERGE"
    changes = MetadataFeed(path, storage_options={}).changes_after(
        first.version or 0, up_to=again.version or 0
    )
    assert sorted((c.key, c.recreated) for c in changes.rows) == [("other", False), ("same", True)]
    assert len(event_ids(path)) == 2
