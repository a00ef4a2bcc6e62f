"""Merge targets keyed or ordered by a nested value (a struct): the latest row per key is chosen by the
Arrow rule (`latest_rows`), which groups and orders nested values as Spark's window does, on every path:
Parquet (one path), JSON on the fast path, and JSON on the line path (`json.fast.path=false`). Two
batches: the first inserts, the second updates held keys, inserts a new one, and holds an update older
than the held row by the ordering field (ignored)."""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from s3events.ingest.service import build_ingest
from tests.conftest import read_table, write_metadata_version
from tests.integration.test_ingest import settings_for, target_conf

pytestmark = pytest.mark.integration

# (key, version, value): key a struct {region, n}, version a struct {major, minor}
Change = tuple[dict[str, Any], dict[str, Any] | None, str]

FIRST: list[Change] = [
    ({"region": "eu", "n": 1}, {"major": 1, "minor": 0}, "eu-1 v1"),
    ({"region": "us", "n": 1}, {"major": 1, "minor": 0}, "us-1 v1"),
    ({"region": "eu", "n": 2}, {"major": 1, "minor": 0}, "eu-2 v1"),
]
SECOND: list[Change] = [
    ({"region": "eu", "n": 1}, {"major": 1, "minor": 2}, "eu-1 v1.2"),
    ({"region": "eu", "n": 1}, {"major": 1, "minor": 1}, "eu-1 v1.1"),  # older than 1.2 in the batch
    ({"region": "us", "n": 1}, {"major": 2, "minor": None}, "us-1 v2"),  # a null field ranks lowest
    ({"region": "us", "n": 1}, None, "us-1 unversioned"),  # a null version loses to any version
    ({"region": "us", "n": 2}, {"major": 1, "minor": 0}, "us-2 v1"),
]
FINAL = [("eu", 1, "eu-1 v1.2"), ("eu", 2, "eu-2 v1"), ("us", 1, "us-1 v2"), ("us", 2, "us-2 v1")]

_KEY = pa.struct([("region", pa.string()), ("n", pa.int64())])
_VERSION = pa.struct([("major", pa.int64()), ("minor", pa.int64())])


def _parquet(changes: list[Change]) -> bytes:
    table = pa.table(
        {
            "k": pa.array([c[0] for c in changes], _KEY),
            "version": pa.array([c[1] for c in changes], _VERSION),
            "v": pa.array([c[2] for c in changes], pa.string()),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _json(changes: list[Change]) -> bytes:
    return "".join(json.dumps({"k": k, "version": ver, "v": v}) + "\n" for k, ver, v in changes).encode()


TARGETS = {  # name -> (format, file writer, extra keys)
    "parquet": ("parquet", _parquet, {}),
    "json": ("json", _json, {}),
    "lines": ("json", _json, {"json__fast__path": "false"}),
}


def test_a_merge_target_keyed_and_ordered_by_structs_keeps_the_latest_row_per_key_on_every_path(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    merge = {"mode": "merge", "record__key": "k", "ordering__field": "version"}
    targets = {
        name: target_conf(name, str(tmp_path / name), fmt, key__prefix=f"{name}/", **merge, **extra)
        for name, (fmt, _, extra) in TARGETS.items()
    }
    ingest = build_ingest(settings_for(stack, targets), spark=spark)

    for batch, changes in enumerate([FIRST, SECOND]):
        keys = []
        for name, (fmt, write, _) in TARGETS.items():
            key = f"{name}/{batch:02d}.{fmt}"
            s3.put_object(Bucket=stack.bucket, Key=key, Body=write(changes))
            keys.append(key)
        write_metadata_version(stack, keys, s3)
        reports = {b.target: b for b in ingest.run_once().batches}
        assert set(reports) == set(TARGETS), reports
        assert reports["lines"].fast_path_files == 0
        assert reports["parquet"].fast_path_files == reports["json"].fast_path_files == 1

    for name in TARGETS:
        rows = read_table(str(tmp_path / name))
        assert sorted((r["k"]["region"], r["k"]["n"], r["v"]) for r in rows) == FINAL, name
