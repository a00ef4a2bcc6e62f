"""What a backfill pass needs of the metadata table: the ids it knows, insert-if-absent commits, and the
time of the last completed pass (a Delta app transaction, `s3events.backfill` -> epoch seconds).

Built on the metadata table's own adapters (`MetadataTable`, `delta`, `delta_commit`): commits go through
the same insert-if-absent MERGE as capture's, so a capture committing the same object meanwhile is
harmless, and commit conflicts are retried on fresh table state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc

from s3events.backfill.diff import EMPTY_IDS
from s3events.backfill.model import APP_ID
from s3events.events.record import EventRecord
from s3events.infra import aws, delta, delta_commit
from s3events.metadata.schema import METADATA_PARTITION_BY, METADATA_SCHEMA, METADATA_SCHEMA_VERSION
from s3events.metadata.table import CommitResult, MetadataTable


class BackfillTable:
    def __init__(
        self,
        path: str,
        *,
        storage_options: aws.StorageOptions,
        commit_attempts: int = 10,
        dedupe_window: timedelta | None = None,
    ) -> None:
        self.path = path
        self._storage = storage_options
        self._attempts = commit_attempts
        # known_ids diffs against the whole table; the commit's MERGE then only guards against a
        # capture that committed the same objects meanwhile, which is recent by construction.
        self._metadata = MetadataTable(
            path,
            storage_options=storage_options,
            commit_attempts=commit_attempts,
            dedupe_window=dedupe_window,
            window_follows_events=False,
        )

    def known_ids(self, buckets: Sequence[str]) -> pa.Table:
        """The `event_id`s of objects in `buckets` the table knows as existing, with their event times.

        An object whose latest recorded event is a removal is not known: if the listing shows it, it was
        created again and its notification was lost, so the pass writes it (a re-creation, `RECREATED`).
        """
        table = delta.open_table(self.path, aws.resolve(self._storage))
        if table is None:
            return EMPTY_IDS
        delta.check_schema_version(table, path=self.path, kind="metadata", supported=METADATA_SCHEMA_VERSION)
        dataset = table.to_pyarrow_dataset()
        in_buckets = delta.text_field("bucket").isin(list(buckets))
        created = in_buckets & (delta.text_field("event_kind") == "created")
        removed = dataset.to_table(
            columns=["bucket", "key", "event_time"],
            filter=in_buckets & (delta.text_field("event_kind") == "removed"),
        )
        if removed.num_rows == 0:
            return dataset.to_table(columns=["event_id", "event_time"], filter=created)
        last_removed = removed.group_by(["bucket", "key"]).aggregate([("event_time", "max")])
        # Only created rows of removed keys need the comparison; the rest are known as they are.
        removed_keys = delta.text_field("key").isin(pc.unique(last_removed.column("key")).cast(pa.string()))
        plain = dataset.to_table(columns=["event_id", "event_time"], filter=created & ~removed_keys)
        candidates = dataset.to_table(
            columns=["event_id", "bucket", "key", "event_time"], filter=created & removed_keys
        ).join(last_removed, keys=["bucket", "key"], join_type="left outer")
        removal = candidates.column("event_time_max")
        alive = pc.or_kleene(pc.is_null(removal), pc.greater(candidates.column("event_time"), removal))
        return pa.concat_tables(
            [plain, candidates.filter(alive).select(["event_id", "event_time"])], promote_options="permissive"
        )

    def commit(self, records: Sequence[EventRecord], *, custom_metadata: Mapping[str, str]) -> CommitResult:
        """Insert the records the table does not hold (MERGE on event_id, conflicts retried)."""
        return self._metadata.commit(records, custom_metadata=custom_metadata)

    def last_completed(self) -> int | None:
        """Epoch seconds of the last completed pass; None when none was recorded (or no table yet)."""
        stored = delta_commit.transaction_versions(self.path, [APP_ID], aws.resolve(self._storage))
        return stored[APP_ID]

    def record_completion(self, epoch_seconds: int, *, custom_metadata: Mapping[str, str]) -> tuple[int, int]:
        """Commit the completion time as the app transaction, alone (no data). Never moves it backwards.
        Returns (recorded epoch seconds, table version)."""

        @delta.retry_conflicts(self._attempts)
        def attempt() -> tuple[int, int]:
            value = max(epoch_seconds, self.last_completed() or 0)
            # The table's own layout when it has one (a table of schema version 1 is unpartitioned).
            table = delta.open_table(self.path, aws.resolve(self._storage))
            schema = METADATA_SCHEMA if table is None else pa.schema(table.schema())
            partition_by = METADATA_PARTITION_BY if table is None else table.metadata().partition_columns
            version = delta_commit.commit_files(
                self.path,
                [],
                schema=schema,
                partition_by=partition_by,
                storage_options=aws.resolve(self._storage),
                transactions={APP_ID: value},
                configuration=delta.table_properties("metadata", METADATA_SCHEMA_VERSION),
                custom_metadata=custom_metadata,
            )
            return value, version

        return attempt()
