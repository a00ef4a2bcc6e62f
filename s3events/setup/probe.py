"""The end-to-end probe of `setup --verify`: PUT a small object under the probe prefix and wait, up to a
deadline, for its event on the queue; then delete the object and the probe's messages.

No message that is not the probe's loses a delivery attempt. SQS counts every receive toward the redrive
(maxReceiveCount), and a message handed back with its count raised can go to the dead-letter queue on
capture's next receive instead of reaching capture. So verify sends no probe while the queue holds any
message (`waiting`, from the queue's attributes). A message that arrives while the probe waits is held
(received with a visibility timeout that outlasts the probe, so it is received once), and at the end
`hand_back` sends it again as a new message (same body and message attributes, receive count 0) before it
deletes the one received: capture receives it as usual, under a new message id. Should this process die
in between, the received one comes back after its visibility timeout (and capture's deduplication absorbs
a copy already sent).
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from s3events.errors import S3EventsError
from s3events.events.model import EventKind
from s3events.events.parse import parse_message
from s3events.infra import aws
from s3events.setup.links import Link
from s3events.setup.notifications import events_overlap
from s3events.setup.plan import SetupSpec

log = logging.getLogger(__name__)

Clock = Callable[[], float]
PROBE_NAME = "probe-"
_COUNTS = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


def waiting(attributes: Mapping[str, str]) -> int:
    """Messages the queue holds: visible, in flight (received, not yet deleted) and delayed."""
    return sum(int(attributes.get(name, "0") or 0) for name in _COUNTS)


def probe_key(spec: SetupSpec) -> str:
    """Under the probe prefix and ending with the first configured suffix, so the notification covers it."""
    suffix = spec.suffixes[0] if spec.suffixes else ""
    return f"{spec.probe_prefix}{PROBE_NAME}{uuid.uuid4().hex}{suffix}"


def probe_bucket(
    sqs: Any,
    s3: Any,
    spec: SetupSpec,
    bucket: str,
    *,
    held: MutableMapping[str, Mapping[str, Any]],
    clock: Clock = time.monotonic,
) -> Link:
    """The probe's link; messages received that are not the probe's are added to `held` (by message id)
    for `hand_back`."""
    name = f"probe through bucket {bucket}"
    key = probe_key(spec)
    timeout = spec.verify_timeout_seconds
    aws.call(
        f"write probe s3://{bucket}/{key}", s3.put_object, Bucket=bucket, Key=key, Body=b"s3events probe\n"
    )
    try:
        arrived = _wait_for(
            sqs, spec, bucket, key, "created", deadline=clock() + timeout, held=held, clock=clock
        )
    finally:
        aws.call(f"delete probe s3://{bucket}/{key}", s3.delete_object, Bucket=bucket, Key=key)
    if not arrived:
        return Link(
            name,
            f"no event for s3://{bucket}/{key} reached queue {spec.queue_name} within {timeout:g} s "
            "(a running capture may have taken it: then the metadata table holds that key)",
        )
    if events_overlap(spec.events, ["s3:ObjectRemoved:Delete"]) and not _wait_for(
        sqs, spec, bucket, key, "removed", deadline=clock() + timeout, held=held, clock=clock
    ):
        log.warning(
            "the removal event of probe s3://%s/%s did not arrive in time; capture will record it",
            bucket,
            key,
        )
    return Link(name)


def _is_probe(body: str, spec: SetupSpec) -> tuple[bool, set[tuple[str, str, EventKind]]]:
    """Whether every event of a message is a probe's (this run's or a left-over one), and which."""
    events = parse_message(body).events
    seen = {(e.bucket, e.key, e.kind) for e in events}
    return bool(events) and all(e.key.startswith(spec.probe_prefix + PROBE_NAME) for e in events), seen


def _wait_for(
    sqs: Any,
    spec: SetupSpec,
    bucket: str,
    key: str,
    kind: EventKind,
    *,
    deadline: float,
    held: MutableMapping[str, Mapping[str, Any]],
    clock: Clock,
) -> bool:
    """Long-poll until the probe's event of this kind arrives or the deadline passes (no fixed sleeps)."""
    hold = min(43200, math.ceil(spec.verify_timeout_seconds * 2) + 60)  # past both waits of the probe
    while (remaining := deadline - clock()) > 0:
        answer = aws.call(
            f"receive from queue {spec.queue_name}",
            sqs.receive_message,
            QueueUrl=spec.queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=min(20, max(1, math.ceil(remaining))),
            VisibilityTimeout=hold,
            MessageAttributeNames=["All"],
        )
        found = False
        for message in answer.get("Messages", []):
            probe, seen = _is_probe(message["Body"], spec)
            if probe:  # ours, also left-overs of an earlier run: capture must not ingest them
                aws.call(
                    "delete a probe message",
                    sqs.delete_message,
                    QueueUrl=spec.queue_url,
                    ReceiptHandle=message["ReceiptHandle"],
                )
                found = found or (bucket, key, kind) in seen
            else:
                held[message["MessageId"]] = message
        if found:
            return True
    return False


_ATTRIBUTE_FIELDS = ("DataType", "StringValue", "BinaryValue")


def hand_back(sqs: Any, queue_url: str, held: MutableMapping[str, Mapping[str, Any]]) -> None:
    """Put a copy of each held message on the queue (receive count 0), then delete the one received. A
    copy that cannot be sent leaves its message to come back after its visibility timeout, its receive
    count raised by one; a delete that fails leaves a duplicate, which capture's deduplication absorbs."""
    for message_id in list(held):
        message = held.pop(message_id)
        attributes = {
            name: {k: v for k, v in value.items() if k in _ATTRIBUTE_FIELDS}
            for name, value in (message.get("MessageAttributes") or {}).items()
        }
        try:
            aws.call(
                f"send message {message_id} again",
                sqs.send_message,
                QueueUrl=queue_url,
                MessageBody=message["Body"],
                **({"MessageAttributes": attributes} if attributes else {}),
            )
        except S3EventsError as exc:
            log.warning("could not send message %s again (%s); it returns after its timeout", message_id, exc)
            continue
        try:
            aws.call(
                f"delete message {message_id} (sent again)",
                sqs.delete_message,
                QueueUrl=queue_url,
                ReceiptHandle=message["ReceiptHandle"],
            )
        except S3EventsError as exc:
            log.warning(
                "could not delete message %s after sending it again (%s): a duplicate", message_id, exc
            )
