"""A merge-mode batch whose keys the target certainly does not hold (a first batch, ids above every held
one) is appended with its checkpoint instead of merged; any batch that may match a held key is merged
(real delta-rs tables)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from s3events.ingest.files.merge_input import MergeInput
from s3events.ingest.model import Checkpoint
from s3events.ingest.target_table import TargetTable

pytestmark = pytest.mark.integration


class Target:
    def __init__(self, path: Path, schema: pa.Schema, record_key: tuple[str, ...] = ("id",)) -> None:
        self.path = str(path)
        self.table = TargetTable(self.path, "s3events.ingest/t", storage_options={})
        self.schema = schema
        self.record_key = record_key
        self.end: Checkpoint | None = None

    def merge(self, rows: dict[str, list[object]]) -> str:
        """Commit one batch; the operation it made."""
        expected = self.end
        self.end = Checkpoint(0 if expected is None else expected.version + 1, 0)
        self.table.commit_merge(
            MergeInput.held(pa.table(rows, schema=self.schema)),
            record_key=self.record_key,
            ordering_field=None,
            partition_by=(),
            expected=expected,
            end=self.end,
        )
        return str(DeltaTable(self.path).history(1)[0]["operation"])

    def rows(self) -> list[tuple[object, ...]]:
        table = DeltaTable(self.path).to_pyarrow_table()
        return sorted(zip(*(table.column(n).to_pylist() for n in self.schema.names), strict=True))


INTS = pa.schema([("id", pa.int64()), ("v", pa.string())])


def test_batches_of_new_ids_above_the_held_ones_are_appended_and_one_that_may_update_is_merged(tmp_path):
    target = Target(tmp_path / "t", INTS)

    first = target.merge({"id": [1, 2, 3], "v": ["a"] * 3})
    above = target.merge({"id": [7, 8], "v": ["b"] * 2})
    overlapping = target.merge({"id": [2, 9], "v": ["c"] * 2})  # 2 is held: an update

    assert (first, above, overlapping) == ("WRITE", "WRITE", "MERGE")
    assert target.rows() == [(1, "a"), (2, "c"), (3, "a"), (7, "b"), (8, "b"), (9, "c")]
    assert target.table.checkpoint() == Checkpoint(2, 0)
    changes = pa.table(DeltaTable(target.path).load_cdf(starting_version=0).read_all())
    inserted = sorted(r["id"] for r in changes.to_pylist() if r["_change_type"] == "insert")
    assert inserted == [1, 2, 3, 7, 8, 9]


def test_ids_between_the_held_ones_are_merged_even_when_none_is_held(tmp_path):
    target = Target(tmp_path / "t", INTS)
    target.merge({"id": [1, 10], "v": ["a", "a"]})

    # 5 is not held, but a file's range 1..10 cannot show that: only the MERGE can
    assert target.merge({"id": [5], "v": ["b"]}) == "MERGE"
    assert target.rows() == [(1, "a"), (5, "b"), (10, "a")]


def test_string_keys_prove_nothing_by_statistics_and_are_merged(tmp_path):
    target = Target(tmp_path / "t", pa.schema([("id", pa.string()), ("v", pa.string())]))
    target.merge({"id": ["a"], "v": ["1"]})

    assert target.merge({"id": ["z"], "v": ["2"]}) == "MERGE"  # statistics may be truncated prefixes
    assert target.rows() == [("a", "1"), ("z", "2")]


def test_a_composite_key_is_appended_when_one_integer_part_misses_every_file(tmp_path):
    schema = pa.schema([("day", pa.int32()), ("name", pa.string()), ("v", pa.int64())])
    target = Target(tmp_path / "t", schema, record_key=("day", "name"))
    target.merge({"day": [1, 1], "name": ["x", "y"], "v": [1, 2]})

    assert target.merge({"day": [2], "name": ["x"], "v": [3]}) == "WRITE"
    assert target.merge({"day": [2], "name": ["x"], "v": [4]}) == "MERGE"
    assert target.rows() == [(1, "x", 1), (1, "y", 2), (2, "x", 4)]
