"""A transformed batch's `src` straight from the fast path's parsers (`transform_src.parsed_src`): the
rows held by Spark as parsed, lineage included, filtered by file before decoding; a batch the fast
path cannot read whole (a line it declines) is left to the normal paths (None)."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from s3events.config import load_settings
from s3events.infra import aws
from s3events.ingest.files.dispatch import fast_parser
from s3events.ingest.files.transform_src import parsed_src
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec, target_specs
from tests.integration.test_ingest import jsonl

pytestmark = pytest.mark.integration

BUCKET = "transform-src"
WHEN = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)


def _target(path: Path) -> TargetSpec:
    conf = [
        "s3events.ingest.targets=t",
        f"s3events.ingest.target.t.path={path}",
        "s3events.ingest.target.t.format=json",
    ]
    [spec] = target_specs(load_settings(None, conf))
    return spec


def _put(s3: Any, files: dict[str, bytes]) -> tuple[FileRef, ...]:
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
        s3.create_bucket(Bucket=BUCKET)
    refs = []
    for i, (key, body) in enumerate(files.items()):
        etag = s3.put_object(Bucket=BUCKET, Key=key, Body=body)["ETag"].strip('"')
        refs.append(FileRef(BUCKET, key, etag, None, len(body), WHEN, f"e{i}", "created", 1))
    return tuple(refs)


def _parsed(spark: Any, refs: tuple[FileRef, ...], target: TargetSpec, options: aws.AwsOptions) -> Any:
    parser = fast_parser(target, None, None)
    assert parser is not None
    return parsed_src(spark, refs, target, parser=parser, aws=options, ingested_at=WHEN)


def test_a_batch_the_fast_path_reads_whole_is_src_as_parsed(
    spark: Any, s3: Any, aws_options: aws.AwsOptions, tmp_path: Path
):
    refs = _put(
        s3,
        {
            "whole/a.json": jsonl([{"id": 1, "v": "x"}, {"id": 2}]),
            "whole/b.json": jsonl([{"id": 3, "w": 1.5}]),
        },
    )

    parsed = _parsed(spark, refs, _target(tmp_path / "t"), aws_options)
    try:
        assert parsed is not None
        a, b = (r.uri for r in refs)
        assert parsed.rows_by_file == {a: 2, b: 1}
        assert parsed.schema.names == [
            "_source_file", "_source_etag", "_source_line", "_event_time", "id", "v", "w", "_ingested_at"
        ]  # fmt: skip
        rows = parsed.frame([b]).toArrow().to_pylist()
        assert [(r["_source_file"], r["_source_line"], r["id"], r["v"], r["w"]) for r in rows] == [
            (b, 1, 3, None, 1.5)
        ]
        assert parsed.frame([a, b]).count() == 3
    finally:
        if parsed is not None:
            parsed.release()


def test_a_batch_with_a_line_the_fast_path_declines_is_left_to_the_normal_paths(
    spark: Any, s3: Any, aws_options: aws.AwsOptions, tmp_path: Path
):
    refs = _put(s3, {"declined/a.json": jsonl([{"id": 1}]), "declined/b.json": b'{"id": 2}\nnot json\n'})

    assert _parsed(spark, refs, _target(tmp_path / "t"), aws_options) is None
