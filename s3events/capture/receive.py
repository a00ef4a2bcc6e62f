"""Gathering one batch: ReceiveMessage 10 at a time, several calls in flight, until a stop condition."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from s3events.capture.heartbeat import VisibilityHeartbeat
from s3events.capture.ports import SQS_MAX_BATCH, Message, Queue
from s3events.errors import TransientError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReceiveLimits:
    max_messages: int = 1000  # the batch cap: messages per metadata commit
    max_seconds: float = 10.0  # time budget for gathering one batch
    concurrency: int = 4  # ReceiveMessage calls in flight


class BatchReceiver:
    """Receives until the cap is reached, a receive comes back empty, or the time budget is spent.

    Only the first call long-polls (on an idle queue it waits for the first message); the calls that fill
    the batch after it are short polls, so an empty answer means the queue holds nothing more now and
    the batch is committed at once. Were they long polls too, the batch would wait a whole long poll
    (up to 20 s) for messages that are not coming before its commit.
    """

    def __init__(self, queue: Queue, heartbeat: VisibilityHeartbeat, limits: ReceiveLimits) -> None:
        self._queue = queue
        self._heartbeat = heartbeat
        self._limits = limits
        self._pool = ThreadPoolExecutor(max_workers=limits.concurrency, thread_name_prefix="sqs-receive")

    def gather(self) -> list[Message]:
        state = _GatherState(
            cap=self._limits.max_messages, deadline=time.monotonic() + self._limits.max_seconds
        )
        # The first call runs alone: on an idle queue it is the long poll, and one poll is enough.
        first = self._receive_into(state, wait_seconds=None)
        if not first or state.done():
            return first
        futures = [self._pool.submit(self._drain, state) for _ in range(self._limits.concurrency)]
        batch = list(first)
        errors: list[BaseException] = []
        for future in futures:
            try:
                batch.extend(future.result())
            except BaseException as exc:  # collect, so messages the other workers hold are not dropped
                errors.append(exc)
        if errors and not batch:
            raise errors[0]
        for error in errors:
            log.warning("a receive call failed; continuing with %d messages in hand: %s", len(batch), error)
        return batch

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _drain(self, state: _GatherState) -> list[Message]:
        out: list[Message] = []
        while not state.done():
            try:
                messages = self._receive_into(state, wait_seconds=0)
            except TransientError as exc:
                state.stop()
                if not out:
                    raise
                log.warning("receive failed after retries; committing what is in hand: %s", exc)
                break
            out.extend(messages)
        return out

    def _receive_into(self, state: _GatherState, *, wait_seconds: int | None) -> list[Message]:
        wanted = state.reserve()
        if wanted == 0:
            return []
        try:
            messages = self._queue.receive(wanted, wait_seconds=wait_seconds)
        except BaseException:
            state.release(wanted)
            raise
        self._heartbeat.track(messages)
        state.release(wanted - len(messages))
        if not messages:
            state.stop()
        return messages


class _GatherState:
    """Shared by the receiving threads: how many messages are reserved, and whether to stop."""

    def __init__(self, *, cap: int, deadline: float) -> None:
        self._lock = threading.Lock()
        self._cap = cap
        self._reserved = 0
        self._stopped = False
        self._deadline = deadline

    def done(self) -> bool:
        with self._lock:
            return self._stopped or self._reserved >= self._cap or time.monotonic() >= self._deadline

    def reserve(self) -> int:
        with self._lock:
            if self._stopped or time.monotonic() >= self._deadline:
                return 0
            wanted = min(SQS_MAX_BATCH, self._cap - self._reserved)
            self._reserved += max(wanted, 0)
            return max(wanted, 0)

    def release(self, count: int) -> None:
        with self._lock:
            self._reserved -= count

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
