"""Ingest's change feed reading: rows a rewrite only moved (`s3events migrate`) are not new objects."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from s3events.ingest.feed import new_rows

T1 = datetime(2026, 11, 1, tzinfo=UTC)
T2 = datetime(2026, 11, 2, tzinfo=UTC)
STRING = pa.string()


def changes(rows: list[tuple[str, datetime, str, int]], *, text: pa.DataType = STRING) -> pa.Table:
    ids, times, kinds, versions = zip(*rows, strict=True)
    return pa.table(
        {
            "event_id": pa.array(ids, text),
            "event_time": pa.array(times, pa.timestamp("us", tz="UTC")),
            "_change_type": pa.array(kinds, text),
            "_commit_version": pa.array(versions, pa.int64()),
        }
    )


def kept(table: pa.Table) -> list[tuple[str, str, int]]:
    return [(r["event_id"], r["_change_type"], r["_commit_version"]) for r in table.to_pylist()]


def test_a_row_deleted_and_inserted_again_by_one_commit_with_the_same_event_time_was_moved():
    feed = changes([("a", T1, "delete", 7), ("a", T1, "insert", 7), ("b", T1, "insert", 7)])
    assert kept(new_rows(feed)) == [("b", "insert", 7)]


def test_a_refresh_moves_the_event_time_forward_so_it_is_a_recreation_not_a_move():
    feed = changes([("a", T1, "update_preimage", 8), ("a", T2, "update_postimage", 8)])
    assert kept(new_rows(feed)) == [("a", "update_postimage", 8)]


def test_a_bucket_fix_by_merge_is_a_move_and_a_delete_in_another_commit_moves_nothing():
    feed = changes(
        [
            ("a", T1, "update_preimage", 9),
            ("a", T1, "update_postimage", 9),
            ("b", T1, "delete", 9),
            ("b", T1, "insert", 10),
        ]
    )
    assert kept(new_rows(feed)) == [("b", "insert", 10)]


def test_string_view_columns_as_delta_rs_reads_rewritten_files_are_handled():
    feed = changes(
        [("a", T1, "delete", 7), ("a", T1, "insert", 7), ("c", T1, "insert", 7)], text=pa.string_view()
    )
    assert kept(new_rows(feed)) == [("c", "insert", 7)]
