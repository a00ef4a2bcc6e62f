"""A target Delta table through delta-rs: checkpoint, schema, and the commits that carry data and
checkpoint together (its error table: `error_table`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.table import TableMerger

from s3events.errors import CheckpointError
from s3events.infra import delta, delta_stats
from s3events.infra.aws import StorageOptions, resolve
from s3events.infra.delta_commit import check_transactions, commit_files, stored_transactions
from s3events.infra.parquet_files import WrittenFile
from s3events.ingest.checkpoint import app_ids, from_transactions, to_transactions
from s3events.ingest.deletes import FLAG, DeleteRule, counted
from s3events.ingest.merge_scope import holds_none_of, key_ranges, sql_string
from s3events.ingest.model import Checkpoint, Deletion, FileRef
from s3events.ingest.notify.model import BatchSummary, cursor_id
from s3events.ingest.plan import ensure_forward
from s3events.ingest.ports import MergeRows

log = logging.getLogger(__name__)

TARGET_SCHEMA_VERSION = 1


class TargetTable:
    def __init__(self, path: str, app_id: str, *, storage_options: StorageOptions, kind: str = "target"):
        self.path = path
        self.app_id = app_id
        self._storage = storage_options  # resolved at every use: refreshed credentials are picked up
        # Kept across batches: a batch reads the checkpoint, the schema and the stored transactions and
        # commits, each on the table's latest version, which a kept handle reaches by reading only the
        # commits since its last use instead of the log from its checkpoint each time.
        self._handle = delta.TableHandle(path, self._storage_options, kind=kind)
        # The first version not yet announced (notifications on): rides in this table's next commit.
        self.announced: int | None = None

    @property
    def handle(self) -> delta.TableHandle:
        return self._handle

    def _storage_options(self) -> dict[str, str]:
        return resolve(self._storage)

    def checkpoint(self) -> Checkpoint | None:
        return from_transactions(self.app_id, stored_transactions(self._handle, app_ids(self.app_id)))

    def schema(self) -> pa.Schema | None:
        table = self._handle.latest()
        return None if table is None else pa.schema(table.schema())

    def commit_append(
        self,
        files: list[WrittenFile],
        *,
        schema: pa.Schema,
        partition_by: tuple[str, ...],
        expected: Checkpoint | None,
        end: Checkpoint,
        summary: BatchSummary | None = None,
    ) -> int:
        """Add the executors' files and move the checkpoint to `end`, in one commit, if the stored one is
        still `expected` (see `_guard`); `summary` (what notifications announce) goes in its commitInfo."""
        seen = self._guard(expected, end)
        return self._commit_files(
            files,
            schema=schema,
            partition_by=partition_by,
            end=end,
            seen=seen,
            configuration=delta.table_properties("target", TARGET_SCHEMA_VERSION),
            custom_metadata=self._commit_metadata(end, summary),
        )

    def commit_merge(
        self,
        batch: MergeRows,
        *,
        record_key: tuple[str, ...],
        ordering_field: str | None,
        partition_by: tuple[str, ...],
        expected: Checkpoint | None,
        end: Checkpoint,
        deletes: DeleteRule | None = None,
        summary: BatchSummary | None = None,
    ) -> int:
        """Upsert the batch's latest row per key (the later ordering value wins) with the checkpoint; a
        latest row that is a delete (`deletes`) removes the key's row instead, and the counts of what
        the deletes did are left in `batch.deletes`."""
        seen = self._guard(expected, end)
        properties = self._commit_properties(end, summary)
        schema = batch.schema if deletes is None else deletes.stored(batch.schema)
        table = self._handle.latest_or_create(
            schema, schema_version=TARGET_SCHEMA_VERSION, partition_by=list(partition_by)
        )
        check_transactions(table, self.path, seen, handle=self._handle)  # the snapshot the MERGE is based on
        files = pa.table(table.get_add_actions(flatten=True))
        # A delete must meet the held rows: a batch that may hold one is always merged.
        removing = deletes is not None and deletes.may_hold_delete(batch.schema, batch.keys)
        if not removing and holds_none_of(files, batch.keys, record_key):
            unstored = [] if deletes is None else deletes.unstored()
            return self._append_new_keys(
                table,
                batch,
                partition_by=partition_by,
                end=end,
                seen=seen,
                unstored=unstored,
                summary=summary,
            )
        rows = batch.take_rows()
        if deletes is not None:
            rows = deletes.flagged(rows)
        matching = [f"t.`{k}` = s.`{k}`" for k in record_key]
        predicate = " AND ".join([*matching, *key_ranges(files, batch.keys, record_key)])
        metrics = self._merge(table, rows, predicate, properties, _merge_clauses(ordering_field, deletes))
        if deletes is not None:
            batch.deletes = counted(rows, int(metrics.get("num_target_rows_deleted") or 0))
        if not any(metrics.get(f"num_target_rows_{change}") for change in ("inserted", "updated", "deleted")):
            # A MERGE that changes nothing makes no commit, so the checkpoint would not move: commit it alone.
            return self._commit_files(
                [], schema=pa.schema(table.schema()), partition_by=partition_by, end=end, seen=seen
            )
        return int(table.version())

    def _merge(
        self,
        table: DeltaTable,
        rows: pa.Table,
        predicate: str,
        properties: CommitProperties,
        clauses: Callable[[TableMerger], TableMerger],
    ) -> dict[str, Any]:
        """Run a MERGE of `rows` with its `clauses`; its metrics."""
        merger = table.merge(
            rows,
            predicate=predicate,
            source_alias="s",
            target_alias="t",
            merge_schema=True,
            writer_properties=delta_stats.writer_properties(table.schema(), rows.schema),
            commit_properties=properties,
            post_commithook_properties=delta.AFTER_COMMIT,
        )
        with delta.committing(self.path, kind="target"):
            return dict(clauses(merger).execute())

    def _append_new_keys(
        self,
        table: DeltaTable,
        batch: MergeRows,
        *,
        partition_by: tuple[str, ...],
        end: Checkpoint,
        seen: dict[str, int | None],
        unstored: Sequence[str] = (),
        summary: BatchSummary | None = None,
    ) -> int:
        """A merge batch none of whose keys the table holds: appended, as exactly the version after the
        snapshot just checked (a commit that lost that version fails: CommitConflict) with the
        checkpoint, without a MERGE's scan, join and change-data files. Rows the tasks wrote are
        committed as they are."""
        held_schema = pa.schema(table.schema())
        if batch.files and set(batch.schema.names) <= set(held_schema.names):
            return self._commit_files(
                batch.files,
                schema=held_schema,
                partition_by=partition_by,
                end=end,
                seen=seen,
                custom_metadata=self._commit_metadata(end, summary),
                based_on=table.version(),
            )
        rows = batch.take_rows()
        rows = rows.drop_columns([name for name in unstored if name in rows.column_names])
        with delta.committing(self.path, kind="target"):
            write_deltalake(
                table,
                rows,
                mode="append",
                schema_mode="merge",
                writer_properties=delta_stats.writer_properties(table.schema(), rows.schema),
                commit_properties=self._commit_properties(end, summary, max_commit_retries=0),
                post_commithook_properties=delta.AFTER_COMMIT,
            )
        return int(table.version())

    def commit_checkpoint(
        self, *, expected: Checkpoint | None, end: Checkpoint, summary: BatchSummary | None = None
    ) -> int | None:
        """Move the checkpoint alone (a batch whose every file was removed; with its `summary` when it
        deleted rows). None when there is no table yet: nothing was ever ingested, nothing to protect."""
        table = self._handle.latest()
        if table is None:
            return None
        seen = self._guard(expected, end)
        return self._commit_files(
            [],
            schema=pa.schema(table.schema()),
            partition_by=tuple(table.metadata().partition_columns),
            end=end,
            seen=seen,
            custom_metadata=None if summary is None else self._commit_metadata(end, summary),
        )

    def delete_rows(self, deletions: Sequence[Deletion]) -> int:
        """Delete, per object, the rows ingested from its events before `Deletion.before` (see
        `plan.mirror_step`). Idempotent, so it runs in its own commit ahead of the batch's data commit: a
        replay deletes nothing more. A delete that matches no row makes no commit."""
        table = self._handle.latest()
        if table is None or not deletions:
            return 0
        predicate = " OR ".join(
            f"(_source_file = {sql_string(d.uri)} AND _event_time < {sql_string(_iso(d.before))})"
            for d in deletions
        )
        metrics = table.delete(
            predicate,
            writer_properties=delta_stats.writer_properties(table.schema()),
            commit_properties=CommitProperties(custom_metadata={"s3events.writer": "ingest-removals"}),
            post_commithook_properties=delta.AFTER_COMMIT,
        )
        return int(metrics.get("num_deleted_rows", 0))

    def held_contents(self, files: Sequence[FileRef]) -> set[tuple[str, str | None]]:
        """The (uri, etag) pairs of `files` the target holds rows of. Scans only the two lineage columns of
        files whose statistics may hold those uris; meant for the rare re-uploaded objects."""
        table = self._handle.latest()
        if table is None or not files:
            return set()
        uris = sorted({f.uri for f in files})
        found = table.to_pyarrow_dataset().to_table(
            columns=["_source_file", "_source_etag"], filter=delta.text_field("_source_file").isin(uris)
        )
        lineage = found.to_pydict()
        held = set(zip(lineage["_source_file"], lineage["_source_etag"], strict=True))
        return {(f.uri, f.etag) for f in files if (f.uri, f.etag) in held}

    def _commit_files(
        self,
        files: Sequence[WrittenFile],
        *,
        schema: pa.Schema,
        partition_by: tuple[str, ...],
        end: Checkpoint,
        seen: dict[str, int | None],
        configuration: dict[str, str] | None = None,
        custom_metadata: dict[str, str] | None = None,
        based_on: int | None = None,
    ) -> int:
        """`commit_files` of `files` with the checkpoint `end`, if the stored one is still as `seen`."""
        return commit_files(
            self.path,
            files,
            schema=schema,
            partition_by=list(partition_by),
            storage_options=self._storage_options(),
            transactions=self._transactions(end),
            expected_transactions=seen,
            handle=self._handle,
            configuration=configuration,
            custom_metadata=custom_metadata,
            based_on=based_on,
        )

    def _guard(self, expected: Checkpoint | None, end: Checkpoint) -> dict[str, int | None]:
        """Refuse a checkpoint that would move backwards, or a commit whose stored checkpoint is no longer
        the `expected` one this process read (None: none stored) because another process moved it;
        returns the stored app transactions the commit must still find (checked in its snapshot).

        `expected` is what the target stores, not where the batch starts: a running ingest's batch may
        start past it, over metadata versions that routed nothing to the target (maintenance commits,
        other prefixes), which it does not record every time."""
        seen = stored_transactions(self._handle, app_ids(self.app_id))
        stored = from_transactions(self.app_id, seen)
        if stored is not None:
            ensure_forward(stored, end)
        if stored != expected:
            raise CheckpointError(
                f"{self.path}: the stored checkpoint moved to {_described(stored)} while this batch "
                f"expected {_described(expected)}: another ingest process is writing this target; "
                "batch abandoned"
            )
        return seen

    def _commit_properties(
        self, end: Checkpoint, summary: BatchSummary | None = None, *, max_commit_retries: int | None = None
    ) -> CommitProperties:
        return checkpoint_properties(
            self._transactions(end),
            self._commit_metadata(end, summary),
            max_commit_retries=max_commit_retries,
        )

    def _transactions(self, end: Checkpoint) -> dict[str, int]:
        """The checkpoint `end`, and the notification cursor while notifications are on."""
        stored = to_transactions(self.app_id, end)
        if self.announced is not None:
            stored[cursor_id(self.app_id)] = self.announced
        return stored

    @staticmethod
    def _commit_metadata(end: Checkpoint, summary: BatchSummary | None = None) -> dict[str, str]:
        announced = {} if summary is None else summary.to_metadata()
        return {
            "s3events.writer": "ingest",
            "s3events.checkpoint": f"{end.version}:{end.position}",
        } | announced


def _merge_clauses(
    ordering_field: str | None, deletes: DeleteRule | None
) -> Callable[[TableMerger], TableMerger]:
    """The MERGE's actions: a held row is updated by a newer (or equal) ordering value, or removed by
    such a delete; a new key is inserted unless its latest row is a delete (which is then a no-op)."""
    newer = f"s.`{ordering_field}` >= t.`{ordering_field}`" if ordering_field else None
    if deletes is None:
        return lambda merger: merger.when_matched_update_all(predicate=newer).when_not_matched_insert_all()
    flag, unstored = f"s.`{FLAG}`", deletes.unstored()

    def both(*conditions: str | None) -> str:
        return " AND ".join(c for c in conditions if c)

    return lambda merger: (
        merger.when_matched_delete(predicate=both(flag, newer))
        .when_matched_update_all(predicate=both(f"NOT {flag}", newer), except_cols=unstored)
        .when_not_matched_insert_all(predicate=f"NOT {flag}", except_cols=unstored)
    )


def checkpoint_properties(
    stored: dict[str, int], custom_metadata: dict[str, str], *, max_commit_retries: int | None = None
) -> CommitProperties:
    """Commit properties carrying app transactions (a checkpoint, `to_transactions`) and commitInfo."""
    transactions = [Transaction(app, version) for app, version in stored.items()]
    return CommitProperties(
        app_transactions=transactions, custom_metadata=custom_metadata, max_commit_retries=max_commit_retries
    )


def _described(checkpoint: Checkpoint | None) -> str:
    return "none" if checkpoint is None else f"version {checkpoint.version} position {checkpoint.position}"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
