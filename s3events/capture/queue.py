"""The SQS queue port: receive, delete in batches, extend visibility, queue depth. Wraps boto3."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from s3events.capture.ports import SQS_MAX_BATCH, BatchOutcome, Message
from s3events.errors import TransientError
from s3events.infra import aws

log = logging.getLogger(__name__)


def _chunks(items: Sequence[Message], size: int = SQS_MAX_BATCH) -> Iterable[Sequence[Message]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _parse_message(raw: dict[str, Any]) -> Message:
    attributes = raw.get("Attributes", {})
    sent = attributes.get("SentTimestamp")
    return Message(
        message_id=raw["MessageId"],
        receipt_handle=raw["ReceiptHandle"],
        body=raw.get("Body", ""),
        receive_count=int(attributes.get("ApproximateReceiveCount", "1")),
        sent_at=datetime.fromtimestamp(int(sent) / 1000, tz=UTC) if sent else None,
    )


class SqsQueue:
    """One queue. boto3 clients are thread-safe, so receivers may share an instance."""

    def __init__(
        self, options: aws.AwsOptions, queue_url: str, *, wait_seconds: int, visibility_timeout: int
    ):
        self.queue_url = queue_url
        self.wait_seconds = wait_seconds
        self.visibility_timeout = visibility_timeout
        # The read timeout must outlast the long poll.
        self._client = aws.client(options, "sqs", read_timeout=wait_seconds + 30)

    @property
    def client(self) -> Any:
        """The boto3 SQS client (metrics watch its retries)."""
        return self._client

    @aws.retrying()  # a 5xx or throttle at start-up is no reason to exit; fatal errors pass through
    def check(self) -> dict[str, str]:
        """Fail fast (FatalError) when the queue is missing or not ours to read. Returns its attributes."""
        response = aws.call(
            f"reading attributes of queue {self.queue_url}",
            self._client.get_queue_attributes,
            QueueUrl=self.queue_url,
            AttributeNames=["All"],
        )
        return dict(response.get("Attributes", {}))

    @aws.retrying()
    def receive(self, max_messages: int = SQS_MAX_BATCH, *, wait_seconds: int | None = None) -> list[Message]:
        response = aws.call(
            f"receiving from {self.queue_url}",
            self._client.receive_message,
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=max(1, min(max_messages, SQS_MAX_BATCH)),
            WaitTimeSeconds=self.wait_seconds if wait_seconds is None else wait_seconds,
            VisibilityTimeout=self.visibility_timeout,
            AttributeNames=["ApproximateReceiveCount", "SentTimestamp"],
        )
        return [_parse_message(raw) for raw in response.get("Messages", [])]

    def delete(self, messages: Sequence[Message], *, attempts: int = 3) -> BatchOutcome:
        """DeleteMessageBatch in chunks of 10, retrying the entries that failed."""
        return self._batch_call(
            "deleting messages",
            self._client.delete_message_batch,
            messages,
            lambda m: {"Id": _entry_id(m), "ReceiptHandle": m.receipt_handle},
            attempts=attempts,
        )

    def change_visibility(
        self, messages: Sequence[Message], timeout: int, *, attempts: int = 3
    ) -> BatchOutcome:
        return self._batch_call(
            "changing message visibility",
            self._client.change_message_visibility_batch,
            messages,
            lambda m: {"Id": _entry_id(m), "ReceiptHandle": m.receipt_handle, "VisibilityTimeout": timeout},
            attempts=attempts,
        )

    def depth(self) -> tuple[int, int]:
        """(visible, in flight) approximate message counts."""
        attributes = aws.call(
            f"reading depth of {self.queue_url}",
            self._client.get_queue_attributes,
            QueueUrl=self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return (
            int(attributes.get("ApproximateNumberOfMessages", 0)),
            int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
        )

    def _batch_call(
        self, action: str, method: Any, messages: Sequence[Message], entry: Any, *, attempts: int
    ) -> BatchOutcome:
        failed: dict[str, str] = {}
        for chunk in _chunks(messages):
            pending = {_entry_id(m): m for m in chunk}
            for attempt in range(1, attempts + 1):
                try:
                    response = aws.call(
                        action, method, QueueUrl=self.queue_url, Entries=[entry(m) for m in pending.values()]
                    )
                except TransientError as exc:
                    reasons = {entry_id: str(exc) for entry_id in pending}
                else:
                    reasons = {
                        f["Id"]: f"{f.get('Code')}: {f.get('Message', '')}"
                        for f in response.get("Failed", [])
                    }
                    # Sender faults (e.g. an expired receipt handle) will not succeed on retry.
                    permanent = {f["Id"] for f in response.get("Failed", []) if f.get("SenderFault")}
                    for entry_id in permanent:
                        failed[pending[entry_id].message_id] = reasons.pop(entry_id)
                        del pending[entry_id]
                pending = {entry_id: pending[entry_id] for entry_id in reasons if entry_id in pending}
                if not pending:
                    break
                log.debug(
                    "%s: %d entries failed (attempt %d/%d), retrying", action, len(pending), attempt, attempts
                )
                if attempt < attempts:
                    time.sleep(min(2.0, 0.1 * 2**attempt))  # backoff before retrying the failed entries
            for entry_id, message in pending.items():
                failed[message.message_id] = reasons.get(entry_id, "unknown failure")
        return BatchOutcome(failed)


_NOT_ENTRY_ID = re.compile(r"[^A-Za-z0-9_-]")


def _entry_id(message: Message) -> str:
    # Batch entry ids allow [A-Za-z0-9_-]{1,80} (ASCII); message ids are UUIDs. One regex, not a loop
    # per character: this runs for every message deleted (it was a tenth of capture's CPU).
    return _NOT_ENTRY_ID.sub("_", message.message_id)[:80]
