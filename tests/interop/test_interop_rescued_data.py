"""A target under schema.evolution=rescue, read back by delta-spark: the same rows, and the rescued column
is JSON Spark's own functions take apart (what a downstream job does with Auto Loader's _rescued_data)."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from s3events.ingest.service import run_ingest
from tests.interop.delta_read import assert_same_rows, spark_read
from tests.interop.test_interop_pipeline import capture, jsonl, settings_for

pytestmark = [pytest.mark.integration, pytest.mark.interop]


def test_rescue_target_reads_the_same_and_its_rescued_json_parses_in_spark(
    delta_spark, spark, make_stack, s3, tmp_path: Path
):
    stack = make_stack()
    target = str(tmp_path / "t")
    settings = settings_for(stack, {"t": {"path": target, "format": "json", "schema.evolution": "rescue"}})
    s3.put_object(Bucket=stack.bucket, Key="a.json", Body=jsonl([{"id": 1, "amount": 1.5}]))
    capture(stack)
    run_ingest(settings, once=True, spark=spark)
    later = [{"id": 2, "amount": "n/a", "extra": {"k": [1, 2]}}, {"id": 3, "amount": 2.0}]
    s3.put_object(Bucket=stack.bucket, Key="b.json", Body=jsonl(later))
    capture(stack)
    run_ingest(settings, once=True, spark=spark)

    rows = assert_same_rows(delta_spark, target)
    assert sorted(r["id"] for r in rows) == [1, 2, 3]
    assert "extra" not in DeltaTable(target).schema().to_arrow().names
    rescued = (
        spark_read(delta_spark, target)
        .where("_rescued_data IS NOT NULL")
        .selectExpr(
            "id",
            "get_json_object(_rescued_data, '$.amount') AS amount",
            "get_json_object(_rescued_data, '$.extra.k[1]') AS k",
        )
        .collect()
    )
    assert [(r["id"], r["amount"], r["k"]) for r in rescued] == [(2, "n/a", "2")]
