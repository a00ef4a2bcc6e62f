"""The narrow interfaces the ingest cycle needs, shaped like what implements them: the metadata change
feed (`feed.MetadataFeed`), a target and its error table (`target_table`), and step 2 on Spark
(`files.read.run_batch`). The cycle imports these, never the Delta or Spark libraries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from s3events.ingest.model import Batch, Checkpoint, Deletion, FileRef, SnapshotRow
from s3events.ingest.notify.model import BatchSummary
from s3events.ingest.target import TargetSpec

if TYPE_CHECKING:
    import pyarrow as pa

    from s3events.ingest.deletes import DeleteCounts, DeleteRule


class Changes(Protocol):
    @property
    def rows(self) -> list[FileRef]: ...
    @property
    def latest_version(self) -> int: ...


class Feed(Protocol):
    path: str

    def latest_version(self) -> int | None: ...
    def changes_after(self, version: int, *, up_to: int) -> Changes: ...
    def snapshot_rows(
        self, start: Checkpoint, *, bucket: str | None, key_prefix: str
    ) -> Iterable[SnapshotRow]:
        """The rows of the snapshot a bootstrapping target stands in, from its position on, streamed."""
        ...

    def has_version(self, version: int) -> bool:
        """Whether the table has a commit `version`: a cheap check, made often while ingest is idle."""
        ...


class MergeRows(Protocol):
    """A merge batch's latest row per record key (`files.merge_input.MergeInput`): the keys in memory,
    the rows held too or written as data files no commit names yet."""

    @property
    def schema(self) -> pa.Schema: ...
    @property
    def keys(self) -> pa.Table: ...
    @property
    def files(self) -> list[Any]: ...
    @property
    def num_rows(self) -> int: ...

    deletes: DeleteCounts  # set by the commit: what it did with the batch's deletes

    def take_rows(self) -> pa.Table:
        """The rows, read back if written; the files are then removed (never committed)."""
        ...


class ReadResult(Protocol):
    """What step 2 hands back: Parquet files the executors wrote (append) or rows to merge, error rows."""

    @property
    def schema(self) -> pa.Schema: ...
    @property
    def errors(self) -> pa.Table: ...
    @property
    def rows(self) -> int: ...
    @property
    def files(self) -> list[Any]: ...
    @property
    def merge(self) -> MergeRows | None: ...
    @property
    def failed_files(self) -> dict[str, str]: ...
    @property
    def fast_path_files(self) -> int: ...
    @property
    def filtered(self) -> int: ...
    @property
    def transform(self) -> str | None: ...  # the identity of the SQL that shaped the rows, if any
    @property
    def rescued(self) -> int: ...  # rows with data in the rescued column
    @property
    def ignored_fields(self) -> tuple[str, ...]: ...  # new fields schema.evolution=ignore dropped


class ReadBatch(Protocol):
    def __call__(
        self, batch: Batch, spec: TargetSpec, *, existing_schema: pa.Schema | None
    ) -> ReadResult: ...


class TargetStore(Protocol):
    def checkpoint(self) -> Checkpoint | None: ...
    def schema(self) -> pa.Schema | None: ...
    def delete_rows(self, deletions: Sequence[Deletion]) -> int: ...
    def held_contents(self, files: Sequence[FileRef]) -> set[tuple[str, str | None]]: ...
    def commit_checkpoint(
        self, *, expected: Checkpoint | None, end: Checkpoint, summary: BatchSummary | None = None
    ) -> int | None: ...
    def commit_append(
        self,
        files: list[Any],
        *,
        schema: pa.Schema,
        partition_by: tuple[str, ...],
        expected: Checkpoint | None,
        end: Checkpoint,
        summary: BatchSummary | None = None,
    ) -> int: ...
    def commit_merge(
        self,
        rows: MergeRows,
        *,
        record_key: tuple[str, ...],
        ordering_field: str | None,
        partition_by: tuple[str, ...],
        expected: Checkpoint | None,
        end: Checkpoint,
        deletes: DeleteRule | None = None,
        summary: BatchSummary | None = None,
    ) -> int: ...


class ErrorStore(Protocol):
    def origin(self) -> Checkpoint | None: ...
    def record_origin(self, start: Checkpoint, *, replacing: Checkpoint | None = None) -> Checkpoint: ...
    def record(self, errors: pa.Table, *, end: Checkpoint) -> int: ...
