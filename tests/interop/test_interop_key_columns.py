"""A target partitioned by columns from the object key (`key.pattern`'s groups typed by `key.column.types`,
plus a Hive-style `key.columns` DATE), read back by delta-spark: the same rows as delta-rs, partition
values of the declared types, and filters on them pruned to the matching partitions."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from deltalake import DeltaTable

from s3events.ingest.service import run_ingest
from tests.interop.delta_read import assert_same_rows, spark_read
from tests.interop.test_interop_pipeline import capture, jsonl, settings_for

pytestmark = [pytest.mark.integration, pytest.mark.interop]

TARGET = {
    "format": "json",
    "key.pattern": r"^events/(?P<year>\d{4})/(?P<month>\d{2})/",
    "key.columns": "dt",
    "key.column.types": "year INT, month INT, dt DATE",
    "partition.by": "year,month,dt",
}
OBJECTS = {
    "events/2026/11/dt=2026-11-27/a.json": [{"id": 1}, {"id": 2}],
    "events/2026/12/dt=2026-12-01/b.json": [{"id": 3}],
    "events/2027/01/dt=2027-01-02/c.json": [{"id": 4}, {"id": 5}],
}


def test_a_key_pattern_partitioned_target_reads_the_same_in_delta_spark_with_typed_partitions(
    delta_spark, spark, make_stack, s3, tmp_path: Path
):
    stack = make_stack()
    target = str(tmp_path / "t")
    for key, rows in OBJECTS.items():
        s3.put_object(Bucket=stack.bucket, Key=key, Body=jsonl(rows))
    capture(stack)
    run_ingest(settings_for(stack, {"t": {"path": target, **TARGET}}), once=True, spark=spark)

    assert DeltaTable(target).metadata().partition_columns == ["year", "month", "dt"]
    rows = assert_same_rows(delta_spark, target)
    assert sorted((r["id"], r["year"], r["month"], r["dt"]) for r in rows) == [
        (1, 2026, 11, date(2026, 11, 27)),
        (2, 2026, 11, date(2026, 11, 27)),
        (3, 2026, 12, date(2026, 12, 1)),
        (4, 2027, 1, date(2027, 1, 2)),
        (5, 2027, 1, date(2027, 1, 2)),
    ]
    df = spark_read(delta_spark, target)
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert (types["year"], types["month"], types["dt"]) == ("int", "int", "date")

    filtered = df.where("year = 2026 AND month >= 12 OR dt = DATE'2027-01-02'")
    assert sorted(r["id"] for r in filtered.collect()) == [3, 4, 5]
    # pruned: only the two matching partitions' files are read
    kept = [f for f in DeltaTable(target).file_uris() if "dt=2026-11-27" not in f]
    assert len(filtered.inputFiles()) == len(kept) == 2
    assert all("dt=2026-11-27" not in f for f in filtered.inputFiles())
