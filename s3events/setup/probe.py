"""The end-to-end probe of `setup --verify`: PUT a small object under the probe prefix and wait, up to a
deadline, for its event on the queue; then delete the object and the probe's messages.

Messages that are not the probe's are never lost: they are received with a visibility timeout that
outlasts the probe and made visible again at the end (and would come back on their own after that
timeout if this process died). Their receive count does go up by one.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable, MutableMapping
from typing import Any

from s3events.events.model import EventKind
from s3events.events.parse import parse_message
from s3events.infra import aws
from s3events.setup.links import Link
from s3events.setup.notifications import events_overlap
from s3events.setup.plan import SetupSpec

log = logging.getLogger(__name__)

Clock = Callable[[], float]
PROBE_NAME = "probe-"


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
    held: MutableMapping[str, str],
    clock: Clock = time.monotonic,
) -> Link:
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
    held: MutableMapping[str, str],
    clock: Clock,
) -> bool:
    """Long-poll until the probe's event of this kind arrives or the deadline passes (no fixed sleeps)."""
    hold = min(43200, math.ceil(spec.verify_timeout_seconds * 2) + 60)
    while (remaining := deadline - clock()) > 0:
        answer = aws.call(
            f"receive from queue {spec.queue_name}",
            sqs.receive_message,
            QueueUrl=spec.queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=min(20, max(1, math.ceil(remaining))),
            VisibilityTimeout=hold,
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
                held[message["MessageId"]] = message["ReceiptHandle"]
        if found:
            return True
    return False


def release(sqs: Any, queue_url: str, held: MutableMapping[str, str]) -> None:
    """Make the messages the probe received but does not own visible again at once, for capture."""
    handles = list(held.values())
    for start in range(0, len(handles), 10):
        entries = [
            {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": 0}
            for i, handle in enumerate(handles[start : start + 10])
        ]
        try:
            answer = aws.call(
                "release messages", sqs.change_message_visibility_batch, QueueUrl=queue_url, Entries=entries
            )
            failed = answer.get("Failed", [])
        except Exception as exc:  # they come back after their visibility timeout anyway
            log.warning(
                "could not release %d message(s) at once (%s); they return after their timeout",
                len(entries),
                exc,
            )
            continue
        if failed:
            log.warning(
                "could not release %d message(s) at once; they return after their timeout", len(failed)
            )
    held.clear()
