"""One capture cycle, as numbered steps: 1 receive → 2 parse → 3 commit → 4 delete.

Messages are deleted only after the metadata commit that holds their events succeeded, so a crash at
any instant either leaves a message in the queue (it is redelivered, and the table drops the duplicate)
or finds its events already in the table. Nothing is lost and nothing is written twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from s3events.capture.heartbeat import VisibilityHeartbeat
from s3events.capture.ports import EventSink, Message, QuarantineSink, Queue
from s3events.capture.receive import BatchReceiver, ReceiveLimits
from s3events.events.parse import parse_message
from s3events.events.record import EventRecord, QuarantineRecord

log = logging.getLogger(__name__)

PoisonAction = Literal["delete", "redrive"]


@dataclass(frozen=True, slots=True)
class CaptureOptions:
    limits: ReceiveLimits = field(default_factory=ReceiveLimits)
    max_message_bytes: int = 262_144
    poison_action: PoisonAction = "delete"
    raw_body_max_chars: int = 65_536
    # Receive the next batch while this one commits (hides the commit behind the long poll).
    prefetch: bool = True
    # The run loop's minimum seconds between cycle starts: a prefetch starts receiving no sooner than the
    # next cycle may start, so its batch holds what arrived until then instead of waiting, gathered
    # early, while newer messages queue behind it for another interval.
    cycle_interval_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class CycleResult:
    received: int = 0
    written: int = 0
    duplicates: int = 0
    poison: int = 0
    ignored: int = 0
    test_events: int = 0
    deleted: int = 0
    delete_failed: int = 0
    commit_conflicts: int = 0  # lost races with other writers, retried on fresh table state
    table_version: int | None = None
    elapsed_seconds: float = 0.0
    commit_seconds: float = 0.0
    delete_seconds: float = 0.0

    def fields(self) -> dict[str, object]:
        """The cycle's figures as structured log fields (`extra=`; JSON logs show them as keys)."""
        return {
            "received": self.received,
            "written": self.written,
            "duplicates": self.duplicates,
            "poison": self.poison,
            "deleted": self.deleted,
            "delete_failed": self.delete_failed,
            "table_version": self.table_version,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
        }

    def log_line(self) -> str:
        return (
            f"capture cycle: received={self.received} written={self.written} duplicates={self.duplicates} "
            f"poison={self.poison} ignored={self.ignored} test_events={self.test_events} "
            f"deleted={self.deleted} delete_failed={self.delete_failed} "
            f"table_version={self.table_version} elapsed={self.elapsed_seconds:.2f}s "
            f"(commit {self.commit_seconds:.2f}s, delete {self.delete_seconds:.2f}s)"
        )


@dataclass(slots=True)
class _Parsed:
    records: list[EventRecord] = field(default_factory=list)
    quarantine: list[QuarantineRecord] = field(default_factory=list)
    ignored: int = 0
    test_events: int = 0
    to_delete: list[Message] = field(default_factory=list)


class Capture:
    """The capture stage. `run_once()` runs one cycle; `close()` hands back anything still in hand.

    `clock` (monotonic seconds) and `pause` (sleep up to n seconds; True when closing) are injectable for
    tests; `pause` defaults to a wait that `close()` cuts short."""

    def __init__(
        self,
        queue: Queue,
        metadata: EventSink,
        quarantine: QuarantineSink,
        options: CaptureOptions | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        pause: Callable[[float], bool] | None = None,
    ) -> None:
        self._closing = threading.Event()
        self._clock = clock
        self._pause = pause or self._closing.wait
        self._queue = queue
        self._metadata = metadata
        self._quarantine = quarantine
        self._options = options or CaptureOptions()
        self.heartbeat = VisibilityHeartbeat(queue, timeout=queue.visibility_timeout).start()
        self._receiver = BatchReceiver(queue, self.heartbeat, self._options.limits)
        self._prefetcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqs-prefetch")
        self._next: Future[list[Message]] | None = None

    @property
    def queue(self) -> Queue:
        return self._queue

    def run_once(self) -> CycleResult:
        started = self._clock()
        # 1. receive (or take the batch prefetched during the previous commit)
        batch = self._take_batch()
        if not batch:
            return CycleResult(elapsed_seconds=self._clock() - started)
        if self._options.prefetch:
            next_start = started + self._options.cycle_interval_seconds
            self._next = self._prefetcher.submit(self._gather_from, next_start)
        # 2. parse: every message becomes events, a test event, ignored records or poison
        parsed = self._parse(batch)
        # 3. commit: quarantine first, then the events. A failure here deletes nothing.
        committing = time.monotonic()
        try:
            if parsed.quarantine:
                self._quarantine.record(parsed.quarantine, custom_metadata=self._commit_info(len(batch)))
            result = self._metadata.commit(parsed.records, custom_metadata=self._commit_info(len(batch)))
        except BaseException:
            # Stop extending them: SQS redelivers the batch once its visibility timeout runs out.
            self.heartbeat.untrack(batch)
            raise
        # 4. delete what is durably recorded; release poison left for the queue's redrive policy.
        # Untrack first: extending a message that is being deleted only earns an invalid-handle error.
        self.heartbeat.untrack(batch)
        deleting = time.monotonic()
        outcome = self._queue.delete(parsed.to_delete) if parsed.to_delete else None
        failed = outcome.failed if outcome else {}
        for message_id, reason in failed.items():
            log.warning(
                "message %s was committed but not deleted (%s); harmless: its redelivery is deduplicated",
                message_id,
                reason,
            )
        return CycleResult(
            received=len(batch),
            written=result.written,
            duplicates=result.duplicates,
            poison=len(parsed.quarantine),
            ignored=parsed.ignored,
            test_events=parsed.test_events,
            deleted=len(parsed.to_delete) - len(failed),
            delete_failed=len(failed),
            commit_conflicts=result.conflicts,
            table_version=result.version,
            elapsed_seconds=self._clock() - started,
            commit_seconds=deleting - committing,
            delete_seconds=time.monotonic() - deleting,
        )

    def close(self) -> None:
        """Release messages received but not committed (a prefetched batch) and stop the threads."""
        self._closing.set()  # a prefetch still waiting for its start receives nothing
        if self._next is not None:
            try:
                pending = self._next.result()
            except Exception:
                pending = []
            self._next = None
            if pending:
                # Visible again at once, for this or another consumer; nothing was committed for them.
                self._queue.change_visibility(pending, 0)
                self.heartbeat.untrack(pending)
                log.info("released %d prefetched messages back to the queue", len(pending))
        self._prefetcher.shutdown(wait=True)
        self._receiver.close()
        self.heartbeat.stop()

    def _gather_from(self, start: float) -> list[Message]:
        """The prefetch: gather a batch once `start` (on `clock`) has come, or nothing when closing."""
        delay = start - self._clock()
        if delay > 0 and self._pause(delay):
            return []
        if self._closing.is_set():
            return []
        return self._receiver.gather()

    def _take_batch(self) -> list[Message]:
        if self._next is not None:
            future, self._next = self._next, None
            return future.result()
        return self._receiver.gather()

    def _parse(self, batch: list[Message]) -> _Parsed:
        out = _Parsed()
        now = datetime.now(UTC)
        for message in batch:
            parsed = parse_message(message.body, max_bytes=self._options.max_message_bytes)
            out.records.extend(
                EventRecord(event=event, source="sqs", captured_at=now, message_id=message.message_id)
                for event in parsed.events
            )
            out.ignored += len(parsed.ignored)
            out.test_events += parsed.test_event is not None
            if parsed.poison is None:
                out.to_delete.append(message)
                continue
            out.quarantine.append(self._quarantine_record(message, parsed.poison.reason, now))
            log.warning(
                "poison message %s (receive count %d) quarantined: %s",
                message.message_id,
                message.receive_count,
                parsed.poison.reason,
            )
            if self._options.poison_action == "delete":
                out.to_delete.append(message)  # else: left for the queue's redrive policy (DLQ)
        return out

    def _quarantine_record(self, message: Message, reason: str, now: datetime) -> QuarantineRecord:
        limit = self._options.raw_body_max_chars
        return QuarantineRecord(
            message_id=message.message_id,
            receive_count=message.receive_count,
            reason=reason,
            raw_body=message.body[:limit],
            raw_body_bytes=len(message.body.encode("utf-8", errors="replace")),
            truncated=len(message.body) > limit,
            queue_url=self._queue.queue_url,
            sent_at=message.sent_at,
            quarantined_at=now,
        )

    def _commit_info(self, messages: int) -> dict[str, str]:
        return {"s3events.writer": "capture", "s3events.messages": str(messages)}
