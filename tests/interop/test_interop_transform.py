"""delta-spark reads a transformed target partitioned by a date the transform derives: the same rows as
delta-rs, and a filter on the derived partition reads only its partition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from s3events.ingest.service import run_ingest
from tests.integration.test_ingest import capture, jsonl, settings_for, target_conf
from tests.interop.delta_read import assert_same_rows, files_read

pytestmark = [pytest.mark.integration, pytest.mark.interop]


def test_delta_spark_reads_a_transformed_target_by_its_derived_partition(
    delta_spark: Any, make_stack: Any, s3: Any, tmp_path: Path
):
    stack = make_stack()
    days = ["2026-11-20", "2026-11-21", "2026-11-22"]
    for i, day in enumerate(days):
        rows = [{"id": i * 10 + n, "amount": f"{n}.5", "ts": f"{day}T0{n}:00:00Z"} for n in range(3)]
        s3.put_object(Bucket=stack.bucket, Key=f"in/{day}.json", Body=jsonl(rows))
    capture(stack)
    path = str(tmp_path / "orders")
    sql = "SELECT id, CAST(amount AS DECIMAL(18,2)) AS amount, to_date(CAST(ts AS TIMESTAMP)) AS dt FROM src"
    conf = target_conf("o", path, "json", transform__sql=sql, partition__by="dt")

    run_ingest(settings_for(stack, {"o": conf}), once=True, spark=delta_spark)

    rows = assert_same_rows(delta_spark, path)
    assert len(rows) == 9 and {str(r["dt"]) for r in rows} == set(days)
    assert files_read(delta_spark, path, "dt = DATE '2026-11-21'") == 1
    assert delta_spark.read.format("delta").load(path).where("dt = DATE '2026-11-21'").count() == 3
