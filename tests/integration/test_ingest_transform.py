"""Targets with a SQL transform, end to end on moto_server, local Spark and real delta-rs tables: the
rows written are the transform's, partitioned by a column it derives, with the lineage the service
carries; a file whose value fails the SQL lands as one error row while the others land; merge mode keys
on a column the transform computes; SQL Spark refuses stops ingest before anything is written, at
start-up or at the first batch; a killed run's scratch folder is removed by the next run."""

from __future__ import annotations

import os
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from s3events.errors import ConfigError
from s3events.ingest.service import build_ingest, run_ingest
from tests.conftest import read_table
from tests.integration.test_ingest import capture, jsonl, settings_for, target_conf

pytestmark = pytest.mark.integration

ORDERS = [
    {"id": 1, "amount": "10.50", "ts": "2026-11-20T10:00:00Z", "note": "a"},
    {"id": None, "amount": "1", "ts": "2026-11-20T11:00:00Z", "note": "no id: filtered"},
    {"id": 2, "amount": "7", "ts": "2026-11-21T09:30:00Z", "note": "b"},
]
CAST_AND_DERIVE = (
    "SELECT id, CAST(amount AS DECIMAL(18,2)) AS amount_d, to_date(CAST(ts AS TIMESTAMP)) AS dt "
    "FROM src WHERE id IS NOT NULL"
)


def test_a_transformed_target_holds_the_transform_s_rows_partitioned_by_a_derived_date(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path
):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="in/orders 1.json", Body=jsonl(ORDERS))
    s3.put_object(
        Bucket=stack.bucket,
        Key="in/orders 2.json",
        Body=jsonl([{"id": 3, "amount": "0.01", "ts": "2026-11-21T00:00:00Z"}]),
    )
    capture(stack)
    path = str(tmp_path / "orders")
    conf = target_conf("o", path, "json", transform__sql=CAST_AND_DERIVE, partition__by="dt")
    left = Path(path, "_s3events_staging", "src-0a1b", "part-0.parquet")  # a killed run's scratch rows
    left.parent.mkdir(parents=True)
    left.write_bytes(b"PAR1")
    os.utime(left, (time.time() - 3 * 86400,) * 2)

    cycle = build_ingest(settings_for(stack, {"o": conf}), spark=spark).run_once()

    assert [(b.rows, b.filtered) for b in cycle.batches] == [(3, 1)]  # the row without an id
    assert "filtered=1 " in cycle.batches[0].log_line()

    rows = sorted(read_table(path), key=lambda r: r["id"])
    assert [(r["id"], r["amount_d"], str(r["dt"])) for r in rows] == [
        (1, Decimal("10.50"), "2026-11-20"),
        (2, Decimal("7.00"), "2026-11-21"),
        (3, Decimal("0.01"), "2026-11-21"),
    ]
    assert [r["_source_line"] for r in rows] == [1, 3, 1]
    assert rows[0]["_source_file"] == f"s3://{stack.bucket}/in/orders 1.json"
    assert all(r["_ingested_at"] and r["_source_etag"] for r in rows)
    assert "note" not in rows[0]
    assert DeltaTable(path).metadata().partition_columns == ["dt"]
    # nothing of the scratch rows is left behind or committed, nor what a killed run had left
    assert not list(Path(path, "_s3events_staging").glob("src-*/**/*.parquet"))


def test_a_file_whose_value_fails_the_cast_is_one_error_row_and_the_rest_lands(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path
):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="in/good.json", Body=jsonl(ORDERS))
    bad = [{"id": 9, "amount": "twelve", "ts": "2026-11-22T00:00:00Z"}]
    s3.put_object(Bucket=stack.bucket, Key="in/bad.json", Body=jsonl(bad))
    capture(stack)
    path = str(tmp_path / "orders")
    conf = target_conf("o", path, "json", transform__sql=CAST_AND_DERIVE)
    settings = settings_for(stack, {"o": conf})

    totals = run_ingest(settings, once=True, spark=spark)

    assert not totals.failed
    assert sorted(r["id"] for r in read_table(path)) == [1, 2]
    errors = read_table(path + "_errors")
    assert [(e["_source_file"], e["_source_line"]) for e in errors] == [
        (f"s3://{stack.bucket}/in/bad.json", None)
    ]
    assert errors[0]["error"].startswith("transform: [CAST_INVALID_INPUT]")
    assert build_ingest(settings, spark=spark).run_once().idle  # the checkpoint moved past both files


def test_merge_mode_keys_on_a_column_the_transform_computes(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path
):
    stack = make_stack()
    s3.put_object(
        Bucket=stack.bucket, Key="in/a.json", Body=jsonl([{"sku": "A-1", "qty": 1}, {"sku": "b-2", "qty": 5}])
    )
    capture(stack)
    path = str(tmp_path / "stock")
    conf = target_conf(
        "s",
        path,
        "json",
        transform__sql="SELECT upper(sku) AS sku_key, qty FROM src",
        mode="merge",
        record__key="sku_key",
    )
    settings = settings_for(stack, {"s": conf})
    run_ingest(settings, once=True, spark=spark)
    s3.put_object(Bucket=stack.bucket, Key="in/b.json", Body=jsonl([{"sku": "a-1", "qty": 9}]))
    capture(stack)

    run_ingest(settings, once=True, spark=spark)

    assert sorted((r["sku_key"], r["qty"]) for r in read_table(path)) == [("A-1", 9), ("B-2", 5)]


def test_sql_spark_refuses_stops_ingest_at_start_up_naming_the_key(
    make_stack: Any, spark: Any, tmp_path: Path
):
    stack = make_stack()
    conf = target_conf(
        "o", str(tmp_path / "o"), "json", transform__sql="SELECT count(*) FROM src", schema="id BIGINT"
    )

    with pytest.raises(
        ConfigError, match=r"^s3events\.ingest\.target\.o\.transform\.sql: a transform must be row-wise"
    ):
        build_ingest(settings_for(stack, {"o": conf}), spark=spark)
    assert not Path(tmp_path / "o").exists()


def test_sql_that_does_not_analyse_against_the_first_batch_stops_ingest_naming_the_key(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path, capfd: Any
):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="in/a.json", Body=jsonl(ORDERS))
    capture(stack)
    path = tmp_path / "o"
    sql = "SELECT id, CAST(price AS DOUBLE) AS price FROM src"  # the files have no `price`
    settings = settings_for(stack, {"o": target_conf("o", str(path), "json", transform__sql=sql)})

    with pytest.raises(ConfigError) as refused:  # the CLI's exit 2, as for start-up checks
        run_ingest(settings, once=True, spark=spark)

    message = str(refused.value)
    assert message.startswith("s3events.ingest.target.o.transform.sql: [UNRESOLVED_COLUMN")
    assert "\n" not in message
    assert "at org.apache.spark" not in capfd.readouterr().err  # no JVM stack logged
    assert not (path / "_delta_log").exists()  # no commit, no checkpoint: the next run starts over
