"""Visibility heartbeat: messages in hand are kept invisible until they are deleted or released.

Without it a commit slower than the visibility timeout would let SQS hand the same messages to another
consumer mid-flight. Duplicates would still be dropped by the table, but at the price of wasted work.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from s3events.capture.ports import Message, Queue
from s3events.errors import S3EventsError

log = logging.getLogger(__name__)


class VisibilityHeartbeat:
    """A daemon thread that extends visibility of tracked messages once half their timeout has passed."""

    def __init__(self, queue: Queue, *, timeout: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._queue = queue
        self._timeout = timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._deadlines: dict[str, tuple[Message, float]] = {}  # receipt handle → (message, invisible until)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.extensions = 0  # how many extensions were sent (for tests and logs)

    @property
    def enabled(self) -> bool:
        return self._timeout > 0

    def track(self, messages: Iterable[Message]) -> None:
        if not self.enabled:
            return
        until = self._clock() + self._timeout
        with self._lock:
            for message in messages:
                self._deadlines[message.receipt_handle] = (message, until)

    def untrack(self, messages: Iterable[Message]) -> None:
        with self._lock:
            for message in messages:
                self._deadlines.pop(message.receipt_handle, None)

    def tracked(self) -> list[Message]:
        with self._lock:
            return [message for message, _ in self._deadlines.values()]

    def start(self) -> VisibilityHeartbeat:
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="visibility-heartbeat", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _run(self) -> None:
        tick = max(0.1, min(self._timeout / 4, 5.0))
        while not self._stop.wait(tick):
            try:
                self.extend_due()
            except S3EventsError as exc:  # said by an adapter in one line (e.g. credentials rejected)
                log.warning("visibility heartbeat failed; retrying on the next tick: %s", exc)
            except Exception:  # the heartbeat must outlive a failed call; the next tick tries again
                log.exception("visibility heartbeat failed; retrying on the next tick")

    def extend_due(self) -> int:
        """Extend every tracked message whose remaining invisibility is under half the timeout."""
        now = self._clock()
        with self._lock:
            due = [m for m, until in self._deadlines.values() if until - now < self._timeout / 2]
        if not due:
            return 0
        outcome = self._queue.change_visibility(due, self._timeout)
        extended: Sequence[Message] = [m for m in due if m.message_id not in outcome.failed]
        with self._lock:
            for message in extended:
                if message.receipt_handle in self._deadlines:
                    self._deadlines[message.receipt_handle] = (message, now + self._timeout)
            self.extensions += len(extended)
            # A message deleted while this call was in flight fails harmlessly; only warn about the rest.
            still_held = {m.message_id for m, _ in self._deadlines.values()}
        for message_id, reason in outcome.failed.items():
            if message_id in still_held:
                log.warning("could not extend visibility of message %s: %s", message_id, reason)
        log.debug("extended visibility of %d messages by %ds", len(extended), self._timeout)
        return len(extended)
