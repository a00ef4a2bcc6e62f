"""A batch's files as a Spark DataFrame for executors to read, and back to FileRefs inside them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from s3events.ingest.model import FileRef

_FILE_DDL = (
    "bucket string, key string, etag string, version_id string, size bigint, event_time timestamp, "
    "event_id string, event_kind string, commit_version bigint"
)


def files_frame(spark: SparkSession, files: tuple[FileRef, ...], slices: int | None = None) -> DataFrame:
    """One row per file in `slices` partitions (default: up to 4 per core), in batch order."""
    rows = [
        (
            f.bucket,
            f.key,
            f.etag,
            f.version_id,
            f.size,
            f.event_time,
            f.event_id,
            f.event_kind,
            f.commit_version,
        )
        for f in files
    ]
    wanted = slices if slices is not None else spark.sparkContext.defaultParallelism * 4
    count = max(1, min(len(rows), wanted))
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, count), _FILE_DDL)


def file_refs(batches: Iterator[pa.RecordBatch]) -> Iterator[FileRef]:
    """Inside a mapInArrow function: the FileRefs of the rows this task was given."""
    for record_batch in batches:
        for row in record_batch.to_pylist():
            yield FileRef(**row)


def collected(frame: DataFrame) -> list[dict[str, Any]]:
    """Every row of `frame` on the driver, or an error. `DataFrame.collect` returns what reached Python
    when the driver's serving thread fails (an OutOfMemoryError collecting large results: measured, it
    returned no rows at all), which would commit a batch without its rows; `toArrow` raises instead."""
    return frame.toArrow().to_pylist()
