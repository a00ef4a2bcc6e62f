"""Record-level deletes of a merge target (`delete.field`, `delete.values`, `delete.field.keep`): which of
a batch's latest rows are deletes, and what its commit did with them.

The batch's latest row per record key (`files.latest_rows`, by today's order) decides: its marker value,
read as text (a boolean as `true`/`false`), among `values` makes it a delete; null or any other value is
an upsert. Both read paths hand their rows to the commit as Arrow tables, so this one rule serves both.

Pure pyarrow: no Spark, no storage.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

# The column the commit adds to a MERGE's source rows: true for a delete. Never written to the target.
FLAG = "__s3events_delete"


@dataclass(frozen=True, slots=True)
class DeleteRule:
    field: str
    values: tuple[str, ...]
    keep: bool = False  # write the marker column to the target (it decides either way)

    def marks(self, rows: pa.Table) -> pa.Array:
        """Per row, whether it is a delete (never null)."""
        if self.field not in rows.column_names:
            return pa.repeat(False, rows.num_rows)
        column = rows.column(self.field).combine_chunks()
        try:
            text = column if pa.types.is_string(column.type) else column.cast(pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a nested marker: no value of it matches
            return pa.repeat(False, rows.num_rows)
        return pc.fill_null(pc.is_in(text, value_set=pa.array(self.values, pa.string())), False)

    def may_hold_delete(self, schema: pa.Schema, keys: pa.Table) -> bool:
        """Whether a batch of `schema` may hold a delete, by its `keys` (the key columns of every row,
        the marker too when known there): a batch without the marker column holds none."""
        if self.field not in schema.names:
            return False
        if self.field not in keys.column_names:  # rows written without their markers at hand: maybe
            return True
        return bool(pc.any(self.marks(keys)).as_py())

    def flagged(self, rows: pa.Table) -> pa.Table:
        """`rows` with `FLAG` for a MERGE's source."""
        return rows.append_column(FLAG, self.marks(rows))

    def unstored(self) -> list[str]:
        """The columns a MERGE's source holds that the target does not take."""
        return [FLAG] if self.keep else [FLAG, self.field]

    def stored(self, schema: pa.Schema) -> pa.Schema:
        """The target's schema for a batch of `schema`: without the marker unless it is kept."""
        if self.keep or self.field not in schema.names:
            return schema
        return schema.remove(schema.get_field_index(self.field))


@dataclass(frozen=True, slots=True)
class DeleteCounts:
    """What a batch's commit did with its deletes."""

    applied: int = 0  # target rows a delete removed
    # deletes that removed nothing: the key was absent (or, with ordering.field, held with a newer value)
    noop: int = 0


NO_DELETES = DeleteCounts()


def counted(flagged: pa.Table, removed: int) -> DeleteCounts:
    """What a MERGE of `flagged` rows (`DeleteRule.flagged`) that removed `removed` target rows did with
    their deletes."""
    requested = int(pc.sum(flagged.column(FLAG)).as_py() or 0)
    return DeleteCounts(removed, max(0, requested - removed))
