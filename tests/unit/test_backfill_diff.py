"""Backfill's diff: listed objects against the ids (and event times) the metadata table knows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from s3events.backfill.diff import EMPTY_IDS, unknown_positions

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
WINDOW = timedelta(days=15)


def known(*rows: tuple[str, datetime]) -> pa.Table:
    return pa.table(
        {"event_id": [r[0] for r in rows], "event_time": [r[1] for r in rows]},
        schema=EMPTY_IDS.schema,
    )


def test_ids_the_table_lacks_are_unknown():
    assert unknown_positions(["a", "b", "c"], known(("b", NOW))) == {0, 2}
    assert unknown_positions(["a"], EMPTY_IDS) == {0}


def test_a_known_id_listed_within_the_window_of_its_event_is_known():
    listed_at = [NOW]
    table = known(("a", NOW - timedelta(days=14)))
    assert unknown_positions(["a"], table, listed_at=listed_at, window=WINDOW) == set()


def test_a_known_id_listed_more_than_the_window_after_its_event_is_a_new_upload():
    table = known(("a", NOW - timedelta(days=16)))
    assert unknown_positions(["a"], table, listed_at=[NOW], window=WINDOW) == {0}


def test_one_recent_event_of_an_id_uploaded_several_times_makes_it_known():
    table = known(("a", NOW - timedelta(days=40)), ("a", NOW - timedelta(days=1)))
    assert unknown_positions(["a", "b"], table, listed_at=[NOW, NOW], window=WINDOW) == {1}
