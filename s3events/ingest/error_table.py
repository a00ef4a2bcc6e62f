"""A target's error table through delta-rs: bad lines and unreadable files, with a copy of the target's
checkpoint (replays skip what it already holds), and where a target without a checkpoint starts."""

from __future__ import annotations

import contextlib
import logging

import pyarrow as pa
from deltalake import write_deltalake

from s3events.errors import CheckpointError, CommitConflict
from s3events.infra import delta, delta_stats
from s3events.infra.aws import StorageOptions, resolve
from s3events.infra.delta_commit import check_transactions, commit_files, stored_transactions
from s3events.ingest.checkpoint import app_ids, from_transactions, origin_id, to_transactions
from s3events.ingest.model import Checkpoint
from s3events.ingest.target_table import checkpoint_properties

log = logging.getLogger(__name__)

ERRORS_SCHEMA_VERSION = 1
ERROR_SCHEMA = pa.schema(
    [
        pa.field("_source_file", pa.string()),
        pa.field("_source_etag", pa.string()),
        pa.field("_source_line", pa.int64()),  # null for a whole-file problem
        pa.field("raw", pa.string()),  # the line as read (null for a whole-file problem)
        pa.field("error", pa.string(), nullable=False),
        pa.field("_event_time", pa.timestamp("us", tz="UTC")),
        pa.field("_ingested_at", pa.timestamp("us", tz="UTC")),
    ]
)


class ErrorTable:
    """Bad lines and unreadable files of one target; written before the target commit of the same batch,
    and skipped on replay (its own copy of the checkpoint says the batch is already recorded)."""

    def __init__(self, path: str, app_id: str, *, storage_options: StorageOptions):
        self.path = path
        self.app_id = app_id
        self._storage = storage_options
        self._handle = delta.TableHandle(path, self._storage_options, kind="errors")

    def _storage_options(self) -> dict[str, str]:
        return resolve(self._storage)

    def origin(self) -> Checkpoint | None:
        """The starting point recorded for a target without a checkpoint, if any."""
        app = origin_id(self.app_id)
        version = stored_transactions(self._handle, [app])[app]
        return None if version is None else Checkpoint(version, 0)

    def record_origin(self, start: Checkpoint, *, replacing: Checkpoint | None = None) -> Checkpoint:
        """Record `start` as the target's starting point if the recorded one is still `replacing` (None:
        none recorded); returns the one that holds (another process may have recorded its own first)."""
        app = origin_id(self.app_id)
        self._handle.latest_or_create(ERROR_SCHEMA, schema_version=ERRORS_SCHEMA_VERSION)
        with contextlib.suppress(CommitConflict):  # someone recorded one meanwhile: theirs holds
            commit_files(
                self.path,
                [],
                schema=ERROR_SCHEMA,
                partition_by=[],
                storage_options=self._storage_options(),
                transactions={app: start.version},
                expected_transactions={app: None if replacing is None else replacing.version},
                custom_metadata={"s3events.writer": "ingest-origin"},
                handle=self._handle,
            )
        recorded = self.origin()
        if recorded is None:
            raise CheckpointError(f"{self.path}: the starting point {start} was not recorded")
        return recorded

    def record(self, errors: pa.Table, *, end: Checkpoint) -> int:
        if errors.num_rows == 0:
            return 0
        seen = stored_transactions(self._handle, app_ids(self.app_id))
        stored = from_transactions(self.app_id, seen)
        if stored is not None and stored >= end:
            log.info("error rows of this batch are already in %s (replay); not written again", self.path)
            return 0
        properties = checkpoint_properties(
            to_transactions(self.app_id, end), {"s3events.writer": "ingest-errors"}
        )
        table = self._handle.latest_or_create(errors.schema, schema_version=ERRORS_SCHEMA_VERSION)
        check_transactions(table, self.path, seen, handle=self._handle)
        write_deltalake(
            table,
            errors,
            mode="append",
            writer_properties=delta_stats.writer_properties(table.schema(), errors.schema),
            commit_properties=properties,
            post_commithook_properties=delta.AFTER_COMMIT,
        )
        return errors.num_rows
