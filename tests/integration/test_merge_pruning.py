"""A merge-mode commit reads only the target's data files the batch's keys can be in.

delta-rs's MERGE holds every scanned target row of a file it has not yet seen a change in until its
input ends (its merge barrier), so a batch whose keys touch few files would otherwise hold the rest of
the target in the driver's memory: memory growing with the target, not the batch. `commit_merge` bounds
the target's key columns to ranges of the batch's keys that leave out the files holding none of them
(`merge_scope.key_ranges`), so delta-rs skips those files (benchmarks/merge_scale.py measures it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from s3events.ingest.files.merge_input import MergeInput
from s3events.ingest.model import Checkpoint
from s3events.ingest.target_table import TargetTable

pytestmark = pytest.mark.integration

KEYS: dict[str, tuple[pa.DataType, Callable[[int], object]]] = {
    "integer": (pa.int64(), lambda i: i),
    "string": (pa.string(), lambda i: f"it's \\ key {i:04d}"),  # quote and backslash: literals round-trip
}


def _merged(table: TargetTable, rows: pa.Table, expected: Checkpoint | None, end: Checkpoint) -> int:
    return table.commit_merge(
        MergeInput.held(rows),
        record_key=("id",),
        ordering_field=None,
        partition_by=(),
        expected=expected,
        end=end,
    )


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_a_merge_never_opens_a_data_file_outside_its_keys_range(tmp_path: Path, kind: str) -> None:
    key_type, key = KEYS[kind]
    schema = pa.schema([("id", key_type), ("v", pa.string())])

    def merge(ids: range, value: str, expected: Checkpoint | None, end: Checkpoint) -> int:
        rows = pa.table({"id": [key(i) for i in ids], "v": [value] * len(ids)}, schema=schema)
        return _merged(table, rows, expected, end)

    path = tmp_path / "target"
    table = TargetTable(str(path), "s3events.ingest/t", storage_options={})
    merge(range(0, 100), "old", None, Checkpoint(0, 0))  # a data file of keys 0-99
    merge(range(100, 200), "old", Checkpoint(0, 0), Checkpoint(1, 0))  # and one of keys 100-199
    [first] = [u for u in DeltaTable(str(path)).file_uris() if _keys_in(u)[0] == key(0)]
    Path(first.removeprefix("file://")).write_bytes(b"not parquet")  # opening it would fail the MERGE

    # Updates keys 150-199 and inserts 200-249: only the file of keys 100-199 can hold any of them.
    version = merge(range(150, 250), "new", Checkpoint(1, 0), Checkpoint(2, 0))

    assert table.checkpoint() == Checkpoint(2, 0)
    changed = pa.table(DeltaTable(str(path)).load_cdf(starting_version=version).read_all()).to_pylist()
    assert sorted(
        (r["id"], r["_change_type"]) for r in changed if r["_change_type"] != "update_preimage"
    ) == [
        *[(key(i), "update_postimage") for i in range(150, 200)],
        *[(key(i), "insert") for i in range(200, 250)],
    ]


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_a_merge_of_old_and_new_keys_never_opens_the_files_between_them(tmp_path: Path, kind: str) -> None:
    key_type, key = KEYS[kind]
    schema = pa.schema([("id", key_type), ("v", pa.string())])
    path = tmp_path / "target"
    table = TargetTable(str(path), "s3events.ingest/t", storage_options={})

    def merge(ids: list[int], value: str, expected: Checkpoint | None, end: Checkpoint) -> int:
        rows = pa.table({"id": [key(i) for i in ids], "v": [value] * len(ids)}, schema=schema)
        return _merged(table, rows, expected, end)

    for n in range(3):  # data files of keys 0-99, 100-199 and 200-299
        merge(
            list(range(100 * n, 100 * n + 100)),
            "old",
            None if n == 0 else Checkpoint(n - 1, 0),
            Checkpoint(n, 0),
        )
    [middle] = [u for u in DeltaTable(str(path)).file_uris() if _keys_in(u)[0] == key(100)]
    Path(middle.removeprefix("file://")).write_bytes(b"not parquet")

    # Updates the oldest keys 0-9 and 290-299, inserts 300-309: the batch's range spans the middle file.
    version = merge([*range(10), *range(290, 310)], "new", Checkpoint(2, 0), Checkpoint(3, 0))

    assert table.checkpoint() == Checkpoint(3, 0)
    changed = pa.table(DeltaTable(str(path)).load_cdf(starting_version=version).read_all()).to_pylist()
    assert sorted(
        (r["id"], r["_change_type"]) for r in changed if r["_change_type"] != "update_preimage"
    ) == sorted(
        [
            *[(key(i), "update_postimage") for i in [*range(10), *range(290, 300)]],
            *[(key(i), "insert") for i in range(300, 310)],
        ]
    )


def _keys_in(uri: str) -> list[object]:
    return pq.read_table(uri.removeprefix("file://"), columns=["id"])["id"].to_pylist()
