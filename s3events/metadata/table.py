"""The metadata Delta table (one row per object event) and its quarantine table, through delta-rs."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, QueryBuilder, write_deltalake
from deltalake.exceptions import DeltaError

from s3events.errors import TransientError
from s3events.events.record import EventRecord, QuarantineRecord, dedupe
from s3events.infra import aws, delta, delta_stats
from s3events.metadata.known_ids import KnownIds, prefixes
from s3events.metadata.schema import (
    ID_BUCKET,
    METADATA_SCHEMA,
    METADATA_SCHEMA_VERSION,
    QUARANTINE_SCHEMA,
    QUARANTINE_SCHEMA_VERSION,
    TIMESTAMP,
    metadata_batch,
    partitions,
    quarantine_batch,
)

log = logging.getLogger(__name__)

_CLOCK_SKEW = timedelta(days=1)  # S3's event clock against ours, generously


@dataclass(frozen=True, slots=True)
class CommitResult:
    written: int
    duplicates: int
    version: int | None  # the table version after this step (None: no table yet)
    recreated: int = 0  # of `written`: known objects seen again later (re-created after a removal)
    conflicts: int = 0  # commit conflicts with other writers, retried on fresh state before this result


class _IdentityTable:
    """A table written by MERGEs on one identity column that insert absent rows (and, with `refresh_when`,
    overwrite a matched row when that predicate on source `s` and target `t` holds), retried on conflicts.

    With `partition`, a column derived from the identity that new tables are partitioned by; the MERGE
    joins on it too when the table is (a table created before it existed is served unpartitioned)."""

    def __init__(
        self,
        path: str,
        *,
        kind: str,
        schema: pa.Schema,
        schema_version: int,
        identity: str,
        storage_options: aws.StorageOptions,
        commit_attempts: int,
        window: tuple[str, timedelta, str | None] | None = None,
        refresh_when: str | None = None,
        partition: str | None = None,
    ) -> None:
        self.path = path
        self._partition = partition
        self._refresh_when = refresh_when
        # (target timestamp column, age, source column extending it): the MERGE only reads rows this recent
        self._window = window
        self._kind = kind
        self._schema = schema
        self._schema_version = schema_version
        self._identity = identity
        self._storage = storage_options  # resolved at every open: refreshed credentials are picked up
        self._attempts = commit_attempts
        self._handle = delta.TableHandle(path, lambda: aws.resolve(self._storage), kind=kind)
        self._layout_checked = False

    def _fresh(self) -> Any:
        """The table at its latest version (a kept handle: `delta.TableHandle`), created on first use."""
        table = self._handle.latest_or_create(
            self._schema,
            schema_version=self._schema_version,
            partition_by=[self._partition] if self._partition else None,
        )
        if not self._layout_checked:
            self._layout_checked = True
            if self._partition and self._partition not in partitions(table):
                log.warning(
                    "the %s table %s has the unpartitioned layout of schema version 1: each commit's "
                    "duplicate check reads every row of the dedupe window; stop capture and backfill and "
                    "run `s3events migrate` to rewrite it into identity buckets",
                    self._kind,
                    self.path,
                )
        return table

    def _window_start(self, batch: pa.Table) -> datetime:
        """The oldest row the duplicate check reads: `age` ago, or, when `extend_to` names a source column,
        earlier still if the batch holds an older value there (less a day for clock skew): a row captured
        for that event cannot be older than the event itself."""
        assert self._window is not None
        _, age, extend_to = self._window
        since = datetime.now(UTC) - age
        if extend_to is not None:
            oldest = pc.min(batch.column(extend_to)).as_py()
            if oldest is not None:
                since = min(since, oldest.replace(tzinfo=UTC) - _CLOCK_SKEW)
        return since

    def version(self) -> int | None:
        table = self._handle.latest()
        return None if table is None else table.version()

    def row_count(self) -> int:
        table = self._handle.latest()
        return 0 if table is None else int(table.count())

    def insert_absent(self, batch: pa.Table, *, custom_metadata: Mapping[str, str]) -> CommitResult:
        """MERGE the (already unique) batch, inserting rows whose identity the table does not hold and
        refreshing matched rows that satisfy `refresh_when`."""

        attempts = 0

        @delta.retry_conflicts(self._attempts)
        def attempt() -> CommitResult:
            nonlocal attempts
            attempts += 1
            table = self._fresh()  # fresh state on every attempt
            predicate = f"t.{self._identity} = s.{self._identity}"
            # The layout is read on every attempt: `s3events migrate` may have bucketed the table meanwhile.
            if self._partition is not None and self._partition in partitions(table):
                predicate = f"t.{self._partition} = s.{self._partition} AND {predicate}"
            if self._window is not None:
                # A literal bound on a target column: delta-rs skips older files by their statistics.
                column, since = self._window[0], self._window_start(batch)
                predicate = f"t.{column} >= '{_literal(since)}' AND {predicate}"
            merger = table.merge(
                batch,
                predicate=predicate,
                source_alias="s",
                target_alias="t",
                writer_properties=delta_stats.writer_properties(table.schema()),
                commit_properties=CommitProperties(custom_metadata=dict(custom_metadata)),
                post_commithook_properties=delta.AFTER_COMMIT,
                streamed_exec=False,
            )
            # Explicit columns, the table's own: the source may carry helper columns the refresh predicate
            # reads, and the partition column an unpartitioned table of an older layout does not have.
            columns = {name: f"s.{name}" for name in pa.schema(table.schema()).names}
            if self._refresh_when is not None:
                merger = merger.when_matched_update(updates=columns, predicate=self._refresh_when)
            with delta.committing(self.path, kind="metadata"):
                metrics = merger.when_not_matched_insert(updates=columns).execute()
            inserted = int(metrics.get("num_target_rows_inserted", 0))
            recreated = int(metrics.get("num_target_rows_updated", 0))
            return CommitResult(
                written=inserted + recreated,
                duplicates=batch.num_rows - inserted - recreated,
                version=table.version(),
                recreated=recreated,
                conflicts=attempts - 1,
            )

        return attempt()


# A created event for an object the table already holds, but later than the held one: the object was
# created again (after a removal, or re-uploaded with the same bytes). The row takes the new event, so
# the change feed shows an update that ingest can act on; a redelivery (same event time) changes nothing.
# A backfilled row's time is the listing's LastModified, whole seconds (or a multipart upload's start),
# so the notification of that same upload, arriving after backfill wrote it, is not taken for a new one
# unless it is a second later (`_refresh_floor` = event time - 1 s; delta-rs predicates have no interval
# arithmetic).
RECREATED = (
    "s.event_kind = 'created' AND s.event_time > t.event_time "
    "AND (t.event_source <> 'backfill' OR s._refresh_floor >= t.event_time)"
)
_REFRESH_MARGIN = timedelta(seconds=1)


def _literal(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class MetadataTable(_IdentityTable):
    """One row per object event, deduplicated by event_id; change data feed on.

    A created event's identity is the object's content (bucket, key, version id or etag), so a later
    created event with the same identity is a re-creation: it refreshes the row (`RECREATED`) instead of
    adding one, and the change feed carries it as an `update_postimage`.

    The duplicate check covers rows captured within `dedupe_window` (None: the whole table), and for a
    batch holding older events (`window_follows_events`), every row captured since the oldest event
    time: SQS drops a message once it is older than the queue's retention (at most 14 days), but a DLQ
    redrive gives a message a new enqueue time, so a redriven message can come back 28 days after its
    event, and its events' rows must still be found. A multipart upload's second event follows within
    seconds, and backfill checks the whole table itself first (it passes False: its listed objects are
    old by nature and its commit only guards against a capture that committed them meanwhile).
    """

    def __init__(
        self,
        path: str,
        *,
        storage_options: aws.StorageOptions,
        commit_attempts: int = 10,
        dedupe_window: timedelta | None = None,
        window_follows_events: bool = True,
        known_ids: bool = False,
    ) -> None:
        extend_to = "event_time" if window_follows_events else None
        super().__init__(
            path,
            kind="metadata",
            schema=METADATA_SCHEMA,
            schema_version=METADATA_SCHEMA_VERSION,
            identity="event_id",
            storage_options=storage_options,
            commit_attempts=commit_attempts,
            window=None if dedupe_window is None else ("captured_at", dedupe_window, extend_to),
            refresh_when=RECREATED,
            partition=ID_BUCKET,
        )
        # With `known_ids` (capture: one long-lived writer), the ids the table holds are kept in memory, and
        # a batch of only new ids is appended instead of MERGEd (`_append_new`).
        self._keep_known = known_ids
        self._known: KnownIds | None = None

    def commit(self, records: Sequence[EventRecord], *, custom_metadata: Mapping[str, str]) -> CommitResult:
        unique, in_batch_duplicates = dedupe(list(records))
        if not unique:
            return CommitResult(written=0, duplicates=in_batch_duplicates, version=self.version())
        batch = metadata_batch(unique)
        result, conflicts = self._append_new(batch, custom_metadata) if self._keep_known else (None, 0)
        if result is None:
            floor = pc.subtract(batch.column("event_time"), pa.scalar(_REFRESH_MARGIN, pa.duration("us")))
            result = self.insert_absent(
                batch.append_column("_refresh_floor", floor.cast(TIMESTAMP)), custom_metadata=custom_metadata
            )
            # The MERGE committed the very next version: the table now holds every id of the batch. (A MERGE
            # that wrote nothing commits nothing: the next version may then be another writer's.)
            known = self._known
            if known is not None and result.written and result.version == known.version + 1:
                known.add(batch.column("event_id"), version=known.version + 1, now=datetime.now(UTC))
        return replace(
            result, duplicates=result.duplicates + in_batch_duplicates, conflicts=result.conflicts + conflicts
        )

    def _append_new(
        self, batch: pa.Table, custom_metadata: Mapping[str, str]
    ) -> tuple[CommitResult | None, int]:
        """Append the batch when the ids in memory say the table holds none of its ids, as exactly the
        version after the one they describe: `max_commit_retries=0` makes a commit that lost that version
        to another writer fail (CommitConflict: catch up and check again) instead of landing after rows
        the check never saw. None: the batch may hold a known id (a redelivery, a re-creation) or reaches
        back before the ids kept; the MERGE decides it. With the conflicts met on the way. An append writes
        data files only, and the change feed reads them as inserts."""
        attempts = 0

        @delta.retry_conflicts(self._attempts)
        def attempt() -> CommitResult | None:
            nonlocal attempts
            attempts += 1
            table = self._fresh()
            known = self._caught_up(table)
            since = None if self._window is None else self._window_start(batch)
            ids = batch.column("event_id")
            if not known.covers(since) or known.may_hold_any(ids):
                return None
            with delta.committing(self.path, kind="metadata"):
                write_deltalake(
                    table,
                    batch.select(pa.schema(table.schema()).names),
                    mode="append",
                    writer_properties=delta_stats.writer_properties(table.schema()),
                    commit_properties=CommitProperties(
                        custom_metadata=dict(custom_metadata), max_commit_retries=0
                    ),
                    post_commithook_properties=delta.AFTER_COMMIT,
                )
            known.add(ids, version=known.version + 1, now=datetime.now(UTC))
            return CommitResult(written=batch.num_rows, duplicates=0, version=known.version)

        result = attempt()
        return result, attempts - 1

    def _caught_up(self, table: Any) -> KnownIds:
        """The ids in memory, brought to the table's loaded version: the ids of other writers' commits since
        are read from the change feed (an append: its data files; a MERGE: its change files; compaction
        adds none). Read whole from the window's rows on first use, or when the feed cannot serve it."""
        version, now = table.version(), datetime.now(UTC)
        known = self._known
        if known is not None and known.version > version:
            known = None  # the table was replaced under us
        if known is not None and known.version < version:
            try:
                reader = table.load_cdf(
                    starting_version=known.version + 1, ending_version=version, columns=["event_id"]
                )
                known.add(
                    pa.RecordBatchReader.from_stream(reader).read_all().column(0), version=version, now=now
                )
            except (OSError, DeltaError, pa.ArrowException, ValueError) as exc:
                translated = delta.translate(
                    exc, action="cannot read the metadata table's changes", path=self.path
                )
                if isinstance(translated, TransientError):
                    raise translated from exc
                log.warning(
                    "re-reading the event ids of %s: its change feed did not serve them: %s", self.path, exc
                )
                known = None
        if known is None:
            known = self._read_known(table, now)
        elif self._window is not None:
            known.expire(now=now, window=self._window[1])
        self._known = known
        return known

    def _read_known(self, table: Any, now: datetime) -> KnownIds:
        """The ids of the rows captured within the window (all rows without one), streamed: memory follows
        the ids kept, 8 bytes each."""
        floor = None if self._window is None else now - self._window[1]
        where = "" if floor is None else f""" WHERE "captured_at" >= '{_literal(floor)}'"""
        started = time.monotonic()
        parts = []
        try:
            reader = QueryBuilder().register("t", table).execute(f'SELECT "event_id" FROM t{where}')
            for part in pa.RecordBatchReader.from_stream(reader):
                parts.append(prefixes(part.column(0)))
        except (OSError, DeltaError, pa.ArrowException) as exc:  # a failed read comes out of the stream
            raise delta.translate(exc, action="cannot read the metadata table", path=self.path) from exc
        known = KnownIds.loaded(parts, version=table.version(), floor=floor, skew=_CLOCK_SKEW, now=now)
        log.info(
            "read %d event ids of %s (version %d) in %.1f s: new events are appended while their ids are new",
            len(known),
            self.path,
            known.version,
            time.monotonic() - started,
        )
        return known


class QuarantineTable(_IdentityTable):
    """Poison messages, one row per message id (a redelivered poison message is not recorded twice)."""

    def __init__(self, path: str, *, storage_options: aws.StorageOptions, commit_attempts: int = 10) -> None:
        super().__init__(
            path,
            kind="quarantine",
            schema=QUARANTINE_SCHEMA,
            schema_version=QUARANTINE_SCHEMA_VERSION,
            identity="message_id",
            storage_options=storage_options,
            commit_attempts=commit_attempts,
        )

    def record(
        self, records: Sequence[QuarantineRecord], *, custom_metadata: Mapping[str, str]
    ) -> CommitResult:
        unique = list({q.message_id: q for q in records}.values())
        if not unique:
            return CommitResult(0, 0, None)
        return self.insert_absent(quarantine_batch(unique), custom_metadata=custom_metadata)
