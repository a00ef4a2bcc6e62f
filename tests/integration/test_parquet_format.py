"""Parquet has one path: every file ends as rows or one error row in the fast path's task, never on Spark's
reader. A batch whose files type a new column differently, or spell a name two ways, is read again with
the files' schemas unified in file order; an object over the in-memory limit is read with ranged GETs,
part by part; what Spark has no type for, or a value that does not cast, is the file's error row."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from s3events.infra import aws
from s3events.ingest.files import objects
from s3events.ingest.files.dispatch import run_batch
from s3events.ingest.files.formats import parquet_format
from s3events.ingest.files.lineage import LINEAGE_FIELDS
from s3events.ingest.files.read_output import ReadOutput
from s3events.ingest.model import Batch, Checkpoint, FileRef
from tests.integration.test_dispatch import INGESTED_AT, _bucket, _errors, _rows, _target

pytestmark = pytest.mark.integration

_TABLE = pa.schema([*LINEAGE_FIELDS, ("id", pa.int64()), ("_ingested_at", pa.timestamp("us", "UTC"))])


def _parquet(table: pa.Table, row_group_size: int | None = None) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size)
    return sink.getvalue()


def _read(
    s3: Any,
    aws_options: aws.AwsOptions,
    spark: Any,
    root: Path,
    bodies: dict[str, bytes],
    existing: pa.Schema | None = None,
    extra: dict[str, str] | None = None,
) -> tuple[ReadOutput, list[dict[str, Any]], list[tuple[str, int | None, str]]]:
    """One batch of `bodies` (key -> body) for a Parquet target (one path): its
    output, rows (by file and line), and error rows (file, line, error)."""
    bucket, refs = _bucket(s3), []
    for name, body in bodies.items():
        key = f"parquet/{root.name}/{name}"
        etag = s3.put_object(Bucket=bucket, Key=key, Body=body)["ETag"].strip('"')
        refs.append(FileRef(bucket, key, etag, None, len(body), INGESTED_AT, key, "created", 1))
    target = _target("parquet", root / "t", fast=False, extra=extra)
    batch = Batch(tuple(refs), (), Checkpoint(-1), Checkpoint(0))
    out = run_batch(spark, batch, target, existing_schema=existing, aws=aws_options, ingested_at=INGESTED_AT)
    errors = [(e["_source_file"].rsplit("/", 1)[-1], e["_source_line"], e["error"]) for e in _errors(out)]
    rows = out.merge.take_rows().to_pylist() if out.merge is not None else _rows(out, root / "t")
    return out, rows, errors


def _of(rows: list[dict[str, Any]], name: str, *columns: str) -> list[tuple[Any, ...]]:
    return [tuple(r[c] for c in columns) for r in rows if r["_source_file"].endswith(f"/{name}")]


def test_files_typing_a_new_column_differently_are_read_again_with_the_types_unified_in_file_order(
    s3, aws_options, spark, tmp_path
):
    out, rows, errors = _read(
        s3,
        aws_options,
        spark,
        tmp_path,
        {
            "a.parquet": _parquet(
                pa.table({"id": pa.array([1], pa.int64()), "n": pa.array([1], pa.int32())})
            ),
            "b.parquet": _parquet(
                pa.table({"id": pa.array([2], pa.int64()), "n": pa.array([7], pa.int64())})
            ),
            "c.parquet": _parquet(pa.table({"id": pa.array([3], pa.int64()), "n": pa.array(["x"])})),
            "d.parquet": _parquet(pa.table({"id": pa.array([4], pa.int64()), "N": pa.array([9])})),
        },
        existing=_TABLE,
    )

    assert out.fast_path_files == 4
    assert out.schema.field("n").type == pa.int64()
    assert [(r["id"], r["n"]) for r in rows] == [(1, 1), (2, 7)]
    assert [(file, line) for file, line, _ in errors] == [("c.parquet", None), ("d.parquet", None)]
    assert "does not unify" in errors[0][2]
    assert errors[1][2] == "field name differs only in case from a column: N (column n)"


def test_a_parquet_object_over_the_in_memory_limit_is_read_part_by_part_with_ranged_gets(
    s3, aws_options, spark, tmp_path, monkeypatch
):
    monkeypatch.setattr(objects, "MAX_OBJECT_BYTES", 1000)  # the tasks run on this process's threads
    monkeypatch.setattr(parquet_format, "IN_MEMORY_PARQUET_BYTES", 1000)
    big = pa.table({"id": pa.array(range(3000), pa.int64()), "s": [f"v{i}" for i in range(3000)]})
    body = _parquet(big, row_group_size=500)
    assert len(body) > 1000

    out, rows, errors = _read(s3, aws_options, spark, tmp_path, {"big.parquet": body})

    assert errors == [] and out.fast_path_files == 1
    assert _of(rows, "big.parquet", "_source_line", "id", "s") == [(i, i, f"v{i}") for i in range(3000)]


def test_what_spark_has_no_type_for_or_a_value_that_does_not_cast_is_the_file_s_error_row(
    s3, aws_options, spark, tmp_path
):
    out, rows, errors = _read(
        s3,
        aws_options,
        spark,
        tmp_path,
        {
            "unsigned.parquet": _parquet(pa.table({"id": [1], "u": pa.array([1], pa.uint32())})),
            "text id.parquet": _parquet(pa.table({"id": pa.array(["one"])})),
            "nulls.parquet": _parquet(pa.table({"id": pa.array([5], pa.int64()), "z": pa.nulls(1)})),
        },
        existing=_TABLE,
    )

    assert [(r["id"], r["z"]) for r in rows] == [(5, None)]  # an all-null column: the table types it
    assert out.schema.field("z").type == pa.string()
    assert [(file, line) for file, line, _ in errors] == [
        ("text id.parquet", None),
        ("unsigned.parquet", None),
    ]
    assert errors[0][2].startswith("a value does not cast to the batch's type")
    assert errors[1][2] == "column u: Spark has no type for uint32"


def test_a_merge_batch_ordered_by_a_double_keeps_the_row_spark_s_window_keeps(
    s3, aws_options, spark, tmp_path
):
    nan = float("nan")
    out, rows, errors = _read(
        s3,
        aws_options,
        spark,
        tmp_path,
        {
            "a.parquet": _parquet(
                pa.table({"id": [1, 2, 3], "seq": [5.0, -0.0, None], "v": ["a1", "a2", "a3"]})
            ),
            "b.parquet": _parquet(
                pa.table({"id": [1, 2, 3], "seq": [nan, 0.0, -1.5], "v": ["b1", "b2", "b3"]})
            ),
        },
        extra={"mode": "merge", "record.key": "id", "ordering.field": "seq"},
    )

    assert errors == [] and out.fast_path_files == 2
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "b1"), (2, "b2"), (3, "b3")]


# -- an object read straight from S3 (`ParquetParser.streamed`: one GET, or ranged GETs past the bound) --


def _put(s3: Any, key: str, body: bytes) -> FileRef:
    etag = s3.put_object(Bucket=_bucket(s3), Key=key, Body=body)["ETag"].strip('"')
    return FileRef(_bucket(s3), key, etag, None, len(body), INGESTED_AT, key, "created", 1)


def _streamed(ref: FileRef, aws_options: aws.AwsOptions) -> tuple[pa.Table | None, str | None]:
    parsed = parquet_format.ParquetParser(pa.schema([]), batch_rows=3).streamed(ref, aws_options)
    if parsed.parts is None:
        assert parsed.failed and parsed.table is None
        return None, parsed.reason
    return pa.concat_tables(list(parsed.parts)), None


@pytest.mark.parametrize("in_memory_bytes", [64 << 20, 0], ids=["one-get", "ranged-gets"])
def test_a_streamed_parquet_object_gets_lineage_with_row_indexes(
    s3, aws_options, tmp_path, monkeypatch, in_memory_bytes
):
    monkeypatch.setattr(parquet_format, "IN_MEMORY_PARQUET_BYTES", in_memory_bytes)
    data = pa.table({"id": list(range(10)), "name": [f"n{i}" for i in range(10)]})
    ref = _put(s3, f"streamed/{tmp_path.name}/part 0.parquet", _parquet(data, row_group_size=4))

    table, _ = _streamed(ref, aws_options)

    assert table is not None
    assert table.column_names == ["_source_file", "_source_etag", "_source_line", "_event_time", "id", "name"]
    assert table["id"].to_pylist() == table["_source_line"].to_pylist() == list(range(10))
    assert set(table["_source_file"].to_pylist()) == {ref.uri}
    assert set(table["_source_etag"].to_pylist()) == {ref.etag}
    assert set(table["_event_time"].to_pylist()) == {INGESTED_AT}


def test_a_streamed_parquet_object_gone_changed_or_corrupt_is_one_error_row(s3, aws_options, tmp_path):
    gone = _put(s3, f"streamed/{tmp_path.name}/gone.parquet", _parquet(pa.table({"a": [1]})))
    s3.delete_object(Bucket=gone.bucket, Key=gone.key)
    changed = _put(s3, f"streamed/{tmp_path.name}/changed.parquet", _parquet(pa.table({"a": [1]})))
    _put(s3, changed.key, _parquet(pa.table({"a": [2]})))
    corrupt = _put(s3, f"streamed/{tmp_path.name}/corrupt.parquet", b"PAR1 this is not really parquet PAR1")

    assert _streamed(gone, aws_options) == (None, objects.NOT_FOUND)
    assert _streamed(changed, aws_options) == (None, objects.CHANGED)
    table, why = _streamed(corrupt, aws_options)
    assert table is None and why is not None and why.startswith("not a readable Parquet file")
