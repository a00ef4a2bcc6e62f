"""Record-level deletes in a merge target's commit (real delta-rs tables): a batch's latest row that is a
delete removes its key's row, one older than the held row by `ordering.field` is ignored, one of an
absent key is a counted no-op; a batch holding a delete is always merged, never appended."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from s3events.ingest.deletes import DeleteCounts, DeleteRule
from s3events.ingest.files.merge_input import MergeInput
from s3events.ingest.model import Checkpoint
from s3events.ingest.target_table import TargetTable

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("seq", pa.int64()), ("Op", pa.string())])
DMS = DeleteRule("Op", ("D",))


class Target:
    def __init__(self, path: Path, rule: DeleteRule, *, ordering_field: str | None = None) -> None:
        self.path = str(path)
        self.table = TargetTable(self.path, "s3events.ingest/t", storage_options={})
        self.rule = rule
        self.ordering_field = ordering_field
        self.end: Checkpoint | None = None

    def merge(self, rows: list[tuple[int, str, int, str | None]]) -> tuple[str, DeleteCounts]:
        """Commit one batch (its latest rows: one per key); the operation it made and its delete counts."""
        expected = self.end
        self.end = Checkpoint(0 if expected is None else expected.version + 1, 0)
        batch = MergeInput.held(pa.table(list(zip(*rows, strict=True)), schema=SCHEMA))
        self.table.commit_merge(
            batch,
            record_key=("id",),
            ordering_field=self.ordering_field,
            partition_by=(),
            expected=expected,
            end=self.end,
            deletes=self.rule,
        )
        assert self.table.checkpoint() == self.end  # every batch moves the checkpoint, deletes or not
        return str(DeltaTable(self.path).history(1)[0]["operation"]), batch.deletes

    def rows(self) -> list[tuple[object, ...]]:
        table = DeltaTable(self.path).to_pyarrow_table()
        names = [n for n in SCHEMA.names if n in table.column_names]
        return sorted(zip(*(table.column(n).to_pylist() for n in names), strict=True))


def test_a_delete_removes_a_held_key_and_one_of_an_absent_key_is_a_counted_noop(tmp_path):
    target = Target(tmp_path / "t", DMS)
    target.merge([(1, "a", 1, "I"), (2, "b", 1, "I"), (3, "c", 1, None)])

    operation, counts = target.merge([(2, "b", 2, "D"), (9, "z", 2, "D"), (3, "C", 2, "U")])

    assert operation == "MERGE"
    assert counts == DeleteCounts(applied=1, noop=1)
    assert target.rows() == [(1, "a", 1), (3, "C", 2)]  # Op decided, but is not stored
    assert "Op" not in DeltaTable(target.path).schema().to_arrow().names


def test_a_delete_older_than_the_held_row_by_the_ordering_field_is_ignored(tmp_path):
    target = Target(tmp_path / "t", DMS, ordering_field="seq")
    target.merge([(1, "a", 5, "I"), (2, "b", 5, "I")])

    _, counts = target.merge([(1, "a", 4, "D"), (2, "b", 5, "D")])  # 1: older; 2: as new as the held row

    assert counts == DeleteCounts(applied=1, noop=1)
    assert target.rows() == [(1, "a", 5)]


def test_a_batch_of_new_keys_holding_a_delete_is_merged_and_inserts_only_its_upserts(tmp_path):
    target = Target(tmp_path / "t", DMS)
    target.merge([(1, "a", 1, "I")])

    operation, counts = target.merge([(5, "e", 1, "I"), (6, "f", 1, "D")])  # ids above every held one

    assert operation == "MERGE"
    assert counts == DeleteCounts(applied=0, noop=1)
    assert target.rows() == [(1, "a", 1), (5, "e", 1)]


def test_a_batch_of_new_keys_without_a_delete_is_still_appended_without_the_marker(tmp_path):
    target = Target(tmp_path / "t", DMS)

    first, _ = target.merge([(1, "a", 1, "I")])
    above, _ = target.merge([(5, "e", 1, None)])

    assert (first, above) == ("WRITE", "WRITE")
    assert target.rows() == [(1, "a", 1), (5, "e", 1)]
    assert "Op" not in DeltaTable(target.path).schema().to_arrow().names


def test_a_first_batch_of_only_deletes_creates_the_table_empty_and_moves_the_checkpoint(tmp_path):
    target = Target(tmp_path / "t", DMS)

    _, counts = target.merge([(1, "a", 1, "D"), (2, "b", 1, "D")])

    assert counts == DeleteCounts(applied=0, noop=2)
    assert target.rows() == []


def test_a_kept_marker_is_stored_and_a_boolean_flag_deletes(tmp_path):
    flagged = pa.schema([("id", pa.int64()), ("v", pa.string()), ("deleted", pa.bool_())])
    table = TargetTable(str(tmp_path / "t"), "s3events.ingest/t", storage_options={})
    rule = DeleteRule("deleted", ("true",), keep=True)

    def merge(rows: dict[str, list[object]], expected: Checkpoint | None, end: Checkpoint) -> DeleteCounts:
        batch = MergeInput.held(pa.table(rows, schema=flagged))
        table.commit_merge(
            batch,
            record_key=("id",),
            ordering_field=None,
            partition_by=(),
            expected=expected,
            end=end,
            deletes=rule,
        )
        return batch.deletes

    merge({"id": [1, 2], "v": ["a", "b"], "deleted": [False, None]}, None, Checkpoint(0, 0))
    counts = merge(
        {"id": [1, 2], "v": ["a", "B"], "deleted": [True, False]}, Checkpoint(0, 0), Checkpoint(1, 0)
    )

    assert counts == DeleteCounts(applied=1, noop=0)
    assert DeltaTable(table.path).to_pyarrow_table().to_pylist() == [{"id": 2, "v": "B", "deleted": False}]


def test_a_key_deleted_then_sent_again_is_inserted_again(tmp_path):
    target = Target(tmp_path / "t", DMS, ordering_field="seq")
    target.merge([(1, "a", 1, "I")])
    target.merge([(1, "a", 2, "D")])

    _, counts = target.merge([(1, "again", 3, "I")])

    assert counts == DeleteCounts()
    assert target.rows() == [(1, "again", 3)]
