"""The visibility heartbeat's schedule, on an injected clock: messages in hand are extended once half their
timeout has passed, again after each extension, and never once released."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from s3events.capture.heartbeat import VisibilityHeartbeat
from s3events.capture.ports import BatchOutcome, Message


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RecordingQueue:
    """The Queue port as SQS answers it: `refuse` lists message ids whose extension fails."""

    queue_url = "https://sqs.example/q"
    visibility_timeout = 10

    def __init__(self) -> None:
        self.extended: list[tuple[list[str], int]] = []
        self.refuse: set[str] = set()

    def receive(self, max_messages: int = 10) -> list[Message]:
        return []

    def delete(self, messages: Sequence[Message], *, attempts: int = 3) -> BatchOutcome:
        return BatchOutcome(failed={})

    def change_visibility(
        self, messages: Sequence[Message], timeout: int, *, attempts: int = 3
    ) -> BatchOutcome:
        self.extended.append(([m.message_id for m in messages], timeout))
        return BatchOutcome(
            failed={m.message_id: "ReceiptHandleIsInvalid" for m in messages if m.message_id in self.refuse}
        )


def message(n: int) -> Message:
    return Message(f"m{n}", f"handle-{n}", "{}", 1, datetime(2026, 11, 23, tzinfo=UTC))


def test_messages_are_extended_once_half_their_timeout_has_passed_and_again_after():
    clock, queue = Clock(), RecordingQueue()
    heartbeat = VisibilityHeartbeat(queue, timeout=10, clock=clock)
    heartbeat.track([message(1), message(2)])

    clock.now += 4.9
    assert heartbeat.extend_due() == 0
    clock.now += 0.2  # 5.1 s in: under half the timeout left
    assert heartbeat.extend_due() == 2
    assert queue.extended == [(["m1", "m2"], 10)]
    clock.now += 4.9  # the extension restarted the count
    assert heartbeat.extend_due() == 0
    clock.now += 0.2
    assert heartbeat.extend_due() == 2 and heartbeat.extensions == 4


def test_released_messages_are_not_extended():
    clock, queue = Clock(), RecordingQueue()
    heartbeat = VisibilityHeartbeat(queue, timeout=10, clock=clock)
    heartbeat.track([message(1), message(2)])
    heartbeat.untrack([message(1)])

    clock.now += 6
    heartbeat.extend_due()

    assert queue.extended == [(["m2"], 10)] and heartbeat.tracked() == [message(2)]


def test_a_refused_extension_is_tried_again_on_the_next_tick():
    clock, queue = Clock(), RecordingQueue()
    heartbeat = VisibilityHeartbeat(queue, timeout=10, clock=clock)
    heartbeat.track([message(1)])
    queue.refuse = {"m1"}

    clock.now += 6
    assert heartbeat.extend_due() == 0
    queue.refuse = set()
    clock.now += 0.1
    assert heartbeat.extend_due() == 1


def test_a_zero_timeout_disables_the_heartbeat():
    heartbeat = VisibilityHeartbeat(RecordingQueue(), timeout=0, clock=Clock())
    heartbeat.track([message(1)])
    assert not heartbeat.enabled and heartbeat.tracked() == []
