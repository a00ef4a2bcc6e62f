"""Capture against a moto_server process and real delta-rs tables (must-show 1-5 and 7)."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from s3events.capture.heartbeat import VisibilityHeartbeat
from s3events.capture.queue import SqsQueue
from s3events.capture.service import run_capture
from s3events.config import load_settings
from s3events.dev.fault_proxy import Fault, FaultProxy
from s3events.infra import aws
from tests.conftest import EVENTS_DIR, TRICKY_KEYS, Stack, read_table, run_cli

pytestmark = pytest.mark.integration


def capture_once(stack: Stack, **extra: object) -> Any:
    settings = load_settings(None, stack.conf(**extra))
    settings.validate_for("capture")
    return run_capture(settings, once=True)


def metadata_rows(stack: Stack) -> list[dict[str, Any]]:
    return read_table(stack.metadata_path)


def queue_is_empty(sqs: Any, queue_url: str) -> bool:
    attrs = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return (
        attrs["ApproximateNumberOfMessages"] == "0" and attrs["ApproximateNumberOfMessagesNotVisible"] == "0"
    )


def test_put_objects_with_tricky_keys_become_exactly_one_row_each(make_stack, s3, sqs):
    stack = make_stack()
    for key in TRICKY_KEYS:
        s3.put_object(Bucket=stack.bucket, Key=key, Body=key.encode())

    totals = capture_once(stack)

    rows = metadata_rows(stack)
    assert sorted(r["key"].encode() for r in rows) == sorted(k.encode() for k in TRICKY_KEYS)
    assert {r["bucket"] for r in rows} == {stack.bucket}
    assert all(r["event_source"] == "sqs" and r["event_kind"] == "created" for r in rows)
    assert all(r["size"] == len(r["key"].encode()) for r in rows)
    assert totals.written == len(TRICKY_KEYS)
    assert queue_is_empty(sqs, stack.queue_url)


def test_removed_objects_are_recorded_with_their_event_name(make_stack, s3):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="gone soon.csv", Body=b"a,b\n")
    s3.delete_object(Bucket=stack.bucket, Key="gone soon.csv")

    capture_once(stack)

    names = sorted(r["event_name"] for r in metadata_rows(stack))
    assert names == ["ObjectCreated:Put", "ObjectRemoved:Delete"]


def test_metadata_table_has_change_data_feed_and_schema_version(make_stack, s3):
    from deltalake import DeltaTable

    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="a.json", Body=b"{}")
    capture_once(stack)

    config = DeltaTable(stack.metadata_path).metadata().configuration
    assert config["delta.enableChangeDataFeed"] == "true"
    assert config["s3events.schema.version"] == "2"
    feed = DeltaTable(stack.metadata_path).load_cdf(starting_version=0)
    changes = pa.RecordBatchReader.from_stream(feed).read_all().to_pylist()
    assert [c["key"] for c in changes if c["_change_type"] == "insert"] == ["a.json"]


def test_sns_wrapped_and_eventbridge_messages_give_the_same_rows(make_stack, sqs):
    direct = make_stack()
    wrapped = make_stack(via_sns=True)
    bridged = make_stack()
    key = "shapes/same object.json"
    s3 = aws.client(aws.AwsOptions(region="us-east-1", endpoint_url=direct.endpoint_url), "s3")
    s3.put_object(Bucket=direct.bucket, Key=key, Body=b"{}\n")
    s3.put_object(Bucket=wrapped.bucket, Key=key, Body=b"{}\n")
    etag = s3.head_object(Bucket=direct.bucket, Key=key)["ETag"].strip('"')
    eventbridge = json.loads((EVENTS_DIR / "eventbridge_object_created.json").read_text())
    eventbridge["detail"]["bucket"]["name"] = bridged.bucket
    eventbridge["detail"]["object"].update({"key": key, "etag": etag, "size": 3})
    eventbridge["detail"]["object"].pop("version-id", None)
    sqs.send_message(QueueUrl=bridged.queue_url, MessageBody=json.dumps(eventbridge))

    for stack in (direct, wrapped, bridged):
        capture_once(stack)

    def shape(stack: Stack) -> tuple[Any, ...]:
        (row,) = metadata_rows(stack)
        return (row["key"], row["etag"], row["size"], row["event_kind"])

    assert shape(direct) == shape(wrapped) == shape(bridged) == (key, etag, 3, "created")


def test_test_event_is_recognised_written_nowhere_and_deleted(make_stack, sqs):
    stack = make_stack()  # configuring the notification made moto send an s3:TestEvent
    sqs.send_message(QueueUrl=stack.queue_url, MessageBody=(EVENTS_DIR / "s3_test_event.json").read_text())

    totals = capture_once(stack)

    assert totals.received == 2 and totals.written == 0 and totals.poison == 0
    assert queue_is_empty(sqs, stack.queue_url)
    assert not Path(stack.metadata_path, "_delta_log", "00000000000000000001.json").exists()


@pytest.mark.parametrize("ids_in_memory", ["true", "false"])
def test_redelivered_and_duplicated_messages_add_no_rows(make_stack, s3, sqs, ids_in_memory):
    stack = make_stack()
    for i in range(5):
        s3.put_object(Bucket=stack.bucket, Key=f"dup/{i}.json", Body=b"{}")
    # Peek at the bodies without consuming them, then send each one twice more (duplicate notifications).
    # A peek leaves each message visible, so a later receive can return one again: keep one body per id.
    peeked: dict[str, str] = {}
    while len(peeked) < 6:  # 5 puts + the test event
        got = sqs.receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        peeked.update((m["MessageId"], m["Body"]) for m in got.get("Messages", []))
    bodies = list(peeked.values())
    for body in bodies:
        sqs.send_message(QueueUrl=stack.queue_url, MessageBody=body)
        sqs.send_message(QueueUrl=stack.queue_url, MessageBody=body)

    first = capture_once(stack, metadata__dedupe__ids__in__memory=ids_in_memory)
    # The same notifications arrive again in a later run (redelivery after a lost delete).
    for body in bodies:
        sqs.send_message(QueueUrl=stack.queue_url, MessageBody=body)
    second = capture_once(stack, metadata__dedupe__ids__in__memory=ids_in_memory)

    rows = metadata_rows(stack)
    assert sorted(r["key"] for r in rows) == [f"dup/{i}.json" for i in range(5)]
    # SQS delivers at least once: on a loaded machine one of the 18 messages came back within the run
    # (received 19). It is then one more duplicate, never one more row; every message received is deleted.
    assert first.written == 5 and first.duplicates >= 10 and first.deleted == first.received
    assert second.written == 0 and second.duplicates >= 5 and second.deleted == second.received
    # With the ids in memory, new events are appended, else MERGEd; the redelivered ones take the MERGE,
    # which finds them all held and commits nothing.
    operations = [h["operation"] for h in DeltaTable(stack.metadata_path).history()]
    assert operations == ["WRITE" if ids_in_memory == "true" else "MERGE", "CREATE TABLE"]


@pytest.mark.process
def test_failed_commit_deletes_no_message_and_next_run_captures_all(make_stack, s3, sqs, tmp_path):
    stack = make_stack()
    for i in range(7):
        s3.put_object(Bucket=stack.bucket, Key=f"kept/{i}.json", Body=b"{}")
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the table's parent directory should be")
    good_path = stack.metadata_path
    stack.metadata_path = str(blocker / "metadata")

    result = run_cli(["capture", "--once", *_conf(stack, source__queue__visibility__timeout=1)])

    # an unwritable table location is for a person to fix: exit 3, naming the path
    assert result.returncode == 3, result.stderr
    assert "cannot create the metadata table" in result.stderr and str(blocker) in result.stderr
    stack.metadata_path = good_path
    # The messages reappear once their 1 s visibility timeout runs out; a 5 s long poll waits for them.
    totals = capture_once(stack, source__queue__long__poll__wait=5)
    assert sorted(r["key"] for r in metadata_rows(stack)) == [f"kept/{i}.json" for i in range(7)]
    assert totals.written == 7
    assert queue_is_empty(sqs, stack.queue_url)


def _conf(stack: Stack, **extra: object) -> list[str]:
    return [arg for kv in stack.conf(**extra) for arg in ("--conf", kv)]


def _hold_both(stack: Stack, holder: SqsQueue) -> list[Any]:
    held: list[Any] = []
    while len(held) < 2:  # the test event and the put
        held.extend(holder.receive(10))
    return held


def test_batch_held_longer_than_visibility_timeout_is_not_redelivered(make_stack, s3, aws_options):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="slow.json", Body=b"{}")
    # Received for 4 s: room for a loaded machine between the receive and the extension below.
    holder = SqsQueue(aws_options, stack.queue_url, wait_seconds=1, visibility_timeout=4)
    thief = SqsQueue(aws_options, stack.queue_url, wait_seconds=1, visibility_timeout=4)
    held = _hold_both(stack, holder)
    received_at = time.monotonic()
    now = [0.0]
    heartbeat = VisibilityHeartbeat(holder, timeout=60, clock=lambda: now[0])
    heartbeat.track(held)
    now[0] += 31  # the heartbeat's clock says the batch has been "committing" past half its timeout

    assert heartbeat.extend_due() == 2  # real ChangeMessageVisibility calls: invisible for 60 s more

    stolen = []
    while time.monotonic() < received_at + 2.5 * 4:  # well past the 4 s the messages were received for
        stolen.extend(thief.receive(10))
    assert stolen == []


def test_without_heartbeat_a_slow_batch_is_redelivered(make_stack, s3, aws_options):
    """The control for the heartbeat test: without an extension the batch comes back."""
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="slow.json", Body=b"{}")
    holder = SqsQueue(aws_options, stack.queue_url, wait_seconds=1, visibility_timeout=2)
    held = _hold_both(stack, holder)
    stolen: list[Any] = []
    deadline = time.monotonic() + 120  # a generous deadline for a condition, not a timing
    while time.monotonic() < deadline and len(stolen) < 2:
        stolen.extend(holder.receive(10))
    assert sorted(m.message_id for m in stolen) == sorted(m.message_id for m in held)


def test_malformed_messages_are_quarantined_and_good_ones_captured(make_stack, s3, sqs):
    stack = make_stack()
    good_keys = [f"good/{i}.json" for i in range(20)]
    for key in good_keys:
        s3.put_object(Bucket=stack.bucket, Key=key, Body=b"{}")
    poison = _hundred_poison_bodies(stack.bucket)
    for body in poison:
        sqs.send_message(QueueUrl=stack.queue_url, MessageBody=body)

    totals = capture_once(stack, source__message__max__bytes=4096)

    assert sorted(r["key"] for r in metadata_rows(stack)) == sorted(good_keys)
    quarantined = read_table(stack.metadata_path + "_quarantine")
    # moto may hand one message to two concurrent receivers: the quarantine (by message id) holds it once
    assert len(quarantined) == len(poison) <= totals.poison
    assert Counter(q["raw_body"][:4096] for q in quarantined) == Counter(b[:4096] for b in poison)
    assert all(q["reason"] and q["message_id"] and q["receive_count"] >= 1 for q in quarantined)
    oversized = [q for q in quarantined if q["raw_body_bytes"] > 4096]
    assert oversized and all("4096" in q["reason"] for q in oversized)
    assert queue_is_empty(sqs, stack.queue_url)


def test_poison_left_for_redrive_when_configured(make_stack, sqs):
    stack = make_stack()
    sqs.send_message(QueueUrl=stack.queue_url, MessageBody="{not json")

    totals = capture_once(stack, source__poison__action="redrive", source__queue__visibility__timeout=1)

    assert totals.poison == 1
    assert len(read_table(stack.metadata_path + "_quarantine")) == 1
    redelivered = sqs.receive_message(QueueUrl=stack.queue_url, WaitTimeSeconds=5)["Messages"]
    assert [m["Body"] for m in redelivered] == ["{not json"]


def _hundred_poison_bodies(bucket: str) -> list[str]:
    record = json.loads((EVENTS_DIR / "s3_put_moto.json").read_text())
    kinds: list[str] = [
        "not json at all",
        "[1, 2, 3]",
        '"a string"',
        "null",
        '{"Records": []}',
        '{"Records": "nope"}',
        '{"unrelated": true}',
        json.dumps({"Type": "Notification", "Message": 42}),
        json.dumps({"Type": "Notification", "Message": "{broken"}),
        "[" * 3_000,  # nesting deeper than any JSON parser's recursion limit
        "x" * 10_000,  # oversized for the 4096-byte limit in this test
        "\t binary-ish \ufffd\ud7ff",
    ]
    broken = []
    for path, value in [
        (("s3", "object", "size"), "abc"),
        (("s3", "object", "size"), -5),
        (("s3", "object", "key"), 17),
        (("s3", "bucket", "name"), None),
        (("eventTime",), "yesterday-ish"),
        (("eventName",), 12),
    ]:
        bad = json.loads(json.dumps(record))
        target = bad["Records"][0]
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value
        bad["Records"][0]["s3"]["bucket"]["name"] = bad["Records"][0]["s3"]["bucket"].get("name") and bucket
        broken.append(json.dumps(bad))
    kinds.extend(broken)
    return [kinds[i % len(kinds)] for i in range(100)]


@pytest.mark.chaos
def test_capture_starts_when_the_queue_answers_its_first_attribute_reads_with_503(make_stack, s3):
    """A continuous capture's start-up read of the queue met a 503 on every one of botocore's attempts
    and the process exited: a transient answer at start-up is retried like one in a cycle."""
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="in/0.json", Body=b"{}")
    with FaultProxy(stack.endpoint_url) as proxy:
        unavailable = proxy.add(Fault("status", operation="GetQueueAttributes", times=4))  # > botocore's 3
        settings = load_settings(None, replace(stack, endpoint_url=proxy.url).conf())
        settings.validate_for("capture")
        totals = run_capture(settings, once=True)
    assert unavailable.times == 0  # every injected fault was met
    assert totals.written == 1
