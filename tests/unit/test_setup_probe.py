"""The verify probe's waiting and message handling, with fakes shaped like boto3's clients and a fake
clock: the deadline is reached without sleeping, and no message that is not the probe's is lost or
handed back with its receive count raised."""

from __future__ import annotations

import json
from typing import Any

import botocore.exceptions

from s3events.setup import probe
from s3events.setup.model import SetupSpec

SPEC = SetupSpec(
    queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/events",
    dead_letter_queue_name="events-dlq",
    max_receive_count=5,
    buckets=("landing",),
    prefixes=("in/",),
    suffixes=(".json",),
    events=("s3:ObjectCreated:*",),
    probe_prefix="in/_s3events_probe/",
    verify_timeout_seconds=30,
)


def s3_event(key: str, name: str = "ObjectCreated:Put") -> str:
    record = {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventName": name,
        "eventTime": "2026-11-24T10:00:00.000Z",
        "s3": {"bucket": {"name": "landing"}, "object": {"key": key, "size": 1, "eTag": "abc"}},
    }
    return json.dumps({"Records": [record]})


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeSqs:
    """Hands out queued bodies; an empty receive takes its whole wait time on the fake clock."""

    def __init__(self, clock: FakeClock, bodies: list[str]) -> None:
        self.clock, self.bodies = clock, list(bodies)
        self.deleted: list[str] = []
        self.sent: list[dict[str, Any]] = []
        self.receives = 0
        self.s3_keys: list[str] = []  # keys the fake S3 was given, to send their events

    def receive_message(self, **kwargs: Any) -> dict[str, Any]:
        self.receives += 1
        assert kwargs["VisibilityTimeout"] > 2 * SPEC.verify_timeout_seconds  # held past both waits
        assert kwargs["MessageAttributeNames"] == ["All"]  # a copy carries them too
        if not self.bodies:
            self.clock.now += kwargs["WaitTimeSeconds"]
            return {}
        batch, self.bodies = self.bodies[:10], self.bodies[10:]
        return {
            "Messages": [
                {
                    "MessageId": f"m-{hash(b)}",
                    "ReceiptHandle": f"h:{b}",
                    "Body": b,
                    "MessageAttributes": {"team": {"DataType": "String", "StringValue": "x", "Md5": "?"}},
                }
                for b in batch
            ]
        }

    def delete_message(self, *, QueueUrl: str, ReceiptHandle: str) -> None:
        body = ReceiptHandle.removeprefix("h:")
        if "_s3events_probe/" not in body:  # another's message: deleted only once its copy is sent
            assert body in [m["MessageBody"] for m in self.sent]
        self.deleted.append(body)

    def send_message(self, **kwargs: Any) -> None:
        self.sent.append(kwargs)


class FakeS3:
    def __init__(self, sqs: FakeSqs, *, delivers: bool) -> None:
        self.sqs, self.delivers = sqs, delivers
        self.objects: set[str] = set()

    def put_object(self, *, Bucket: str, Key: str, Body: bytes) -> None:
        self.objects.add(Key)
        if self.delivers:
            self.sqs.bodies.append(s3_event(Key))

    def delete_object(self, *, Bucket: str, Key: str) -> None:
        self.objects.discard(Key)


def test_a_probe_that_never_arrives_is_reported_at_the_deadline_without_sleeping() -> None:
    clock = FakeClock()
    sqs = FakeSqs(clock, ["someone else's message"])
    s3 = FakeS3(sqs, delivers=False)
    held: dict[str, Any] = {}
    link = probe.probe_bucket(sqs, s3, SPEC, "landing", held=held, clock=clock)
    assert not link.ok and "within 30 s" in (link.problem or "")
    assert 30 <= clock.now <= 50  # long polls up to the deadline, not one more
    assert s3.objects == set()  # the probe object is deleted even so
    assert sqs.sent == [] and sqs.deleted == []  # held, received once: not churned while the probe waits
    probe.hand_back(sqs, SPEC.queue_url, held)
    assert [m["MessageBody"] for m in sqs.sent] == ["someone else's message"]  # sent again, then
    assert sqs.deleted == ["someone else's message"]  # the one received deleted
    assert held == {}


def test_other_messages_are_sent_again_with_a_fresh_receive_count_and_old_probes_cleared() -> None:
    clock = FakeClock()
    left_over = s3_event("in/_s3events_probe/probe-0123.json")
    others = [s3_event(f"in/data-{i}.json") for i in range(12)]
    sqs = FakeSqs(clock, [left_over, *others])
    s3 = FakeS3(sqs, delivers=True)
    held: dict[str, Any] = {}
    link = probe.probe_bucket(sqs, s3, SPEC, "landing", held=held, clock=clock)
    assert link.ok
    assert clock.now == 0  # the event was there: no waiting
    assert len(sqs.deleted) == 2 and sqs.deleted[0] == left_over
    assert "probe-" in sqs.deleted[1] and sqs.deleted[1] != left_over
    probe.hand_back(sqs, SPEC.queue_url, held)
    assert [m["MessageBody"] for m in sqs.sent] == others  # none handed back with its count raised
    assert sqs.deleted[2:] == others
    assert all(
        m["MessageAttributes"] == {"team": {"DataType": "String", "StringValue": "x"}} for m in sqs.sent
    )


def test_a_message_that_cannot_be_sent_again_is_not_deleted() -> None:
    clock = FakeClock()
    sqs = FakeSqs(clock, [s3_event("in/data.json")])

    def refused(**kwargs: Any) -> None:
        raise botocore.exceptions.ClientError({"Error": {"Code": "AccessDenied"}}, "SendMessage")

    sqs.send_message = refused  # type: ignore[method-assign]
    held: dict[str, Any] = {}
    probe.probe_bucket(sqs, FakeS3(sqs, delivers=True), SPEC, "landing", held=held, clock=clock)
    probe.hand_back(sqs, SPEC.queue_url, held)
    assert [body for body in sqs.deleted if "probe-" not in body] == []  # it comes back on its own
    assert held == {}


def test_the_queue_holds_messages_visible_in_flight_or_delayed() -> None:
    assert probe.waiting({"ApproximateNumberOfMessages": "0", "QueueArn": "arn"}) == 0
    assert (
        probe.waiting(
            {
                "ApproximateNumberOfMessages": "2",
                "ApproximateNumberOfMessagesNotVisible": "1",
                "ApproximateNumberOfMessagesDelayed": "1",
            }
        )
        == 4
    )


def test_the_probe_key_lies_under_the_probe_prefix_and_ends_with_a_configured_suffix() -> None:
    key = probe.probe_key(SPEC)
    assert key.startswith("in/_s3events_probe/probe-") and key.endswith(".json")
