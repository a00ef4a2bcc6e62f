"""The narrow interfaces capture needs, shaped like the adapters that implement them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from s3events.adapters.sqs import BatchOutcome, Message
from s3events.events.record import EventRecord, QuarantineRecord


class CommitResultLike(Protocol):
    @property
    def written(self) -> int: ...
    @property
    def duplicates(self) -> int: ...
    @property
    def version(self) -> int | None: ...


class Queue(Protocol):
    queue_url: str
    visibility_timeout: int

    def receive(self, max_messages: int = 10) -> list[Message]: ...
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
