"""Ingest, per target and per batch, as numbered steps: 1 plan → 2 read (Spark) → 3 write + checkpoint.

The checkpoint is a Delta app transaction inside the same commit as the batch's data, so a kill at any
instant either leaves the batch invisible (it is redone from the same checkpoint) or finds it committed
together with its checkpoint (it is not redone). Every line lands exactly once.

Built from ports (`ports.py`); `service.build_ingest` wires the real ones from settings.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from s3events.config.keys import CheckpointStrategy
from s3events.errors import CheckpointError, CommitConflict, ConfigError, FatalError, S3EventsError
from s3events.infra.delta_errors import transient_reason
from s3events.ingest.deletes import NO_DELETES
from s3events.ingest.model import Batch, Checkpoint
from s3events.ingest.notify.model import BatchSummary, schema_changed
from s3events.ingest.plan import (
    append_step,
    caught_up_to,
    ensure_forward,
    mirror_step,
    plan,
    plan_snapshot,
    snapshot_read,
)
from s3events.ingest.ports import Changes, ErrorStore, Feed, ReadBatch, ReadResult, TargetStore
from s3events.ingest.report import BatchReport, IngestCycle, TargetProgress
from s3events.ingest.target import TargetSpec

log = logging.getLogger(__name__)

# Metadata versions a quiet target's in-memory cursor may run ahead of its stored position (`_keep_progress`).
PROGRESS_EVERY = 1000


class TargetFailed(S3EventsError):
    """One target's batch failed; the other targets go on."""


@dataclass(frozen=True, slots=True)
class Target:
    """One target as the cycle sees it: its declaration, its table and its error table."""

    spec: TargetSpec
    table: TargetStore
    errors: ErrorStore


class _TargetState:
    def __init__(self, target: Target) -> None:
        self.spec = target.spec
        self.table = target.table
        self.errors = target.errors
        self.cursor: Checkpoint | None = None  # in memory: scanned-through point past unrouted versions
        self.origin: Checkpoint | None = None  # the recorded starting point while there is no checkpoint
        self.durable: Checkpoint | None = None  # what a restart starts from: checkpoint, else origin
        self.checkpointed = False  # `durable` is a checkpoint in the target table
        self.caught_up_logged = False
        self.oldest_pending: datetime | None = None  # event time of the oldest routed change not ingested

    @property
    def stored(self) -> Checkpoint | None:
        """The checkpoint the target table held when this cycle read it: what its commit must still find.
        Not the batch's start, which may lie past it (see TargetTable._guard)."""
        return self.durable if self.checkpointed else None


class Ingest:
    """The ingest stage for a set of targets. `run_once()` runs at most one batch per target."""

    def __init__(
        self,
        feed: Feed,
        targets: Sequence[Target],
        *,
        read: ReadBatch,
        strategy: CheckpointStrategy = "earliest",
        start_at: int | None = None,
        progress_every: int = PROGRESS_EVERY,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._feed = feed
        self._clock = clock
        self._timer = timer
        self._seen: int | None = None  # the newest metadata version the last cycle found
        self._progress_every = progress_every
        self._read = read
        self._strategy = strategy
        self._targets = [_TargetState(target) for target in targets]
        if start_at is not None:
            explicit = Checkpoint(start_at, 0)
            for state in self._targets:
                stored = state.table.checkpoint()
                if stored is not None:
                    try:
                        ensure_forward(stored, explicit)  # --checkpoint never moves a target backwards
                    except CheckpointError as exc:
                        raise CheckpointError(f"target {state.spec.name}: {exc}") from exc
                state.cursor = explicit
        self.up_to: int | None = None  # --once: the metadata version present at start

    @property
    def target_names(self) -> list[str]:
        return [state.spec.name for state in self._targets]

    def freeze_at_latest(self) -> None:
        """--once: ingest only what the metadata table holds now, not what arrives meanwhile."""
        self.up_to = self._feed.latest_version()

    def run_once(self) -> IngestCycle:
        result = IngestCycle()
        latest = self._feed.latest_version()
        if latest is None:
            log.info("the metadata table %s does not exist yet; nothing to ingest", self._feed.path)
            return result
        self._seen = latest
        if self.up_to is not None:
            latest = min(latest, self.up_to)
        positions = {s.spec.name: self._position(s, latest) for s in self._targets}
        # One read of the change feed serves every target (but those reading the snapshot).
        low = min((p.version for p in positions.values() if not p.in_snapshot), default=latest)
        changes = self._feed.changes_after(low, up_to=latest)
        for state in self._targets:
            name = state.spec.name
            try:
                outcome = self._run_target(state, positions[name], changes)
            except (FatalError, ConfigError):  # a configuration mistake met at a first batch: exit 2
                raise
            except Exception as exc:  # one failing target does not stop the others
                reason = transient_reason(exc)
                if reason is not None:  # an outage, throttling: one line, no traceback
                    log.warning("target %s: batch failed, retried next cycle: %s", name, reason)
                    log.debug("the failed batch's traceback", exc_info=True)
                else:
                    log.exception("target %s: batch failed; other targets go on", name)
                result.failed[name] = f"{type(exc).__name__}: {exc}"
                continue
            finally:
                result.progress[name] = self._progress(state, positions[name], latest)
            if outcome is not None:
                log.info(outcome.log_line(), extra={"target": name, "rows": outcome.rows})
                result.batches.append(outcome)
        return result

    def wait_for_changes(self, seconds: float, *, pause: Callable[[float], bool], every: float) -> bool:
        """Between idle cycles: up to `seconds`, check every `every` seconds whether the metadata table
        has a version newer than the last cycle found (`Feed.has_version`: one HEAD request on S3, not a
        listing of the log). True as soon as it has, so the next cycle starts right after capture's
        commit instead of at the end of a fixed pause; False at the timeout or when `pause` (a sleep that
        answers True when the process is stopping) says stop. Reads nothing it would have to remember:
        the cycle that follows reads the table as usual."""
        deadline = self._timer() + seconds
        seen = self._seen
        while True:
            if seen is not None and every > 0:
                try:
                    if self._feed.has_version(seen + 1):
                        return True
                except Exception as exc:  # the next cycle meets (and reports) the same problem
                    log.debug("checking for metadata version %d failed: %s", seen + 1, exc)
                    seen = None  # pause out the rest, as without a check
            left = deadline - self._timer()
            if left <= 0:
                return False
            if pause(min(every, left) if seen is not None and every > 0 else left):
                return False

    def _progress(self, state: _TargetState, start: Checkpoint, latest: int) -> TargetProgress:
        read = state.cursor or start
        oldest = state.oldest_pending
        age = 0.0 if oldest is None else max(0.0, (self._clock() - oldest).total_seconds())
        return TargetProgress(max(read.version, -1), max(0, latest - read.version), age)

    def _position(self, state: _TargetState, latest: int) -> Checkpoint:
        stored = state.table.checkpoint()
        state.checkpointed = stored is not None
        if stored is None:
            stored = state.origin = state.origin or state.errors.origin()
        state.durable = stored
        # Another process's bootstrap went first: theirs holds (positions in two snapshots do not compare).
        cursor = state.cursor
        if cursor and cursor.in_snapshot and stored is not None and stored.snapshot != cursor.snapshot:
            state.cursor = None
        if state.cursor is not None and (stored is None or state.cursor > stored):
            return state.cursor
        if stored is not None:
            return stored
        if self._strategy == "earliest":  # the snapshot of `latest`, then its change feed from there
            start = Checkpoint.bootstrap(latest)
        else:
            # Durable from the first run: a restart (or the next --once) starts from the same point.
            start = state.origin = state.durable = state.errors.record_origin(Checkpoint(latest, 0))
        log.info(
            "target %s has no checkpoint; starting at %s (strategy %s)",
            state.spec.name,
            start.label,
            self._strategy,
        )
        state.cursor = start
        return start

    def _run_target(self, state: _TargetState, start: Checkpoint, changes: Changes) -> BatchReport | None:
        spec = state.spec
        if start.in_snapshot:
            report = self._run_snapshot(state, start)
            if report is not None or state.cursor is None or state.cursor.in_snapshot:
                return report
            # The snapshot is read: its change feed follows in the same cycle (a --once run ends idle).
            start = state.cursor
            changes = self._feed.changes_after(
                start.version, up_to=max(start.version, changes.latest_version)
            )
        rows = [r for r in changes.rows if r.commit_version > start.version]
        mirror = spec.on_object_removed == "delete"
        # 1. plan: a bounded batch after the checkpoint (pure)
        batch = plan(
            start,
            rows,
            route=spec.route,
            limits=spec.limits,
            mirror=mirror,
            latest_version=changes.latest_version,
        )
        if batch is None:
            state.oldest_pending = None
            state.cursor = caught_up_to(
                start,
                rows,
                route=spec.route,
                mirror=mirror,
                latest_version=changes.latest_version,
            )
            if not state.caught_up_logged:
                log.info("target %s is caught up at metadata version %d", spec.name, state.cursor.version)
                state.caught_up_logged = True
            self._keep_progress(state)
            return None
        state.caught_up_logged = False
        state.oldest_pending = min((f.event_time for f in (*batch.files, *batch.removals)), default=None)
        result = self._run_batch(state, batch)
        state.cursor = batch.end
        if batch.end.position == 0 and batch.end.version >= changes.latest_version:
            state.oldest_pending = None  # caught up
        return result

    def _run_snapshot(self, state: _TargetState, start: Checkpoint) -> BatchReport | None:
        """A bootstrapping target's next batch: routed rows of the snapshot it stands in (streamed; the
        plan reads only as far as the batch's limits), or, when none is left, its move to the snapshot's
        version (in memory, made durable by the next commit) to follow the change feed from there."""
        spec = state.spec
        # 1. plan: the next bounded batch of the snapshot's routed rows, in the snapshot's order
        rows = self._feed.snapshot_rows(start, bucket=spec.route.bucket, key_prefix=spec.route.key_prefix)
        mirror = spec.on_object_removed == "delete"
        batch = plan_snapshot(start, rows, route=spec.route, limits=spec.limits, mirror=mirror)
        if batch is None:
            state.cursor = snapshot_read(start)
            log.info("target %s: read the metadata table's snapshot at version %d", spec.name, start.snapshot)
            return None
        state.oldest_pending = min((f.event_time for f in (*batch.files, *batch.removals)), default=None)
        result = self._run_batch(state, batch)
        state.cursor = batch.end
        return result

    def _keep_progress(self, state: _TargetState) -> None:
        """Make a quiet target's cursor durable once it is `progress_every` versions past what is stored.

        A target whose routes see nothing new makes no batches, so its stored position would stay where
        its last batch left it: every restart would rescan from there, and the metadata table could never
        clean up the log and change data it would need (maintenance keeps them for it). Moving it over
        versions that route nothing to the target skips nothing it has to ingest."""
        cursor, durable = state.cursor, state.durable
        if cursor is None or cursor.position != 0:
            return
        if cursor.version - (durable.version if durable is not None else -1) < self._progress_every:
            return
        try:
            if state.checkpointed:
                assert durable is not None
                state.table.commit_checkpoint(expected=durable, end=cursor)
            else:
                cursor = state.origin = state.errors.record_origin(cursor, replacing=durable)
        except (CommitConflict, CheckpointError):  # another ingest moved it meanwhile: theirs holds
            log.info("target %s: its position moved meanwhile; not recording %s", state.spec.name, cursor)
            return
        state.durable = cursor
        log.info(
            "target %s: nothing routed to it up to metadata version %d (recorded)",
            state.spec.name,
            cursor.version,
        )

    def _run_batch(self, state: _TargetState, batch: Batch) -> BatchReport:
        spec = state.spec
        started = self._timer()
        batch, deleted = self._settle_removed(state, batch)
        if not batch.files:
            removed = BatchSummary(0, 0, 0, rows_deleted=deleted) if deleted else None  # announced
            version = state.table.commit_checkpoint(expected=state.stored, end=batch.end, summary=removed)
            return BatchReport(
                target=spec.name,
                files=0,
                rows=0,
                errors=0,
                deleted=deleted,
                start=batch.start,
                end=batch.end,
                version=version,
                seconds=self._timer() - started,
            )
        # 2. read and parse on Spark; executors write Parquet files (invisible until committed)
        read_bytes = batch.total_bytes
        existing = state.table.schema()
        output = self._read(batch, spec, existing_schema=existing)
        if output.failed_files and spec.on_missing_object == "fail":
            uri, reason = next(iter(output.failed_files.items()))
            raise TargetFailed(f"target {spec.name}: {uri}: {reason} (on.missing.object=fail)")
        for uri, reason in output.failed_files.items():
            log.warning("target %s: skipped %s: %s", spec.name, uri, reason)
        # 3. write: error rows first (skipped on replay), then data and checkpoint in one commit
        state.errors.record(output.errors, end=batch.end)
        summary = BatchSummary(
            files=len(batch.files),
            rows=output.rows,
            error_rows=output.errors.num_rows,
            rows_deleted=deleted,
            schema_changed=schema_changed(existing and existing.names, output.schema.names),
            rows_filtered=output.filtered,
            transform=output.transform,
        )
        version = self._commit(state, output, batch, summary)
        deletes = output.merge.deletes if spec.delete is not None and output.merge is not None else NO_DELETES
        return BatchReport(
            target=spec.name,
            files=len(batch.files),
            rows=output.rows,
            errors=output.errors.num_rows,
            deleted=deleted,
            start=batch.start,
            end=batch.end,
            version=version,
            seconds=self._timer() - started,
            bytes=read_bytes,
            fast_path_files=output.fast_path_files,
            filtered=output.filtered,
            skipped=dict(output.failed_files),
            deletes=deletes.applied,
            deletes_noop=deletes.noop,
            rescued=output.rescued,
            ignored_fields=len(output.ignored_fields),
        )

    @staticmethod
    def _settle_removed(state: _TargetState, batch: Batch) -> tuple[Batch, int]:
        """Step 1b: the batch as the target's removal rule leaves it, and the rows that rule deleted."""
        spec = state.spec
        if spec.on_object_removed == "delete":
            # The target mirrors S3: rows of removed or replaced objects go first (idempotent, own commit).
            files, deletions = mirror_step(batch)
            return replace(batch, files=files), state.table.delete_rows(deletions)
        if any(f.recreated for f in batch.files):
            # Appending: content uploaded again lands once (rows of it in the target or this batch).
            held = state.table.held_contents([f for f in batch.files if f.recreated])
            return replace(batch, files=append_step(batch, held)), 0
        return batch, 0

    @staticmethod
    def _commit(state: _TargetState, output: ReadResult, batch: Batch, summary: BatchSummary) -> int:
        """Step 3: the batch's rows and its checkpoint in one commit, with the `summary` notifications
        announce; the table version it made."""
        spec = state.spec
        if spec.mode == "merge":
            assert output.merge is not None
            return state.table.commit_merge(
                output.merge,
                record_key=spec.record_key,
                ordering_field=spec.ordering_field,
                partition_by=spec.partition_by,
                expected=state.stored,
                end=batch.end,
                deletes=spec.delete,
                summary=summary,
            )
        return state.table.commit_append(
            output.files,
            schema=output.schema,
            partition_by=spec.partition_by,
            expected=state.stored,
            end=batch.end,
            summary=summary,
        )
