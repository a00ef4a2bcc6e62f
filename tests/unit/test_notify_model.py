"""Commit notifications, pure: summaries in commitInfo, the message, and the cursor over destinations."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from s3events.ingest.notify.model import (
    MESSAGE_SCHEMA,
    SUMMARY_KEY,
    BatchSummary,
    CommitNotice,
    Cursor,
    Destination,
    cursor_id,
    notices,
    schema_changed,
)

SNS = Destination("sns", "arn:aws:sns:eu-west-1:123456789012:lake-commits")
SQS = Destination("sqs", "https://sqs.eu-west-1.amazonaws.com/123456789012/lake-commits.fifo")
BUS = Destination("eventbridge", "lake")


def commit(version: int, summary: BatchSummary | None, *, checkpoint: str = "7:0") -> dict[str, object]:
    """A commitInfo as the log holds it, with the "version" the history reader adds."""
    info: dict[str, object] = {"version": version, "timestamp": 1795745951447, "operation": "WRITE"}
    if summary is not None:
        info |= summary.to_metadata() | {"s3events.checkpoint": checkpoint}
    return info


def notice(version: int) -> CommitNotice:
    return CommitNotice("orders", "s3://lake/orders", version, "7:0", BatchSummary(1, 10, 0), None)


def test_a_summary_survives_the_commit_info_round_trip():
    summary = BatchSummary(files=3, rows=120, error_rows=2, rows_deleted=5, schema_changed=True)

    assert BatchSummary.from_commit({"version": 4, **summary.to_metadata()}) == summary


def test_a_transformed_batch_s_filtered_rows_and_sql_identity_survive_the_round_trip():
    summary = BatchSummary(
        files=1, rows=9, error_rows=0, rows_filtered=3, transform="sha256:0123456789abcdef"
    )

    assert BatchSummary.from_commit(summary.to_metadata()) == summary
    assert BatchSummary.from_commit({SUMMARY_KEY: json.dumps({"files": 1, "rows": 2, "error_rows": 0})}) == (
        BatchSummary(1, 2, 0)  # a commit written before these fields: none filtered, no transform
    )


def test_commits_without_a_summary_or_with_an_unreadable_one_announce_nothing():
    assert BatchSummary.from_commit({"operation": "OPTIMIZE"}) is None
    assert BatchSummary.from_commit({SUMMARY_KEY: "{not json"}) is None
    assert BatchSummary.from_commit({SUMMARY_KEY: json.dumps({"files": 1})}) is None


def test_a_new_table_or_new_columns_change_the_schema_and_fewer_columns_do_not():
    assert schema_changed(None, ["a"])
    assert schema_changed(["a"], ["a", "b"])
    assert not schema_changed(["a", "b"], ["b"])


def test_the_message_carries_what_the_docs_promise():
    summary = BatchSummary(files=2, rows=40, error_rows=1)
    history = [commit(12, summary, checkpoint="40:3")]
    [found] = notices("orders", "s3://lake/orders", history, table_id="5f0c-table-id")

    message = json.loads(found.body())

    assert message == {
        "schema": MESSAGE_SCHEMA,
        "target": "orders",
        "path": "s3://lake/orders",
        "table_id": "5f0c-table-id",
        "version": 12,
        "committed_at": datetime.fromtimestamp(1795745951.447, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "checkpoint": {"metadata_version": 40, "position": 3},
        "files": 2,
        "rows": 40,
        "error_rows": 1,
        "rows_deleted": 0,
        "schema_changed": False,
        "rows_filtered": 0,
        "transform": None,
    }
    assert found.dedupe_id == "s3://lake/orders@12"


def test_only_summarised_commits_are_announced_in_version_order():
    history = [commit(9, BatchSummary(1, 1, 0)), commit(8, None), commit(7, BatchSummary(2, 2, 0))]

    assert [n.version for n in notices("orders", "s3://lake/orders", history)] == [7, 9]


def test_a_fifo_topic_or_queue_needs_group_and_deduplication_and_a_bus_never_does():
    assert SQS.fifo
    assert not SNS.fifo
    assert not Destination("eventbridge", "bus.fifo").fifo


def test_the_cursor_moves_past_versions_every_destination_accepted():
    cursor = Cursor(5, [SNS, BUS])
    pending = [notice(5), notice(7)]

    for destination in (SNS, BUS):
        for due in cursor.due(destination, pending):
            cursor.accepted(destination, due)
    cursor.settle(pending, read_through=9)

    assert cursor.durable == 10  # versions 8 and 9 announce nothing
    assert cursor.lag(pending) == 0


def test_a_failing_destination_holds_the_cursor_and_gets_only_what_it_missed_next_time():
    cursor = Cursor(5, [SNS, BUS])
    pending = [notice(5), notice(7)]
    for due in cursor.due(SNS, pending):
        cursor.accepted(SNS, due)
    cursor.accepted(BUS, notice(5))  # version 7 failed on the bus
    cursor.settle(pending, read_through=9)

    assert cursor.durable == 6  # the first version not known to be announced everywhere
    assert cursor.lag(pending) == 1
    assert cursor.due(SNS, pending) == []  # not sent to SNS twice by this process
    assert [n.version for n in cursor.due(BUS, pending)] == [7]


def test_the_cursor_lives_beside_the_checkpoint_of_the_target():
    assert cursor_id("s3events.ingest/orders") == "s3events.ingest/orders/notify"
