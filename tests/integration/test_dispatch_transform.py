"""Which path reads a file never shows in a transformed target either: hypothesis's JSON-lines and CSV
batches (`test_dispatch.json_files` / `csv_files`: types drifting between lines, lines that do not
parse, headers that differ between files) go through a SQL transform (a projection deriving columns, a
filter) once with the fast path allowed (its parsed rows are `src` directly when it can read the whole
batch, else the normal paths' scratch rows; with a SQL every step of which Arrow evaluates, an append
batch the fast path reads whole takes the Arrow route) and once with the line path alone: the same
schema, rows, error rows and filtered count; and no view of the transform's session holds the batch's
rows after it. The fast side alternates between the driver's route (a batch of up to
`driver.read.max.bytes`: src held and its transformed rows written by the driver) and the executors'."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from s3events.infra import aws
from s3events.ingest.files.read_output import ReadOutput
from s3events.ingest.files.transform import Transform, TransformSpec
from s3events.ingest.files.transform_path import run_transformed
from s3events.ingest.model import Batch, Checkpoint
from tests.integration.test_dispatch import (
    _RUNS,
    _bucket,
    _errors,
    _put,
    _rows,
    _target,
    csv_files,
    json_files,
)

pytestmark = pytest.mark.integration

INGESTED_AT = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
KEY = "s3events.ingest.target.t.transform.sql"
# Only the lineage columns are in every batch: what the data columns are is hypothesis's to choose.
SQL = (
    "SELECT *, upper(_source_file) AS file_u, CAST(_source_line AS STRING) AS line_s "
    "FROM src WHERE _source_line % 3 <> 2"
)
# Every step evaluated in Arrow (`transform_arrow`): where the fast path reads an append batch whole, it
# runs in the tasks that parsed the files (the Arrow route); the line-path side runs it on Spark.
ARROW_SQL = (
    "SELECT *, CAST(_source_line AS STRING) AS line_s, CAST(_source_line * 10 AS DECIMAL(20,1)) AS line_d, "
    "to_date(_event_time) AS dt FROM src WHERE _source_line > 1 OR _source_line IS NULL"
)


def _transformed(
    spark: Any,
    batch: Batch,
    path: Path,
    options: aws.AwsOptions,
    fmt: str,
    *,
    fast: bool,
    in_driver: bool,
    sql: str = SQL,
) -> ReadOutput:
    extra = {"driver.read.max.bytes": str(1 << 40 if in_driver else 0)}
    transform = Transform(spark, TransformSpec(KEY, (sql,)))
    out = run_transformed(
        spark,
        batch,
        _target(fmt, path, fast=fast, extra=extra),
        transform,
        existing_schema=None,
        aws=options,
        ingested_at=INGESTED_AT,
    )
    # the batch's rows do not stay in the driver JVM's heap until the next batch: no view holds them
    assert not transform.session.catalog.tableExists("src")
    return out


def _both_paths(
    s3: Any, aws_options: aws.AwsOptions, spark: Any, tmp_path: Path, fmt: str, bodies: list[bytes]
) -> None:
    run = next(_RUNS)
    refs = _put(s3, _bucket(s3), f"transform/{run}", bodies, f".{fmt}")
    batch = Batch(refs, (), Checkpoint(-1), Checkpoint(0))
    fast_path, line_path = tmp_path / f"{run}-fast", tmp_path / f"{run}-line"

    sql = ARROW_SQL if run % 3 == 0 else SQL  # the fast side: the Arrow route, or Spark's (driver, executors)
    fast = _transformed(spark, batch, fast_path, aws_options, fmt, fast=True, in_driver=run % 2 == 1, sql=sql)
    if fast.fast_path_files == 0:  # the fast path declined every file: Spark's route over the line path
        return  # read the batch, as the line-only run would
    line = _transformed(spark, batch, line_path, aws_options, fmt, fast=False, in_driver=False, sql=sql)

    assert sorted(fast.schema, key=lambda f: f.name) == sorted(line.schema, key=lambda f: f.name)
    assert _rows(fast, fast_path) == _rows(line, line_path)
    assert _errors(fast) == _errors(line)
    assert (fast.failed_files, fast.filtered, fast.rows) == (line.failed_files, line.filtered, line.rows)


_SETTINGS = settings(  # derandomized, as test_dispatch's; fewer examples: each runs the transform twice
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@_SETTINGS
@given(bodies=json_files())
def test_json_files_give_the_same_transformed_rows_and_error_rows_on_either_path(
    s3: Any, aws_options: aws.AwsOptions, spark: Any, tmp_path: Path, bodies: list[bytes]
):
    _both_paths(s3, aws_options, spark, tmp_path, "json", bodies)


@settings(_SETTINGS, max_examples=3)  # a CSV batch costs the line path more jobs (a group per header)
@given(bodies=csv_files())
def test_csv_files_give_the_same_transformed_rows_and_error_rows_on_either_path(
    s3: Any, aws_options: aws.AwsOptions, spark: Any, tmp_path: Path, bodies: list[bytes]
):
    _both_paths(s3, aws_options, spark, tmp_path, "csv", bodies)


def _json_lines(first: int, rows: int) -> bytes:
    lines = [
        json.dumps(
            {
                "id": first + i,
                "amount": round((first + i) * 1.37, 2),
                "ts": f"2026-11-{1 + i % 28:02d}T05:0{i % 10}:00.123Z",
                "ok": i % 3 != 0,
                "note": "é日\U0001f600"[: i % 4],
            }
        )
        for i in range(rows)
    ]
    return "\n".join(lines).encode() + b"\n"


def _csv_lines(first: int, rows: int) -> bytes:
    body = ["id,amount,ok,note"]
    body += [f"{first + i},{(first + i) * 1.37:.2f},{str(i % 3 != 0).lower()},n{i}" for i in range(rows)]
    return "\n".join(body).encode() + b"\n"


BENCH_SQL = {  # benchmarks/ingest_throughput.py's --transform-sql: a cast, a derived date, a filter
    "json": "SELECT *, CAST(amount AS DECIMAL(18,2)) AS amount_d, to_date(ts) AS dt FROM src WHERE ok",
    "csv": (
        "SELECT *, CAST(amount AS DECIMAL(18,2)) AS amount_d, to_date(_event_time) AS dt FROM src WHERE ok"
    ),
}


@pytest.mark.parametrize(
    ("fmt", "in_driver"),
    [("json", True), ("json", False), ("csv", True)],
    ids=["json on the driver", "json in tasks", "csv on the driver"],
)
def test_a_batch_the_fast_path_reads_whole_takes_the_arrow_route_and_gives_spark_s_rows(
    s3: Any, aws_options: aws.AwsOptions, spark: Any, tmp_path: Path, caplog: Any, fmt: str, in_driver: bool
):
    caplog.set_level(logging.INFO, logger="s3events.ingest.files.transform_arrow_route")
    make = _json_lines if fmt == "json" else _csv_lines
    refs = _put(s3, _bucket(s3), f"arrow/{next(_RUNS)}", [make(0, 40), make(40, 25), make(65, 3)], f".{fmt}")
    batch = Batch(refs, (), Checkpoint(-1), Checkpoint(0))
    sql = BENCH_SQL[fmt]

    arrow = _transformed(
        spark, batch, tmp_path / "a", aws_options, fmt, fast=True, in_driver=in_driver, sql=sql
    )
    spark_route = _transformed(
        spark, batch, tmp_path / "s", aws_options, fmt, fast=False, in_driver=False, sql=sql
    )

    messages = [r.getMessage() for r in caplog.records]
    assert any("runs in Arrow" in m for m in messages) and not any("for this batch" in m for m in messages)
    assert list(arrow.schema) == list(spark_route.schema)
    assert _rows(arrow, tmp_path / "a") == _rows(spark_route, tmp_path / "s")
    assert (arrow.filtered, arrow.rows, _errors(arrow)) == (spark_route.filtered, spark_route.rows, [])
    assert arrow.filtered == 14 + 9 + 1  # ok is false on each file's lines 1, 4, 7, ...


def test_a_value_the_arrow_plan_cannot_take_sends_the_batch_to_spark_which_makes_the_file_an_error_row(
    s3: Any, aws_options: aws.AwsOptions, spark: Any, tmp_path: Path, caplog: Any
):
    caplog.set_level(logging.INFO, logger="s3events.ingest.files.transform_arrow_route")
    refs = _put(s3, _bucket(s3), f"arrow/{next(_RUNS)}", [_json_lines(0, 5), _json_lines(90000, 2)], ".json")
    batch = Batch(refs, (), Checkpoint(-1), Checkpoint(0))
    sql = "SELECT id, CAST(amount AS DECIMAL(5,2)) AS amount_d FROM src"  # 123300.00 does not fit

    out = _transformed(spark, batch, tmp_path, aws_options, "json", fast=True, in_driver=True, sql=sql)

    assert any("runs on Spark for this batch" in r.getMessage() for r in caplog.records)
    [error] = _errors(out)
    assert error["_source_file"] == refs[1].uri and error["error"].startswith("transform: ")
    assert [r["id"] for r in _rows(out, tmp_path)] == [0, 1, 2, 3, 4]
