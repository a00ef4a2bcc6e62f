"""Announcing a target's data commits, after them, at least once, in version order.

Steps per target and cycle: 1 read the cursor (at start-up: the target table's `<app_id>/notify`
transaction, or, the first time, the version after the table's current one) → 2 read the commitInfo of
the versions from the cursor on (a bounded window) → 3 send each summarised commit to each destination,
in order, retried (tenacity); a destination that still fails stops there until the next cycle → 4 hand
the new cursor to the target table, whose next commit records it (a backlog cleared in one cycle is
recorded at once, in a commit of its own). Nothing here ever fails a batch: every
error is logged, counted and retried next cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from tenacity import Retrying, stop_after_attempt, wait_exponential

from s3events.config import Settings, keys
from s3events.infra import aws
from s3events.infra.delta_commit import commit_files, stored_transactions
from s3events.ingest.cycle import Target
from s3events.ingest.notify.history import commit_infos
from s3events.ingest.notify.metrics import NotifyMetrics
from s3events.ingest.notify.model import CommitNotice, Cursor, Destination, cursor_id, notices
from s3events.ingest.notify.publish import Send, sender
from s3events.ingest.target_table import TargetTable

log = logging.getLogger(__name__)

WINDOW = 200  # versions read per cycle: a long outage is caught up over several cycles
ATTEMPTS = 3  # per notice and cycle


def destinations(settings: Settings, target: str) -> list[Destination]:
    """The destinations configured for `target` (none: notifications off)."""
    found = []
    for kind, key in (
        ("sns", keys.TARGET_NOTIFY_SNS_TOPIC_ARN),
        ("sqs", keys.TARGET_NOTIFY_SQS_QUEUE_URL),
        ("eventbridge", keys.TARGET_NOTIFY_EVENTBRIDGE_BUS_NAME),
    ):
        address = settings.get_for(target, key)
        if address:
            found.append(Destination(kind, address))  # type: ignore[arg-type]
    return found


@dataclass(slots=True)
class Announced:
    """One target's cycle of announcing: notices accepted and failures per destination kind, lag."""

    published: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    lost: list[int] = field(default_factory=list)
    lag: int = 0


class Announcer:
    """One target's announcer. Built before the target's first commit of the process (`start`)."""

    def __init__(
        self,
        name: str,
        table: TargetTable,
        sends: Mapping[Destination, Send],
        *,
        attempts: int = ATTEMPTS,
        wait: float = 0.2,
    ) -> None:
        self.name = name
        self._table = table
        self._sends = dict(sends)
        self._retrying = Retrying(
            stop=stop_after_attempt(attempts),
            wait=wait_exponential(multiplier=wait, max=wait * 10),
            reraise=True,
        )
        self._cursor: Cursor | None = None
        # Commits read by earlier cycles and not yet announced everywhere (a destination that is down
        # would otherwise have the same commit files read again every cycle), and the last version read.
        self._infos: dict[int, dict[str, Any]] = {}
        self._read_through = -1

    def start(self) -> None:
        """Step 1: where announcing goes on (the stored cursor) or begins (the next version)."""
        table = self._table.handle.latest()
        app = cursor_id(self._table.app_id)
        stored = stored_transactions(self._table.handle, [app])[app]
        if stored is None:
            stored = 0 if table is None else int(table.version()) + 1
            log.info("target %s: notifications start at table version %d", self.name, stored)
        self._cursor = Cursor(stored, self._sends)
        self._table.announced = stored

    def announce(self) -> Announced:
        """Steps 2-4 for the versions committed since the last call."""
        if self._cursor is None:
            self.start()
        cursor = self._cursor
        assert cursor is not None
        result = Announced()
        table = self._table.handle.latest()
        if table is None or cursor.durable > (latest := int(table.version())):
            return result
        first, last = cursor.durable, min(latest, cursor.durable + WINDOW - 1)
        infos, result.lost = commit_infos(
            self._table.path,
            self._table.handle.storage_options(),
            first=max(first, self._read_through + 1),
            last=last,
        )
        self._infos.update((info["version"], info) for info in infos)
        self._read_through = max(self._read_through, last)
        if result.lost:
            log.error(
                "target %s: versions %s left the log before they were announced", self.name, result.lost
            )
        held = [info for version, info in self._infos.items() if first <= version <= last]
        pending = notices(self.name, self._table.path, held, table_id=str(table.metadata().id))
        for destination, send in self._sends.items():
            self._send_due(destination, send, cursor.due(destination, pending), result)
        cursor.settle(pending, last)
        self._infos = {v: info for v, info in self._infos.items() if v >= cursor.durable}
        self._table.announced = cursor.durable  # recorded by the target's next commit
        if len({n.version for n in pending if n.version < cursor.durable}) > 1:
            try:  # a backlog cleared (an outage over): recorded now, or status would still see it
                self._record()
            except Exception as exc:  # the target's next commit records it anyway
                log.warning("target %s: recording its notification cursor failed: %s", self.name, exc)
        result.lag = cursor.lag(pending) + (latest - last)
        return result

    def _record(self) -> None:
        """The cursor alone in a commit of its own (no data, nothing announced), only after a backlog."""
        table = self._table.handle.latest()
        assert table is not None and self._table.announced is not None
        commit_files(
            self._table.path,
            [],
            schema=pa.schema(table.schema()),
            partition_by=table.metadata().partition_columns,
            storage_options=self._table.handle.storage_options(),
            transactions={cursor_id(self._table.app_id): self._table.announced},
            custom_metadata={"s3events.writer": "ingest-notify"},
            handle=self._table.handle,
        )

    def _send_due(
        self, destination: Destination, send: Send, due: Sequence[CommitNotice], result: Announced
    ) -> None:
        assert self._cursor is not None
        for notice in due:
            try:
                self._retrying(send, notice)
            except Exception as exc:  # the destination's problem never stops ingest: next cycle again
                reason = f"{type(exc).__name__}: {exc}"
                log.warning(
                    "target %s: announcing version %d to %s %s failed (retried next cycle): %s",
                    self.name,
                    notice.version,
                    destination.kind,
                    destination.address,
                    reason,
                )
                result.failed[destination.label] = reason
                return
            self._cursor.accepted(destination, notice)
            result.published[destination.label] = result.published.get(destination.label, 0) + 1


class Announcers:
    """Every announcing target of an ingest process; `announce` after each cycle."""

    def __init__(self, announcers: Sequence[Announcer], metrics: NotifyMetrics | None = None) -> None:
        self._announcers = list(announcers)
        self._metrics = metrics

    def __bool__(self) -> bool:
        return bool(self._announcers)

    def start(self) -> None:
        """Before the first cycle: each target's cursor read (a failure is retried at `announce`)."""
        for announcer in self._announcers:
            try:
                announcer.start()
            except Exception as exc:
                log.warning("target %s: reading its notification cursor failed: %s", announcer.name, exc)

    def announce(self) -> dict[str, Announced]:
        results = {}
        for announcer in self._announcers:
            try:
                results[announcer.name] = result = announcer.announce()
            except Exception as exc:  # reading the log failed: the next cycle tries again
                log.warning("target %s: announcing its commits failed: %s", announcer.name, exc)
                continue
            self._record(announcer.name, result)
        return results

    def _record(self, target: str, result: Announced) -> None:
        if self._metrics is None:
            return
        for label, count in result.published.items():
            self._metrics.published.labels(target, label).inc(count)
        for label in result.failed:
            self._metrics.failures.labels(target, label).inc()
        self._metrics.lost.labels(target).inc(len(result.lost))
        self._metrics.lag.labels(target).set(result.lag)


def announcers(
    settings: Settings, targets: Sequence[Target], metrics: NotifyMetrics | None = None
) -> Announcers:
    """The announcers of the `targets` that have destinations, started (their cursors read)."""
    options = aws.options_from(settings)
    found = []
    for target in targets:
        configured = destinations(settings, target.spec.name)
        if configured and isinstance(target.table, TargetTable):
            sends = {d: sender(d, options) for d in configured}
            found.append(Announcer(target.spec.name, target.table, sends))
    started = Announcers(found, metrics)
    started.start()
    return started
