"""Which path reads a file never shows in a transformed target either: hypothesis's JSON-lines and CSV
batches (`test_dispatch.json_files` / `csv_files`: types drifting between lines, lines that do not
parse, headers that differ between files) go through a SQL transform (a projection deriving columns, a
filter) once with the fast path allowed (its parsed rows are `src` directly when it can read the whole
batch, else the normal paths' scratch rows) and once with the line path alone: the same schema, rows,
error rows and filtered count; and no view of the transform's session holds the batch's rows after it.
The fast side alternates between the driver's route (a batch of up to
`driver.read.max.bytes`: src held and its transformed rows written by the driver) and the executors'."""

from __future__ import annotations

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


def _transformed(
    spark: Any, batch: Batch, path: Path, options: aws.AwsOptions, fmt: str, *, fast: bool, in_driver: bool
) -> ReadOutput:
    extra = {"driver.read.max.bytes": str(1 << 40 if in_driver else 0)}
    transform = Transform(spark, TransformSpec(KEY, (SQL,)))
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

    fast = _transformed(spark, batch, fast_path, aws_options, fmt, fast=True, in_driver=run % 2 == 1)
    line = _transformed(spark, batch, line_path, aws_options, fmt, fast=False, in_driver=False)

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
