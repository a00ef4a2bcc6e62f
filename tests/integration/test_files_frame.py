"""A batch's files reach Spark tasks in batch order, each file in exactly one task, as FileRefs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
from pyspark import TaskContext
from pyspark.sql.pandas.types import from_arrow_schema

from s3events.ingest.files.frames import collected, files_frame
from s3events.ingest.model import FileRef

pytestmark = pytest.mark.integration

SEEN = pa.schema(
    [
        ("partition", pa.int32()),
        ("position", pa.int32()),
        ("key", pa.string()),
        ("etag", pa.string()),
        ("version_id", pa.string()),
        ("size", pa.int64()),
        ("event_time", pa.timestamp("us", tz="UTC")),
    ]
)


def refs(n: int) -> tuple[FileRef, ...]:
    return tuple(
        FileRef(
            bucket="b",
            key=f"in/{i:06d}.json",
            etag=f"e{i}",
            version_id=None if i % 2 else f"v{i}",
            size=i,
            event_time=datetime(2026, 11, 25, 12, 0, i % 60, tzinfo=UTC),
            event_id=f"id-{i}",
            event_kind="created",
            commit_version=7,
        )
        for i in range(n)
    )


def task_seen() -> Any:
    """What each task saw (a function defined here, not at module level: workers cannot import tests)."""

    def seen(refs_in_task: Iterator[FileRef]) -> Iterator[pa.RecordBatch]:
        partition = TaskContext.get().partitionId()  # type: ignore[union-attr]
        rows = [
            {
                "partition": partition,
                "position": p,
                "key": r.key,
                "etag": r.etag,
                "version_id": r.version_id,
                "size": r.size,
                "event_time": r.event_time,
            }
            for p, r in enumerate(refs_in_task)
        ]
        yield pa.RecordBatch.from_pylist(rows, schema=SEEN)

    return seen


def task_seen_once() -> Any:
    """`task_seen` as `FilesFrame.run_each` calls a task: once, with the task's files as a list."""
    seen = task_seen()

    def once(refs_in_task: list[FileRef]) -> pa.RecordBatch:
        (batch,) = seen(iter(refs_in_task))
        return batch

    return once


def run_in_query(spark: Any, files: tuple[FileRef, ...], slices: int) -> list[dict[str, Any]]:
    return collected(files_frame(spark, files, slices).map(task_seen(), from_arrow_schema(SEEN)))


def run_each(spark: Any, files: tuple[FileRef, ...], slices: int) -> list[dict[str, Any]]:
    batches = files_frame(spark, files, slices).run_each(task_seen_once())
    return [row for batch in batches for row in batch.to_pylist()]


@pytest.mark.parametrize("run", [run_in_query, run_each], ids=["map", "run_each"])
def test_each_task_gets_a_run_of_the_batch_in_order_and_every_file_once(spark: Any, run: Any) -> None:
    files = refs(25_003)  # more than one Arrow batch of indexes per task (10,000 a batch)
    rows = run(spark, files, 3)
    assert len(rows) == len(files)
    runs = [[r for r in rows if r["partition"] == p] for p in range(3)]
    assert [len(run) for run in runs] == [8334, 8334, 8335]
    in_order = [r for run in runs for r in sorted(run, key=lambda r: r["position"])]
    assert [r["key"] for r in in_order] == [f.key for f in files]
    for got, sent in zip(in_order, files, strict=True):
        assert (got["etag"], got["version_id"], got["size"]) == (sent.etag, sent.version_id, sent.size)
        assert got["event_time"].replace(tzinfo=UTC) == sent.event_time


@pytest.mark.parametrize("run", [run_in_query, run_each], ids=["map", "run_each"])
def test_a_batch_smaller_than_the_slices_asked_for_has_a_task_per_file_and_none_empty(
    spark: Any, run: Any
) -> None:
    rows = run(spark, refs(2), 8)
    assert sorted((r["partition"], r["key"]) for r in rows) == [(0, "in/000000.json"), (1, "in/000001.json")]
