"""Reading the metadata table as ingest's input, through delta-rs: its change data feed as FileRefs, and
its snapshot at one version for a bootstrapping target (`snapshot.MetadataSnapshot`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from s3events.errors import FatalError, TransientError
from s3events.infra import aws, delta
from s3events.infra.aws import StorageOptions, resolve
from s3events.infra.delta_errors import translate
from s3events.ingest.model import Checkpoint, FileRef, SnapshotRow
from s3events.ingest.snapshot import COLUMNS, MetadataSnapshot, plain_strings
from s3events.metadata.schema import METADATA_SCHEMA_VERSION


@dataclass(frozen=True, slots=True)
class ChangeRows:
    """What `MetadataFeed.changes_after` read (the `ports.Changes` of a metadata table)."""

    rows: list[FileRef]
    latest_version: int  # the metadata version read up to (inclusive)


_GONE = pa.array(["delete", "update_preimage"])
_CAME = pa.array(["insert", "update_postimage"])


def new_rows(changes: pa.Table) -> pa.Table:
    """The inserted and refreshed rows of a change feed read, less the rows a rewrite only moved.

    Capture and backfill never delete a row, and a refresh always moves its event time forward
    (`RECREATED`), so a row that one commit both removes and adds back, with the same event id and event
    time, was moved, not seen again: `s3events migrate` rewriting a table into identity buckets (a
    data-changing overwrite, then a MERGE moving rows a concurrent writer added meanwhile). Filtered in
    Arrow before anything becomes Python objects: such a commit holds the whole table twice."""
    changes = plain_strings(changes)
    kind = changes.column("_change_type")
    came = changes.filter(pc.is_in(kind, value_set=_CAME))
    gone = changes.filter(pc.is_in(kind, value_set=_GONE))
    if gone.num_rows == 0:
        return came
    return came.filter(pc.invert(pc.is_in(_row_key(came), value_set=_row_key(gone))))


def _row_key(rows: pa.Table) -> pa.Array:
    parts = [rows.column(name).cast(pa.string()) for name in ("_commit_version", "event_id", "event_time")]
    return pc.binary_join_element_wise(*parts, "\x00").combine_chunks()


class MetadataFeed:
    def __init__(
        self, path: str, *, storage_options: StorageOptions, aws_options: aws.AwsOptions | None = None
    ) -> None:
        self.path = path
        self._storage = storage_options
        self._aws = aws_options  # for has_version's HEAD request on S3 (without: a log listing)
        self._handle = delta.TableHandle(
            path, lambda: resolve(self._storage), kind="metadata", schema_version=METADATA_SCHEMA_VERSION
        )
        # The snapshot of the latest version, which `latest_version` has just loaded: not opened twice.
        self._snapshot = MetadataSnapshot(
            path, storage_options=lambda: resolve(self._storage), loaded=self._handle.loaded_at
        )

    def latest_version(self) -> int | None:
        table = self._handle.latest()  # an outage: a TransientError in one line
        return None if table is None else int(table.version())

    def changes_after(self, version: int, *, up_to: int) -> ChangeRows:
        """Inserted and refreshed rows of metadata versions (version, up_to], as FileRefs. A refreshed row
        (`update_postimage`) is an object created again (`MetadataTable`): `recreated`."""
        table = self._handle.latest()
        if table is None or up_to <= version:
            return ChangeRows([], max(up_to, version))
        try:
            reader = table.load_cdf(
                starting_version=version + 1,
                ending_version=up_to,
                columns=[*COLUMNS, "_change_type", "_commit_version"],
            )
            changes = pa.RecordBatchReader.from_stream(reader).read_all()
        except Exception as exc:  # delta-rs raises generic errors for vacuumed or missing versions
            translated = translate(exc, action="cannot read the metadata table's changes", path=self.path)
            if isinstance(translated, TransientError):  # an outage or throttling, not a missing version
                raise translated from exc
            raise FatalError(
                f"cannot read changes of the metadata table {self.path} after version {version}: {exc}. "
                "If the log of those versions was cleaned up or their files vacuumed, the target "
                "cannot follow the change feed from where it stands: rebuild it from the metadata "
                "table's snapshot (`s3events ingest --target NAME --rebuild --yes`, which replaces "
                'the target table and its error table; docs/runbook.md, "Resetting or replaying a '
                'target"), or skip the versions with --checkpoint at one that still exists'
            ) from exc
        changes = new_rows(changes)
        rows = [
            FileRef.from_row(
                r,
                commit_version=int(r["_commit_version"]),
                recreated=r["_change_type"] == "update_postimage",
            )
            for r in changes.to_pylist()
        ]
        return ChangeRows(rows, up_to)

    def snapshot_rows(
        self, start: Checkpoint, *, bucket: str | None, key_prefix: str
    ) -> Iterator[SnapshotRow]:
        """The rows of the snapshot a bootstrapping target stands in, from its position on (in bucket
        `bucket`, None: any, with keys under `key_prefix`), streamed: see `plan.plan_snapshot`."""
        return self._snapshot.rows(
            start.snapshot,
            file=start.snapshot_file,
            row=start.snapshot_row,
            bucket=bucket,
            key_prefix=key_prefix,
        )

    def has_version(self, version: int) -> bool:
        """Whether commit `version` exists: a HEAD of its log entry on S3 (a stat on a local table), much
        cheaper than listing the log as `latest_version` does. A Delta commit is one log entry written
        whole (S3: a conditional PUT; locally: moved into place), so it exists only once committed."""
        name = f"_delta_log/{version:020d}.json"
        if not self.path.startswith("s3://"):
            return os.path.exists(os.path.join(self.path, name))
        if self._aws is None:
            latest = self.latest_version()
            return latest is not None and latest >= version
        bucket, _, prefix = self.path[len("s3://") :].partition("/")
        client = aws.client(self._aws, "s3")
        try:
            client.head_object(Bucket=bucket, Key=f"{prefix.rstrip('/')}/{name}" if prefix else name)
        except client.exceptions.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise aws.classify(exc, action=f"checking for version {version} of {self.path}") from exc
        return True

    def check(self) -> None:
        """FatalError when the table exists but is not a metadata table this version understands."""
        self._handle.latest()
