"""Reading the metadata table's snapshot at one version (a bootstrapping target's input), in bounded
memory, through delta-rs (the version's data files) and pyarrow (their rows).

The snapshot of version V is fixed: its data files, sorted by path, and their rows in file order give the
same order on every run, so a position (file index, row index) means the same thing after a restart, with
no sort of the whole table. Rows are streamed a record batch at a time; row groups before a position are
skipped by their footers alone, so resuming costs no re-read of what was ingested. A filter on the route's
bucket and key prefix runs in Arrow before any row becomes a Python object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.fs import DeltaStorageHandler

from s3events.errors import FatalError, TransientError
from s3events.infra import delta
from s3events.infra.delta_errors import translate
from s3events.ingest.model import FileRef, SnapshotRow

COLUMNS = ["bucket", "key", "etag", "version_id", "size", "event_time", "event_id", "event_kind"]
BATCH_ROWS = 8192  # rows per record batch turned into Python objects at a time


class MetadataSnapshot:
    """The rows of the metadata table at `path` as of one version."""

    def __init__(
        self,
        path: str,
        *,
        storage_options: Callable[[], dict[str, str]],
        loaded: Callable[[int], DeltaTable | None] = lambda version: None,
    ) -> None:
        self.path = path
        self._storage = storage_options
        self._loaded = loaded  # the table at a version, when the caller has it open already
        # The files of the last version opened, sorted by path, and the table's schema (one version per
        # bootstrap); dropped after a failed read, so the next batch opens the table again (with
        # credentials renewed meanwhile).
        self._open: tuple[int, pa.Schema, list[ds.Fragment]] | None = None

    def rows(
        self, version: int, *, file: int = 0, row: int = 0, bucket: str | None = None, key_prefix: str = ""
    ) -> Iterator[SnapshotRow]:
        """The snapshot's rows from data file `file` (sorted by path), row `row` on, in that order; only
        those in `bucket` (None: any) whose key starts with `key_prefix`."""
        schema, fragments = self._fragments(version)
        try:
            for index in range(file, len(fragments)):
                yield from _file_rows(
                    fragments[index],
                    version,
                    schema=schema,
                    index=index,
                    skip=row if index == file else 0,
                    keep=lambda rows: _wanted(rows, bucket, key_prefix),
                )
        except Exception:
            self._open = None
            raise

    def _fragments(self, version: int) -> tuple[pa.Schema, list[ds.Fragment]]:
        if self._open is None or self._open[0] != version:
            options = self._storage() if delta.is_s3(self.path) else None
            table = self._loaded(version) or self._table_at(version, options)
            self._open = (version, pa.schema(table.schema().to_arrow()), _data_files(table, options))
        return self._open[1], self._open[2]

    def _table_at(self, version: int, options: dict[str, str] | None) -> DeltaTable:
        try:
            return DeltaTable(self.path, version=version, storage_options=options)
        except Exception as exc:
            translated = translate(exc, action="cannot open the metadata table's snapshot", path=self.path)
            if isinstance(translated, TransientError):
                raise translated from exc
            raise FatalError(
                f"cannot read the snapshot of the metadata table {self.path} at version {version}, where "
                f"this target's bootstrap stands: {exc}. Its log was cleaned up while the bootstrap ran: "
                "rebuild the target (s3events ingest --target NAME --rebuild --yes)"
            ) from exc


def _data_files(table: DeltaTable, options: dict[str, str] | None) -> list[ds.Fragment]:
    """The table's data files as Parquet fragments, sorted by path, read through delta-rs' file system as
    `to_pyarrow_dataset` reads them, less its partition expression per file (no partition column is
    read), which costs a bootstrap batch more (docs/architecture.md, "Reading a table's state")."""
    actions = pa.table(table.get_add_actions(flatten=False))
    paths = actions.column("path").to_pylist()
    sizes = dict(zip(paths, actions.column("size_bytes").to_pylist(), strict=True))  # no HEAD per file
    filesystem = pafs.PyFileSystem(DeltaStorageHandler(table.table_uri, options, sizes))
    parquet = ds.ParquetFileFormat(
        default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=True)
    )
    return sorted((parquet.make_fragment(p, filesystem=filesystem) for p in paths), key=lambda f: f.path)


def _file_rows(
    fragment: Any,
    version: int,
    *,
    schema: pa.Schema,
    index: int,
    skip: int,
    keep: Callable[[pa.Table], pa.Array],
) -> Iterator[SnapshotRow]:
    """One data file's rows from row `skip` on, a record batch at a time; row groups wholly before it are
    passed over by their metadata. Read with the table's `schema`: a file written before a column was
    added gives nulls for it."""
    offset = 0
    for group in fragment.split_by_row_group():
        rows_in_group = sum(info.num_rows for info in group.row_groups)  # (`metadata`: the whole file's)
        if offset + rows_in_group <= skip:
            offset += rows_in_group
            continue
        for batch in group.to_batches(schema=schema, columns=COLUMNS, batch_size=BATCH_ROWS):
            table = plain_strings(pa.Table.from_batches([batch]))
            numbers = pa.array(np.arange(offset, offset + table.num_rows, dtype=np.int64))
            offset += table.num_rows
            table = table.append_column("_row", numbers)
            table = table.filter(pc.and_(pc.greater_equal(numbers, skip), keep(table)))
            for r in table.to_pylist():
                yield SnapshotRow(FileRef.from_row(r, commit_version=version), index, r["_row"])


def _wanted(rows: pa.Table, bucket: str | None, key_prefix: str) -> pa.Array:
    keys = rows.column("key").cast(pa.string())
    wanted = pc.starts_with(keys, key_prefix) if key_prefix else pc.is_valid(keys)
    if bucket is not None:
        wanted = pc.and_(wanted, pc.equal(rows.column("bucket").cast(pa.string()), bucket))
    return wanted.combine_chunks() if isinstance(wanted, pa.ChunkedArray) else wanted


def plain_strings(rows: pa.Table) -> pa.Table:
    """string_view columns (delta-rs writes its rewritten files so) as strings: Arrow's filter needs them."""
    schema = pa.schema([f.with_type(pa.string()) if f.type == pa.string_view() else f for f in rows.schema])
    return rows.cast(schema)
