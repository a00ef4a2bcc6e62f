"""Capture's batch gathering and prefetch, on fakes: only the first receive of a batch long-polls (the
batch is committed once the queue is empty, not after another long poll), and a prefetch starts
receiving when the next cycle may start, not while the previous batch is still committing."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from s3events.capture.cycle import Capture, CaptureOptions
from s3events.capture.heartbeat import VisibilityHeartbeat
from s3events.capture.ports import BatchOutcome, Message
from s3events.capture.receive import BatchReceiver, ReceiveLimits
from s3events.events.record import EventRecord, QuarantineRecord

DEADLINE = 30.0  # seconds a test waits for a condition before it fails


def message(n: int) -> Message:
    record = {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": "us-east-1",
        "eventTime": "2026-11-24T05:00:00.000Z",
        "eventName": "ObjectCreated:Put",
        "s3": {
            "bucket": {"name": "landing"},
            "object": {"key": f"file-{n}.json", "size": 10, "eTag": f"{n:032x}", "sequencer": f"{n:018X}"},
        },
    }
    body = json.dumps({"Records": [record]})
    return Message(f"m{n}", f"handle-{n}", body, 1, datetime(2026, 11, 24, tzinfo=UTC))


class FakeQueue:
    """The Queue port: hands out `waiting` messages, at most `max_messages` a call, and logs each call's
    wait (None: the queue's long poll, 0: a short poll) in `calls`."""

    queue_url = "https://sqs.example/q"
    visibility_timeout = 30

    def __init__(self, waiting: int) -> None:
        self._lock = threading.Lock()
        self.waiting = [message(n) for n in range(waiting)]
        self.calls: list[int | None] = []
        self.deleted: list[str] = []
        self.received = threading.Condition(self._lock)

    def receive(self, max_messages: int = 10, *, wait_seconds: int | None = None) -> list[Message]:
        with self._lock:
            self.calls.append(wait_seconds)
            out, self.waiting = self.waiting[:max_messages], self.waiting[max_messages:]
            self.received.notify_all()
            return out

    def add(self, count: int) -> None:
        with self._lock:
            start = 1000 + len(self.calls) * 100
            self.waiting.extend(message(start + n) for n in range(count))

    def delete(self, messages: Sequence[Message], *, attempts: int = 3) -> BatchOutcome:
        self.deleted.extend(m.message_id for m in messages)
        return BatchOutcome(failed={})

    def change_visibility(
        self, messages: Sequence[Message], timeout: int, *, attempts: int = 3
    ) -> BatchOutcome:
        return BatchOutcome(failed={})

    def wait_for_calls(self, count: int) -> bool:
        with self._lock:
            return self.received.wait_for(lambda: len(self.calls) >= count, timeout=DEADLINE)


@dataclass
class Committed:
    written: int
    duplicates: int = 0
    version: int | None = 1
    conflicts: int = 0


class FakeSink:
    def __init__(self) -> None:
        self.commits: list[int] = []

    def commit(self, records: Sequence[EventRecord], *, custom_metadata: Mapping[str, str]) -> Committed:
        self.commits.append(len(records))
        return Committed(written=len(records))

    def record(self, records: Sequence[QuarantineRecord], *, custom_metadata: Mapping[str, str]) -> Committed:
        return Committed(written=len(records))


def test_only_the_first_receive_of_a_batch_long_polls_and_an_empty_short_poll_ends_it():
    queue = FakeQueue(waiting=25)
    receiver = BatchReceiver(
        queue, VisibilityHeartbeat(queue, timeout=30), ReceiveLimits(max_messages=1000, concurrency=2)
    )
    try:
        batch = receiver.gather()
    finally:
        receiver.close()

    assert len(batch) == 25
    assert queue.calls[0] is None  # the queue's long poll: waits for the first message
    assert queue.calls[1:] and set(queue.calls[1:]) == {0}  # then what is there now, until empty


def test_an_empty_queue_is_one_long_poll():
    queue = FakeQueue(waiting=0)
    receiver = BatchReceiver(queue, VisibilityHeartbeat(queue, timeout=30), ReceiveLimits())
    try:
        assert receiver.gather() == []
    finally:
        receiver.close()
    assert queue.calls == [None]


def test_prefetch_waits_for_the_next_cycle_start_before_receiving():
    queue = FakeQueue(waiting=3)
    pauses: list[float] = []
    paused, resume = threading.Event(), threading.Event()

    def pause(seconds: float) -> bool:  # holds the prefetch until the test lets it go
        pauses.append(seconds)
        paused.set()
        assert resume.wait(DEADLINE)
        return False

    sink = FakeSink()
    capture = Capture(
        queue, sink, sink, CaptureOptions(cycle_interval_seconds=5.0), clock=lambda: 100.0, pause=pause
    )
    try:
        first = capture.run_once()
        assert paused.wait(DEADLINE)
        queue.add(2)  # arrives while the prefetch waits for the next cycle's start
        resume.set()
        second = capture.run_once()
    finally:
        resume.set()
        capture.close()

    assert first.received == 3
    assert pauses[0] == 5.0  # the whole interval: the injected clock did not move
    assert second.received == 2  # gathered after the wait, so it holds what arrived meanwhile
    assert sink.commits == [3, 2]
    assert len(queue.deleted) == 5


def test_close_cuts_short_a_prefetch_waiting_for_its_start_and_it_receives_nothing():
    queue = FakeQueue(waiting=2)
    sink = FakeSink()
    capture = Capture(queue, sink, sink, CaptureOptions(cycle_interval_seconds=3600.0))
    assert capture.run_once().received == 2
    calls = len(queue.calls)
    queue.add(4)

    closing = threading.Thread(target=capture.close)
    closing.start()
    closing.join(timeout=DEADLINE)

    assert not closing.is_alive()  # not an hour
    assert len(queue.calls) == calls  # the waiting prefetch received nothing
    assert len(queue.waiting) == 4
