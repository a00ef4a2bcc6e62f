"""Text has one path: every file ends as rows or error rows in the fast path's task, never on Spark's line
reader. An object larger than the in-memory limit is streamed in line blocks with the same rows as one
read whole; an object that cannot be read (gone, corrupt compressed data, a key that gives no columns) is
one error row and lands no rows; a line that is not UTF-8 is an error row and its file's other lines land."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from s3events.infra import aws
from s3events.ingest.files import objects
from s3events.ingest.files.dispatch import run_batch
from s3events.ingest.files.read_output import ReadOutput
from s3events.ingest.model import Batch, Checkpoint, FileRef
from tests.integration.test_dispatch import INGESTED_AT, _bucket, _errors, _rows, _target

pytestmark = pytest.mark.integration

_BODY = b"\xef\xbb\xbffirst\r\n\nthird caf\xe9\n" + b"".join(b"line %d\n" % i for i in range(4, 400))


def _read(
    s3: Any,
    aws_options: aws.AwsOptions,
    spark: Any,
    root: Path,
    bodies: dict[str, bytes],
    *,
    deleted: tuple[str, ...] = (),
    extra: dict[str, str] | None = None,
) -> tuple[ReadOutput, list[dict[str, Any]], list[tuple[str, int | None, str | None, str]]]:
    """One batch of `bodies` (key -> body) read for a text target (one path),
    objects in `deleted` removed before the read; its output, rows, and error rows (file, line, raw,
    error)."""
    bucket, refs = _bucket(s3), []
    for name, body in bodies.items():
        key = f"text/{root.name}/{name}"
        etag = s3.put_object(Bucket=bucket, Key=key, Body=body)["ETag"].strip('"')
        refs.append(FileRef(bucket, key, etag, None, len(body), INGESTED_AT, key, "created", 1))
        if name in deleted:
            s3.delete_object(Bucket=bucket, Key=key)
    target = _target("text", root / "t", fast=False, extra=extra)
    batch = Batch(tuple(refs), (), Checkpoint(-1), Checkpoint(0))
    out = run_batch(spark, batch, target, existing_schema=None, aws=aws_options, ingested_at=INGESTED_AT)
    errors = [
        (e["_source_file"].rsplit("/", 1)[-1], e["_source_line"], e["raw"], e["error"]) for e in _errors(out)
    ]
    return out, _rows(out, root / "t"), errors


def _lines(rows: list[dict[str, Any]], name: str) -> list[tuple[int, str]]:
    return [(r["_source_line"], r["value"]) for r in rows if r["_source_file"].endswith(f"/{name}")]


def test_a_text_object_over_the_in_memory_limit_is_streamed_with_the_rows_of_one_read_whole(
    s3, aws_options, spark, tmp_path, monkeypatch
):
    monkeypatch.setattr(objects, "MAX_OBJECT_BYTES", 1000)  # the tasks run on this process's threads
    out, rows, errors = _read(
        s3, aws_options, spark, tmp_path, {"big.txt": _BODY, "big.txt.gz": gzip.compress(_BODY)}
    )

    assert out.fast_path_files == 2
    expected = [(1, "first"), (2, ""), *[(n, f"line {n}") for n in range(4, 400)]]
    assert _lines(rows, "big.txt") == _lines(rows, "big.txt.gz") == expected
    utf8 = "line is not valid UTF-8 (unexpected end of data at byte 9)"
    assert errors == [("big.txt", 3, "third caf\ufffd", utf8), ("big.txt.gz", 3, "third caf\ufffd", utf8)]
    assert out.failed_files == {}


def test_unreadable_text_objects_are_one_error_row_each_and_land_no_rows(s3, aws_options, spark, tmp_path):
    broken = gzip.compress(_BODY)
    out, rows, errors = _read(
        s3,
        aws_options,
        spark,
        tmp_path,
        {
            "gone.txt": b"a\n",
            "corrupt.txt.gz": broken[: len(broken) // 2] + b"\x00" * 64 + broken[len(broken) // 2 :],
            "fine.txt": b"a\nb\n",
            "empty.txt": b"",
        },
        deleted=("gone.txt",),
    )

    assert _lines(rows, "fine.txt") == [(1, "a"), (2, "b")]
    assert {r["_source_file"].rsplit("/", 1)[-1] for r in rows} == {"fine.txt"}  # an empty file: no rows
    assert [(file, line, raw) for file, line, raw, _ in errors] == [
        ("corrupt.txt.gz", None, None),
        ("gone.txt", None, None),
    ]
    assert errors[0][3].startswith("corrupt gzip data")
    assert errors[1][3] == objects.NOT_FOUND
    assert set(out.failed_files) == {r["_source_file"] for r in out.errors.to_pylist()}


def test_a_text_object_whose_key_gives_no_columns_is_one_error_row(s3, aws_options, spark, tmp_path):
    _out, rows, errors = _read(
        s3,
        aws_options,
        spark,
        tmp_path,
        {"dt=2026-11-22/a.txt": b"a\n", "b.txt": b"b\n"},
        extra={"key.columns": "dt", "key.columns.required": "true"},
    )

    assert [(r["value"], str(r["dt"])) for r in rows] == [("a", "2026-11-22")]
    assert errors == [("b.txt", None, None, "key: the key has no dt=... folder (key.columns)")]
