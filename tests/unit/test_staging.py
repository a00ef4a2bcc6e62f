"""Executors hand tables to the driver through the target's staging directory (merge mode's rows)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from s3events.infra.aws import AwsOptions
from s3events.infra.parquet_files import STAGING_DIR, stage_table, take_staged

LOCAL = AwsOptions(region="us-east-1")
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def staged_files(table: Path) -> set[str]:
    return {p.name for p in (table / STAGING_DIR).glob("*")}


def test_staged_tables_are_taken_whole_and_removed(tmp_path: Path) -> None:
    first = pa.table({"id": [1, 2], "v": ["a", "b"]})
    second = pa.table({"id": [3], "v": [None]}, schema=first.schema)
    paths = [stage_table(t, table_uri=str(tmp_path), options=LOCAL) for t in (first, second)]
    assert all(p.startswith(f"{STAGING_DIR}/") for p in paths) and len(staged_files(tmp_path)) == 2

    taken = take_staged(str(tmp_path), paths, LOCAL, now=NOW)

    assert [t.equals(expected) for t, expected in zip(taken, (first, second), strict=True)] == [True, True]
    assert staged_files(tmp_path) == set()


def test_taking_removes_files_a_day_old_left_by_retried_tasks_but_not_younger_ones(tmp_path: Path) -> None:
    table = pa.table({"id": [1]})
    old, recent, mine = (stage_table(table, table_uri=str(tmp_path), options=LOCAL) for _ in range(3))
    for path, age in ((old, timedelta(days=1, minutes=1)), (recent, timedelta(hours=23))):
        stamp = (NOW - age).timestamp()
        os.utime(tmp_path / path, (stamp, stamp))

    take_staged(str(tmp_path), [mine], LOCAL, now=NOW)

    assert staged_files(tmp_path) == {Path(recent).name}
