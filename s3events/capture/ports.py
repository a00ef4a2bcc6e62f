"""The narrow interfaces capture needs, and the types they speak: shaped like what implements them
(`queue.SqsQueue`, `metadata.table.MetadataTable`, `QuarantineTable`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from s3events.events.record import EventRecord, QuarantineRecord

SQS_MAX_BATCH = 10  # ReceiveMessage, DeleteMessageBatch and ChangeMessageVisibilityBatch all cap at 10


@dataclass(frozen=True, slots=True)
class Message:
    message_id: str
    receipt_handle: str
    body: str
    receive_count: int
    sent_at: datetime | None


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """Entries a batch call could not apply, by message id, with the reason SQS gave."""

    failed: dict[str, str]


class CommitResultLike(Protocol):
    @property
    def written(self) -> int: ...
    @property
    def duplicates(self) -> int: ...
    @property
    def version(self) -> int | None: ...
    @property
    def conflicts(self) -> int: ...


class Queue(Protocol):
    queue_url: str
    visibility_timeout: int

    def receive(self, max_messages: int = 10, *, wait_seconds: int | None = None) -> list[Message]:
        """Up to `max_messages` messages; waits up to `wait_seconds` for the first (None: the queue's own
        long-poll wait; 0: a short poll, what is there now)."""
        ...
    def delete(self, messages: Sequence[Message], *, attempts: int = 3) -> BatchOutcome: ...
    def change_visibility(
        self, messages: Sequence[Message], timeout: int, *, attempts: int = 3
    ) -> BatchOutcome: ...


class EventSink(Protocol):
    def commit(
        self, records: Sequence[EventRecord], *, custom_metadata: Mapping[str, str]
    ) -> CommitResultLike: ...


class QuarantineSink(Protocol):
    def record(
        self, records: Sequence[QuarantineRecord], *, custom_metadata: Mapping[str, str]
    ) -> CommitResultLike: ...
