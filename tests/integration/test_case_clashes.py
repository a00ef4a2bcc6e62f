"""Field names that differ only in case (`name` and `Name`) never fail a batch: one spelling is kept (the
table's, else the one most lines of the batch hold), a JSON line holding another is an error row naming
both (or, with a rescued column, a row with that field rescued), a CSV or Parquet file holding one is one
error row; the same with the fast path allowed and with it off, and the target's later batches flow."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from s3events.ingest.files.dispatch import run_batch
from s3events.ingest.files.lineage import LINEAGE_FIELDS
from s3events.ingest.model import Batch, Checkpoint, FileRef
from s3events.ingest.service import build_ingest
from tests.conftest import read_table
from tests.integration.test_dispatch import INGESTED_AT, _bucket, _errors, _rows, _target
from tests.integration.test_ingest import capture, settings_for, target_conf

pytestmark = pytest.mark.integration

_LINEAGE = {f.name for f in LINEAGE_FIELDS} | {"_ingested_at"}
_TABLE = pa.schema([*LINEAGE_FIELDS, ("id", pa.int64()), ("name", pa.string())])
_RESCUE = {"rescued.column": "_rescued_data"}


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _read(
    s3: Any,
    aws_options: Any,
    spark: Any,
    root: Path,
    fmt: str,
    bodies: list[bytes],
    existing: pa.Schema | None = None,
    extra: dict[str, str] | None = None,
) -> tuple[list[str], list[dict[str, Any]], list[tuple[str, int | None, str]]]:
    """The batch read with the fast path allowed and with it off (which must agree): its data columns,
    rows without lineage, and error rows as (file, line, error)."""
    bucket, refs = _bucket(s3), []
    for i, body in enumerate(bodies):
        key = f"case/{root.parent.name}/{root.name}/f{i}.{fmt}"
        etag = s3.put_object(Bucket=bucket, Key=key, Body=body)["ETag"].strip('"')
        refs.append(FileRef(bucket, key, etag, None, len(body), INGESTED_AT, key, "created", 1))
    batch = Batch(tuple(refs), (), Checkpoint(-1), Checkpoint(0))
    seen = []
    for fast in (True, False):
        path = root / f"t-{fast}"
        target = _target(fmt, path, fast=fast, extra=extra)
        out = run_batch(
            spark, batch, target, existing_schema=existing, aws=aws_options, ingested_at=INGESTED_AT
        )
        columns = [n for n in out.schema.names if n not in _LINEAGE]
        rows = [{k: v for k, v in r.items() if k not in _LINEAGE} for r in _rows(out, path)]
        errors = [(e["_source_file"].rsplit("/", 1)[-1], e["_source_line"], e["error"]) for e in _errors(out)]
        seen.append((columns, rows, errors))
    assert seen[0] == seen[1]
    return seen[0]


def test_json_record_holding_name_and_Name_is_an_error_row_and_the_rest_lands(
    s3, aws_options, spark, tmp_path
):
    body = b'{"id": 1, "name": "a", "Name": "b"}\n{"id": 2, "name": "c"}\n'
    columns, rows, errors = _read(s3, aws_options, spark, tmp_path, "json", [body])
    assert columns == ["id", "name"]
    assert rows == [{"id": 2, "name": "c"}]
    assert errors == [("f0.json", 1, "field name differs only in case from a column: Name (column name)")]


def test_json_files_spelling_a_field_two_ways_keep_the_spelling_most_lines_hold(
    s3, aws_options, spark, tmp_path
):
    more = b'{"id": 1, "name": "a"}\n{"id": 2, "name": "b"}\n'
    fewer = b'{"id": 3, "Name": "c"}\n'
    columns, rows, errors = _read(s3, aws_options, spark, tmp_path, "json", [more, fewer])
    assert columns == ["id", "name"]  # never both: Delta readers refuse columns that differ only in case
    assert rows == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    assert errors == [("f1.json", 1, "field name differs only in case from a column: Name (column name)")]


def test_json_field_spelt_unlike_the_tables_column_is_an_error_row(s3, aws_options, spark, tmp_path):
    body = b'{"id": 2, "Name": "b"}\n{"id": 3, "name": "c"}\n'
    columns, rows, errors = _read(s3, aws_options, spark, tmp_path, "json", [body], _TABLE)
    assert columns == ["id", "name"]
    assert rows == [{"id": 3, "name": "c"}]
    assert errors == [("f0.json", 1, "field name differs only in case from a column: Name (column name)")]


def test_json_field_spelt_unlike_the_tables_column_is_rescued_with_a_rescued_column(
    s3, aws_options, spark, tmp_path
):
    table = pa.schema([*_TABLE, ("_rescued_data", pa.string())])
    body = b'{"id": 2, "Name": "b"}\n{"id": 3, "name": "c", "Name": "d"}\n{"id": 4, "name": "e"}\n'
    for mode in ("add", "rescue"):
        extra = {**_RESCUE, "schema.evolution": mode}
        columns, rows, errors = _read(s3, aws_options, spark, tmp_path / mode, "json", [body], table, extra)
        assert columns == ["id", "name", "_rescued_data"], mode
        assert [
            (r["id"], r["name"], r["_rescued_data"] and json.loads(r["_rescued_data"])) for r in rows
        ] == [
            (2, None, {"Name": "b"}),
            (3, "c", {"Name": "d"}),
            (4, "e", None),
        ], mode
        assert errors == [], mode


def test_csv_header_spelt_unlike_the_tables_column_is_one_error_row(s3, aws_options, spark, tmp_path):
    clashing, clean = b"id,Name\n1,b\n", b"id,name\n2,c\n"
    table = pa.schema([*LINEAGE_FIELDS, ("id", pa.int32()), ("name", pa.string())])
    columns, rows, errors = _read(s3, aws_options, spark, tmp_path, "csv", [clashing, clean], table)
    assert columns == ["id", "name"]
    assert rows == [{"id": 2, "name": "c"}]
    assert errors == [("f0.csv", None, "field name differs only in case from a column: Name (column name)")]


def test_parquet_file_spelling_a_column_unlike_the_table_or_twice_is_one_error_row(
    s3, aws_options, spark, tmp_path
):
    bodies = [
        _parquet(pa.table({"id": [1], "Name": ["b"]})),
        _parquet(pa.table({"id": [2], "name": ["c"], "NAME": ["d"]})),
        _parquet(pa.table({"id": [3], "name": ["e"]})),
    ]
    columns, rows, errors = _read(s3, aws_options, spark, tmp_path, "parquet", bodies, _TABLE)
    assert columns == ["id", "name"]
    assert rows == [{"id": 3, "name": "e"}]
    assert errors == [
        ("f0.parquet", None, "field name differs only in case from a column: Name (column name)"),
        ("f1.parquet", None, "column names differ only in case: NAME, name"),
    ]


def test_a_case_clash_never_stalls_the_target(make_stack, s3, spark, tmp_path):
    stack = make_stack()
    path = str(tmp_path / "t")
    settings = settings_for(stack, {"t": target_conf("t", path, "json")})
    s3.put_object(Bucket=stack.bucket, Key="a.json", Body=b'{"id": 1, "name": "a"}\n')
    capture(stack)
    assert not build_ingest(settings, spark=spark).run_once().failed
    s3.put_object(Bucket=stack.bucket, Key="b.json", Body=b'{"id": 2, "Name": "b", "name": "x"}\n{"id": 3}\n')
    capture(stack)
    assert not build_ingest(settings, spark=spark).run_once().failed
    s3.put_object(Bucket=stack.bucket, Key="c.json", Body=b'{"id": 4, "name": "d"}\n')
    capture(stack)
    assert not build_ingest(settings, spark=spark).run_once().failed

    names = DeltaTable(path).schema().to_arrow().names
    assert len({n.lower() for n in names}) == len(names)
    assert sorted((r["id"], r["name"]) for r in read_table(path)) == [(1, "a"), (3, None), (4, "d")]
    assert [(e["_source_line"], e["raw"]) for e in read_table(path + "_errors")] == [
        (1, '{"id": 2, "Name": "b", "name": "x"}')
    ]
