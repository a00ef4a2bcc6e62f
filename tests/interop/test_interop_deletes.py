"""delta-spark reads a merge target after record deletes: the same rows as delta-rs, and its change feed
shows each applied delete as a `delete` change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from s3events.ingest.service import run_ingest
from tests.conftest import write_metadata_version
from tests.integration.test_ingest import jsonl, settings_for, target_conf
from tests.interop.delta_read import assert_same_rows

pytestmark = [pytest.mark.integration, pytest.mark.interop]


def test_delta_spark_reads_a_merge_target_after_deletes(
    delta_spark: Any, make_stack: Any, s3: Any, tmp_path: Path
):
    stack = make_stack()
    path = str(tmp_path / "customers")
    conf = target_conf(
        "c",
        path,
        "json",
        schema="id BIGINT, name STRING, _is_deleted BOOLEAN",
        mode="merge",
        record__key="id",
        delete__field="_is_deleted",
        delete__values="true",
    )
    settings = settings_for(stack, {"c": conf})
    batches = [
        [{"id": i, "name": f"n{i}"} for i in range(1, 7)],
        [
            {"id": 2, "_is_deleted": True},
            {"id": 4, "_is_deleted": True},
            {"id": 5, "name": "five", "_is_deleted": False},
        ],
    ]
    for b, rows in enumerate(batches):
        s3.put_object(Bucket=stack.bucket, Key=f"in/{b}.json", Body=jsonl(rows))
        write_metadata_version(stack, [f"in/{b}.json"], s3)
        run_ingest(settings, once=True, spark=delta_spark)

    rows = assert_same_rows(delta_spark, path)
    assert sorted((r["id"], r["name"]) for r in rows) == [(1, "n1"), (3, "n3"), (5, "five"), (6, "n6")]
    assert "_is_deleted" not in rows[0]
    changes = (
        delta_spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(path)
        .where("_change_type = 'delete'")
        .collect()
    )
    assert sorted(r["id"] for r in changes) == [2, 4]
