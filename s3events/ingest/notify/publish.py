"""Sending one commit notice to one destination: SNS Publish, SQS SendMessage, EventBridge PutEvents.

A FIFO topic or queue gets the target as its message group (order per target) and (path, version) as
its deduplication id, so its own five-minute deduplication drops a repeat sent after a restart."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from s3events.infra import aws
from s3events.ingest.notify.model import EVENT_DETAIL_TYPE, EVENT_SOURCE, CommitNotice, Destination

# Short: a publish that hangs holds up the next batch (an unreachable destination is retried next cycle).
PUBLISH_TIMEOUT_SECONDS = 10.0

Send = Callable[[CommitNotice], None]


class PublishRefused(Exception):
    """The service answered but did not take the message (EventBridge reports it per entry)."""


def sender(destination: Destination, options: aws.AwsOptions) -> Send:
    """The function that sends a notice to `destination` (its client made at the first send)."""

    def send(notice: CommitNotice) -> None:
        if destination.kind == "sns":
            _sns(aws.client(options, "sns", read_timeout=PUBLISH_TIMEOUT_SECONDS), destination, notice)
        elif destination.kind == "sqs":
            _sqs(aws.client(options, "sqs", read_timeout=PUBLISH_TIMEOUT_SECONDS), destination, notice)
        else:
            _eventbridge(
                aws.client(options, "events", read_timeout=PUBLISH_TIMEOUT_SECONDS), destination, notice
            )

    return send


def _attributes(notice: CommitNotice) -> dict[str, dict[str, str]]:
    """Message attributes a subscription filter policy can match on."""
    return {
        "target": {"DataType": "String", "StringValue": notice.target},
        "version": {"DataType": "Number", "StringValue": str(notice.version)},
    }


def _fifo(destination: Destination, notice: CommitNotice) -> dict[str, str]:
    if not destination.fifo:
        return {}
    # Deduplication ids are at most 128 characters: a digest of (path, version).
    digest = hashlib.sha256(notice.dedupe_id.encode()).hexdigest()
    return {"MessageGroupId": notice.target, "MessageDeduplicationId": digest}


def _sns(client: Any, destination: Destination, notice: CommitNotice) -> None:
    client.publish(
        TopicArn=destination.address,
        Message=notice.body(),
        MessageAttributes=_attributes(notice),
        **_fifo(destination, notice),
    )


def _sqs(client: Any, destination: Destination, notice: CommitNotice) -> None:
    client.send_message(
        QueueUrl=destination.address,
        MessageBody=notice.body(),
        MessageAttributes=_attributes(notice),
        **_fifo(destination, notice),
    )


def _eventbridge(client: Any, destination: Destination, notice: CommitNotice) -> None:
    entry = {
        "Source": EVENT_SOURCE,
        "DetailType": EVENT_DETAIL_TYPE,
        "Detail": notice.body(),
        "EventBusName": destination.address,
    }
    answer = client.put_events(Entries=[entry])
    if answer.get("FailedEntryCount"):
        failed = answer["Entries"][0]
        raise PublishRefused(f"{failed.get('ErrorCode')}: {failed.get('ErrorMessage')}")
