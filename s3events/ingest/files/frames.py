"""A batch's files handed to Spark tasks in batch order, a DataFrame's rows back on the driver, and
rows dropped by the file they came from."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from s3events.ingest.model import FileRef

_FILE_SCHEMA = pa.schema(
    [
        ("bucket", pa.string()),
        ("key", pa.string()),
        ("etag", pa.string()),
        ("version_id", pa.string()),
        ("size", pa.int64()),
        ("event_time", pa.timestamp("us", tz="UTC")),
        ("event_id", pa.string()),
        ("event_kind", pa.string()),
        ("commit_version", pa.int64()),
    ]
)

PartitionFunction = Callable[[Iterator[FileRef]], Iterator[pa.RecordBatch]]
TaskFunction = Callable[[list[FileRef]], pa.RecordBatch]


@dataclass(frozen=True, slots=True)
class FilesFrame:
    """The files of a batch split into `slices` runs in batch order, one Spark task each.

    The files travel with each task's function as one Arrow table; a task is given the indexes of its
    run (by `spark.range`; in `run_each` by `parallelize` of a range). A DataFrame of the files
    themselves (`createDataFrame` of their rows) would run a Python stage in every task to serialize
    them, which costs every batch more (measured: docs/architecture.md).
    """

    spark: SparkSession
    files: pa.Table
    slices: int

    def map(self, function: PartitionFunction, schema: StructType | str) -> DataFrame:
        """`function(refs)` in each task, over that task's files, as one DataFrame of what it yields."""
        task = partial(_run_with_refs, function=function, files=self.files)
        return self.spark.range(0, self.files.num_rows, 1, self.slices).mapInArrow(task, schema)

    def run_each(self, function: TaskFunction) -> list[pa.RecordBatch]:
        """`function(refs)` once in each task, over that task's files, and what each returned, on the
        driver. An RDD job, for results that need no further query: with no plan to build, it costs the
        JVM about half of `map` and `collected` (measured: docs/architecture.md). The results come back
        pickled through the driver's JVM: keep them small (a row per written file, not data). Like
        `DataFrame.collect` (see `collected`), a failure serving them may hand back fewer than the tasks
        sent: a caller must check that every task reported (the fast path's `ensure_accounted`)."""
        task = partial(_run_each_with_refs, function=function, files=self.files)
        # parallelize(range) splits as spark.range does: contiguous runs, in order
        rdd = self.spark.sparkContext.parallelize(range(self.files.num_rows), self.slices)
        return list(rdd.mapPartitions(task).collect())


def files_frame(spark: SparkSession, files: tuple[FileRef, ...], slices: int | None = None) -> FilesFrame:
    """`files` in `slices` tasks (default: up to 4 per core), in batch order."""
    wanted = slices if slices is not None else spark.sparkContext.defaultParallelism * 4
    table = pa.Table.from_pylist(
        [{name: getattr(f, name) for name in _FILE_SCHEMA.names} for f in files], schema=_FILE_SCHEMA
    )
    return FilesFrame(spark, table, max(1, min(len(files), wanted)))


def _run_with_refs(
    batches: Iterator[pa.RecordBatch], *, function: PartitionFunction, files: pa.Table
) -> Iterator[pa.RecordBatch]:
    """Inside a task: `function` over the FileRefs of the indexes this task was given."""

    def refs() -> Iterator[FileRef]:
        for indexes in batches:
            yield from _refs_at(files, indexes.column(0))

    yield from function(refs())


def _run_each_with_refs(
    indexes: Iterator[int], *, function: TaskFunction, files: pa.Table
) -> Iterator[pa.RecordBatch]:
    """Inside a task: `function` over the FileRefs of the indexes this task was given."""
    yield function(_refs_at(files, pa.array(list(indexes), pa.int64())))


def _refs_at(files: pa.Table, indexes: pa.Array) -> list[FileRef]:
    return [FileRef(**row) for row in files.take(indexes).to_pylist()]


def collected(frame: DataFrame) -> list[dict[str, Any]]:
    """Every row of `frame` on the driver, or an error. `DataFrame.collect` returns what reached Python
    when the driver's serving thread fails (an OutOfMemoryError collecting large results: measured, it
    returned no rows at all), which would commit a batch without its rows; `toArrow` raises instead."""
    return frame.toArrow().to_pylist()


def files_where(frame: DataFrame, condition: Column) -> list[str]:
    """The distinct `_source_file`s of `frame`'s rows meeting `condition`, on the driver, for dropping
    those files' rows by name (`without_files`): a broadcast join's broadcast would run again as a job
    of its own in every later action over `frame`."""
    # Deduplicated here: few rows meet the conditions used (a row per broken file), and Spark's distinct
    # would add a shuffle, a job more.
    return sorted({r["_source_file"] for r in collected(frame.where(condition).select("_source_file"))})


def without_files(frame: DataFrame, uris: list[str]) -> DataFrame:
    """`frame` without the rows of the files `uris` names."""
    return frame.where(~F.col("_source_file").isin(uris)) if uris else frame
