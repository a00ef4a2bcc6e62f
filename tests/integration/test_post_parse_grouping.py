"""The line path's parsed rows may be grouped (by partition column or record key) before the post-parse
stage runs in the same mapInArrow only where the stage leaves those values as they are: a key's rows
must meet in one group, and two values equal only after the stage's cast would not."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from s3events.ingest.files.post_parse import ParsedRows

pytestmark = [pytest.mark.integration]


def _parsed(spark: Any, ddl: str, finished: pa.Schema, made: frozenset[str] = frozenset()) -> ParsedRows:
    rows = spark.createDataFrame([], ddl)
    return ParsedRows(rows, finished, lambda batches: batches, made)


def test_rows_group_before_the_stage_by_a_field_it_leaves_as_it_is(spark):
    finished = pa.schema([("id", pa.int64()), ("country", pa.string())])
    assert _parsed(spark, "id long, country string", finished).groups_by(["id"])
    assert _parsed(spark, "id long, country string", finished).groups_by(["id", "country"])
    assert _parsed(spark, "id long, country string", finished).groups_by([])


def test_a_field_the_stage_casts_or_sets_groups_only_after_it(spark):
    to_int = pa.schema([("id", pa.int64())])
    # "1" and "01" are one key after the cast to the table's BIGINT: they must meet in one group.
    assert not _parsed(spark, "id string", to_int).groups_by(["id"])
    assert not _parsed(spark, "id long", to_int, made=frozenset({"id"})).groups_by(["id"])
    assert not _parsed(spark, "other long", pa.schema([("other", pa.int64()), ("id", pa.int64())])).groups_by(
        ["id"]
    )
