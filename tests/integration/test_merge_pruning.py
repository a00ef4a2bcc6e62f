"""A merge-mode commit reads only the target's data files the batch's keys can be in.

delta-rs's MERGE holds every scanned target row of a file it has not yet seen a change in until its
input ends (its merge barrier), so a batch whose keys touch few files would otherwise hold the rest of
the target in the driver's memory: memory growing with the target, not the batch. `commit_merge` lets
delta-rs prune the target's files by the batch's key range first (benchmarks/merge_scale.py measures it).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from s3events.ingest.model import Checkpoint
from s3events.ingest.target_table import TargetTable

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _rows(ids: range, value: str) -> pa.Table:
    return pa.table({"id": list(ids), "v": [value] * len(ids)}, schema=SCHEMA)


def _merge(table: TargetTable, rows: pa.Table, expected: Checkpoint | None, end: Checkpoint) -> int:
    return table.commit_merge(
        rows, record_key=("id",), ordering_field=None, partition_by=(), expected=expected, end=end
    )


def test_a_merge_never_opens_a_data_file_outside_its_keys_range(tmp_path: Path) -> None:
    path = tmp_path / "target"
    table = TargetTable(str(path), "s3events.ingest/t", storage_options={})
    _merge(table, _rows(range(0, 100), "old"), None, Checkpoint(0, 0))  # data file of ids 0-99
    _merge(table, _rows(range(100, 200), "old"), Checkpoint(0, 0), Checkpoint(1, 0))  # ids 100-199
    [old_file] = [u for u in DeltaTable(str(path)).file_uris() if _ids_in(u) == (0, 99)]
    Path(old_file.removeprefix("file://")).write_bytes(b"not parquet")  # opening it would fail the MERGE

    # Updates ids 150-199 and inserts 200-249: only the file of ids 100-199 can hold any of them.
    version = _merge(table, _rows(range(150, 250), "new"), Checkpoint(1, 0), Checkpoint(2, 0))

    assert table.checkpoint() == Checkpoint(2, 0)
    changed = pa.table(DeltaTable(str(path)).load_cdf(starting_version=version).read_all()).to_pylist()
    assert sorted(
        (r["id"], r["_change_type"]) for r in changed if r["_change_type"] != "update_preimage"
    ) == [
        *[(i, "update_postimage") for i in range(150, 200)],
        *[(i, "insert") for i in range(200, 250)],
    ]


def _ids_in(uri: str) -> tuple[int, int]:
    import pyarrow.parquet as pq

    ids = pq.read_table(uri.removeprefix("file://"), columns=["id"])["id"]
    return ids[0].as_py(), ids[-1].as_py()
