"""Capture's metadata commits with the held ids in memory (real delta-rs tables): a batch of new events is
appended as the version right after the one the ids describe; a batch that may hold a known id, or that
reaches back before the ids kept, goes through the MERGE; other writers' commits are caught up from the
change feed, and a writer that gets in between the check and the commit makes ours check again."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from s3events.events.model import ObjectEvent
from s3events.events.record import EventRecord
from s3events.ingest.feed import MetadataFeed
from s3events.metadata.known_ids import KnownIds
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


def capture_table(path: str) -> MetadataTable:
    return MetadataTable(path, storage_options={}, dedupe_window=WINDOW, known_ids=True)


def other_writer(path: str) -> MetadataTable:
    return MetadataTable(path, storage_options={}, dedupe_window=WINDOW)


def event_ids(path: str) -> Counter[str]:
    return Counter(r["event_id"] for r in read_table(path))


def operations(path: str) -> list[str]:
    return [h["operation"] for h in reversed(DeltaTable(path).history())]


def id_reads(caplog: pytest.LogCaptureFixture) -> int:
    return sum("event ids of" in r.getMessage() and r.getMessage().startswith("read") for r in caplog.records)


class RacedTable(MetadataTable):
    """Capture's table whose first check is followed, before its commit, by another writer's commit of
    `racing` events: the moment capture and backfill (or a second capture) race for one event."""

    def __init__(self, path: str, racing: list[EventRecord]) -> None:
        super().__init__(path, storage_options={}, dedupe_window=WINDOW, known_ids=True)
        self._racing = racing

    def _caught_up(self, table: Any) -> KnownIds:
        known = super()._caught_up(table)
        if self._racing:
            racing, self._racing = self._racing, []
            other_writer(self.path).commit(racing, custom_metadata={"writer": "other"})
        return known


def test_new_events_are_appended_and_a_redelivery_goes_through_the_merge_once(tmp_path):
    path = str(tmp_path / "metadata")
    table = capture_table(path)
    first = table.commit([record("a"), record("b")], custom_metadata={})
    second = table.commit([record("c"), record("d")], custom_metadata={})

    redelivered = table.commit([record("b"), record("e")], custom_metadata={})

    assert (second.written, second.duplicates, second.version) == (2, 0, (first.version or 0) + 1)
    assert (redelivered.written, redelivered.duplicates) == (1, 1)
    assert operations(path)[-3:] == ["WRITE", "WRITE", "MERGE"]
    assert sorted(event_ids(path).values()) == [1] * 5
    changes = MetadataFeed(path, storage_options={}).changes_after(0, up_to=redelivered.version or 0).rows
    assert sorted((c.key, c.recreated) for c in changes) == [(k, False) for k in "abcde"]
    # The MERGE was the next version: its ids are known, so a batch of new ids after it appends again.
    table.commit([record("f")], custom_metadata={})
    assert operations(path)[-1] == "WRITE"


def test_another_writers_events_are_caught_up_from_the_change_feed_not_by_reading_the_window_again(
    tmp_path, caplog
):
    path = str(tmp_path / "metadata")
    table = capture_table(path)
    many = [record(f"a{n}") for n in range(200)]  # more files than buckets: compaction has work
    with caplog.at_level(logging.INFO, logger="s3events.metadata.table"):
        table.commit(many[:100], custom_metadata={})
        other_writer(path).commit(many[100:], custom_metadata={})
        other_writer(path).commit([record("racing")], custom_metadata={})
        assert DeltaTable(path).optimize.compact()["numFilesRemoved"] > 0  # a version without new rows

        again = table.commit([*many[100:120], record("racing"), record("new")], custom_metadata={})

    assert (again.written, again.duplicates) == (1, 21)
    assert sorted(event_ids(path).values()) == [1] * 202
    assert id_reads(caplog) == 1  # read once, at the first commit


def test_a_writer_that_commits_the_same_events_between_our_check_and_our_commit_makes_ours_check_again(
    tmp_path,
):
    path = str(tmp_path / "metadata")
    other_writer(path).commit([record("seed")], custom_metadata={})
    batch = [record("x"), record("y"), record("z")]
    table = RacedTable(path, racing=batch[:2])

    result = table.commit(batch, custom_metadata={})

    assert (result.written, result.duplicates, result.conflicts) == (1, 2, 1)
    assert sorted(event_ids(path).values()) == [1, 1, 1, 1]  # seed, x, y, z: each once


class MergeRacedTable(MetadataTable):
    """Capture's table whose MERGE is preceded by another writer's commit of `racing` events: the version
    after the ids in memory is then that writer's, not the MERGE's."""

    def __init__(self, path: str, racing: list[EventRecord]) -> None:
        super().__init__(path, storage_options={}, dedupe_window=WINDOW, known_ids=True)
        self._racing = racing

    def insert_absent(self, batch: Any, *, custom_metadata: Any) -> Any:
        if self._racing:
            racing, self._racing = self._racing, []
            other_writer(self.path).commit(racing, custom_metadata={"writer": "other"})
        return super().insert_absent(batch, custom_metadata=custom_metadata)


def test_a_merge_that_finds_only_duplicates_after_another_writers_commit_leaves_that_commit_to_catch_up(
    tmp_path,
):
    path = str(tmp_path / "metadata")
    table = MergeRacedTable(path, racing=[record("backfilled")])
    table._racing, racing = [], table._racing
    table.commit([record("a")], custom_metadata={})
    table._racing = racing

    redelivered = table.commit([record("a")], custom_metadata={})  # MERGE; "backfilled" lands just before
    later = table.commit([record("backfilled"), record("new")], custom_metadata={})

    assert (redelivered.written, redelivered.duplicates) == (0, 1)
    assert (later.written, later.duplicates) == (1, 1)
    assert sorted(event_ids(path).values()) == [1, 1, 1]


def test_an_object_created_again_refreshes_its_row_through_the_merge(tmp_path):
    path = str(tmp_path / "metadata")
    table = capture_table(path)
    first = table.commit([record("same", at=NOW - timedelta(hours=1))], custom_metadata={})

    # the same bytes uploaded again later: the same identity, a later created event
    again = table.commit([record("same", at=NOW), record("other")], custom_metadata={})

    assert (again.written, again.recreated, again.duplicates) == (2, 1, 0)
    assert operations(path)[-1] == "MERGE"
    changes = MetadataFeed(path, storage_options={}).changes_after(
        first.version or 0, up_to=again.version or 0
    )
    assert sorted((c.key, c.recreated) for c in changes.rows) == [("other", False), ("same", True)]
    assert len(event_ids(path)) == 2


def test_a_restarted_capture_reads_the_held_ids_and_counts_redeliveries_as_duplicates(tmp_path):
    path = str(tmp_path / "metadata")
    before = capture_table(path)
    before.commit([record("a"), record("b")], custom_metadata={})
    before.commit([record("c")], custom_metadata={})

    after = capture_table(path).commit([record("a"), record("c"), record("d")], custom_metadata={})

    assert (after.written, after.duplicates) == (1, 2)
    assert sorted(event_ids(path).values()) == [1] * 4


def test_a_redriven_event_older_than_the_ids_kept_is_found_by_the_merge(tmp_path):
    path = str(tmp_path / "metadata")
    long_ago = NOW - timedelta(days=20)  # captured before the window the ids were read for
    other_writer(path).commit([record("old", at=long_ago)], custom_metadata={})
    table = capture_table(path)
    table.commit([record("fresh")], custom_metadata={})

    redriven = table.commit([record("old", at=long_ago), record("new")], custom_metadata={})

    assert (redriven.written, redriven.duplicates) == (1, 1)
    assert operations(path)[-1] == "MERGE"
    assert sorted(event_ids(path).values()) == [1] * 3


def test_a_change_feed_that_cannot_serve_the_missed_versions_makes_capture_read_the_ids_again(
    tmp_path, caplog
):
    path = str(tmp_path / "metadata")
    table = capture_table(path)
    table.commit([record("a")], custom_metadata={})
    other_writer(path).commit([record("b"), record("c")], custom_metadata={})
    for cdc in Path(path).rglob("_change_data/**/*.parquet"):
        cdc.unlink()  # as if vacuumed

    with caplog.at_level(logging.INFO, logger="s3events.metadata.table"):
        again = table.commit([record("b"), record("d")], custom_metadata={})

    assert (again.written, again.duplicates) == (1, 1)
    assert sorted(event_ids(path).values()) == [1] * 4
    assert id_reads(caplog) == 1 and any(
        "change feed did not serve" in r.getMessage() for r in caplog.records
    )
