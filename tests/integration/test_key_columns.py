"""Columns from the object key on both paths: typed values from `key.pattern`'s named groups and Hive-style
folders, a record field that wins, and an object whose key fails as one error row and nothing else."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from s3events.config import load_settings
from s3events.ingest.files.dispatch import run_batch
from s3events.ingest.files.merge_input import conform
from s3events.ingest.model import Batch, Checkpoint, FileRef
from s3events.ingest.target import target_specs

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 27, 4, 0, tzinfo=UTC)
BUCKET = "key-columns"
CONF = {
    "key.pattern": r"^firehose/(?<year>\d{4})/(?<month>\d{2})/",
    "key.columns": "dt,region",
    "key.column.types": "year INT, month INT, dt DATE",
    "key.columns.required": "true",
}
OBJECTS = {
    "firehose/2026/11/dt=2026-11-27/region=s%C3%A3o%20paulo/a.json": [{"id": 1}, {"id": 2, "region": "eu"}],
    "firehose/2026/12/dt=2026-12-01/region=us/b.json": [{"id": 3, "region": None}],
    "firehose/2026/11/dt=2026-11-31/region=us/bad date.json": [{"id": 4}, {"id": 5}],  # no such day
    "firehose/2026/11/region=us/no dt.json": [{"id": 6}],  # required: no dt folder
    "elsewhere/dt=2026-11-27/region=us/no match.json": [{"id": 7}],  # required: the pattern does not match
}


def _refs(s3: Any) -> tuple[FileRef, ...]:
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
        s3.create_bucket(Bucket=BUCKET)
    refs = []
    for i, (key, rows) in enumerate(OBJECTS.items()):
        body = "".join(json.dumps(r) + "\n" for r in rows).encode() + (b"not json\n" if i == 2 else b"")
        etag = s3.put_object(Bucket=BUCKET, Key=key, Body=body)["ETag"].strip('"')
        refs.append(FileRef(BUCKET, key, etag, None, len(body), NOW, f"e{i}", "created", 1))
    return tuple(refs)


def _read(spark: Any, s3: Any, aws_options: Any, path: Path, *, fast: bool) -> tuple[list[dict], list[dict]]:
    conf = [
        "s3events.ingest.targets=t",
        f"s3events.ingest.target.t.path={path}",
        "s3events.ingest.target.t.format=json",
        f"s3events.ingest.target.t.json.fast.path={str(fast).lower()}",
        *(f"s3events.ingest.target.t.{k}={v}" for k, v in CONF.items()),
    ]
    [spec] = target_specs(load_settings(None, conf))
    batch = Batch(_refs(s3), (), Checkpoint(-1), Checkpoint(0))
    out = run_batch(spark, batch, spec, existing_schema=None, aws=aws_options, ingested_at=NOW)
    tables = [conform(pq.read_table(path / f.path), out.schema) for f in out.files]
    rows = sorted(pa.concat_tables(tables).to_pylist(), key=lambda r: r["id"])
    assert out.schema.field("year").type == pa.int32() and out.schema.field("dt").type == pa.date32()
    errors = sorted(out.errors.to_pylist(), key=lambda e: (e["_source_file"], e["_source_line"] or -1))
    return rows, errors


def test_key_columns_are_typed_from_the_key_and_a_failing_key_is_one_error_row(
    spark, s3, aws_options, tmp_path
):
    results = {fast: _read(spark, s3, aws_options, tmp_path / str(fast), fast=fast) for fast in (True, False)}
    assert results[True] == results[False]
    rows, errors = results[True]
    got = [(r["id"], r["year"], r["month"], r["dt"], r["region"]) for r in rows]
    assert got == [
        (1, 2026, 11, date(2026, 11, 27), "sÃ£o paulo"),  # %XX undone code by code, as Spark does
        (2, 2026, 11, date(2026, 11, 27), "eu"),  # the record's field wins
        (3, 2026, 12, date(2026, 12, 1), "us"),  # a null field takes the key's value
    ]
    assert [(e["_source_file"].rsplit("/", 1)[1], e["_source_line"], e["error"]) for e in errors] == [
        (
            "no match.json",
            None,
            rf"key: key.pattern {CONF['key.pattern'].replace('(?<', '(?P<')} does not match the key",
        ),
        ("bad date.json", None, "key: key column dt: '2026-11-31' is not a date (yyyy-mm-dd)"),
        ("no dt.json", None, "key: the key has no dt=... folder (key.columns)"),
    ]
