"""A merge batch's latest row per record key, as the target's commit takes it (`TargetTable.commit_merge`).

The rows are either held in memory (the line path's, or ones the driver reduced) or, from the fast path,
written by the tasks as data files of the target that no commit names yet, with only their record keys
in the driver. Most batches bring keys the target holds none of (new ids), and such a batch is
committed as those very files: the driver never holds its rows or writes them again. A batch that may
update held rows reads them back for a MERGE, and the files are removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from s3events.infra.aws import AwsOptions
from s3events.infra.parquet_files import WrittenFile, partition_column, read_data_files, remove_data_files
from s3events.ingest.deletes import NO_DELETES, DeleteCounts

# What Arrow raises when values do not take a type: a batch's files that disagree go to the line path.
TYPE_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)


@dataclass
class MergeInput:
    schema: pa.Schema  # the table schema after this batch
    keys: pa.Table  # the record key columns of every row, and delete.field's (the rows when held)
    files: list[WrittenFile] = field(default_factory=list)  # the rows as uncommitted data files
    deletes: DeleteCounts = NO_DELETES  # what the commit did with the batch's deletes (it sets them)
    _held: pa.Table | None = None
    _table_uri: str = ""
    _aws: AwsOptions | None = None

    @classmethod
    def held(cls, rows: pa.Table) -> MergeInput:
        return cls(rows.schema, rows, _held=rows)

    @classmethod
    def written(
        cls,
        files: list[WrittenFile],
        keys: pa.Table,
        *,
        schema: pa.Schema,
        table_uri: str,
        aws: AwsOptions,
    ) -> MergeInput:
        """Rows the tasks wrote as `files`, each record key in `keys` once (with its delete marker when
        the target has one)."""
        return cls(schema, keys, list(files), _table_uri=table_uri, _aws=aws)

    @property
    def num_rows(self) -> int:
        return int(self.keys.num_rows)

    def rows(self) -> pa.Table:
        """The rows: held, or read back from the files."""
        if self._held is None:
            assert self._aws is not None
            tables = read_data_files(self._table_uri, self.files, self._aws, schema=self.schema)
            self._held = concat_conformed(tables, self.schema)
        return self._held

    def take_rows(self) -> pa.Table:
        """The rows, for a commit that writes them itself: written files are read back and removed (a
        file is only ever committed as it is, by `files`, or not at all)."""
        rows = self.rows()
        if self.files:
            assert self._aws is not None
            remove_data_files(self._table_uri, self.files, self._aws)
            self.files = []
        return rows


def unreadable_partition(files: Sequence[WrittenFile], schema: pa.Schema) -> str | None:
    """Why a file's partition value would not read back as its column's type (`rows` reads it back),
    if one would not: checked before the batch relies on reading them back."""
    for values in {tuple(sorted(f.partition_values.items())) for f in files}:
        for name, value in values:
            kind = schema.field(name).type
            try:
                partition_column(value, kind, 1)
            except TYPE_ERRORS as exc:
                return f"partition column {name}: {value!r} does not read back as {kind}: {exc}"
    return None


def concat_conformed(tables: Sequence[pa.Table], schema: pa.Schema) -> pa.Table:
    """`tables` as one, in `schema` (an integer column of one and a double of another become double)."""
    if not tables:
        return schema.empty_table()
    return conform(pa.concat_tables(tables, promote_options="permissive"), schema)


def conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """`rows` with exactly the columns of `schema`, in its order and types (null where a row has none)."""
    columns = [
        rows.column(f.name).cast(f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)
