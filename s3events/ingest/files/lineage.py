"""The lineage columns every target row carries, and the one function that fills them for a file's rows.

A format's parser gives lineage + data columns; `_ingested_at` is added after them by the post-parse
stage (`post_parse`). Pure pyarrow: no AWS, no Spark.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from s3events.ingest.model import FileRef

TIMESTAMP = pa.timestamp("us", tz="UTC")
LINEAGE_FIELDS = (
    pa.field("_source_file", pa.string()),
    pa.field("_source_etag", pa.string()),
    pa.field("_source_line", pa.int64()),
    pa.field("_event_time", TIMESTAMP),
)
LINEAGE = [f.name for f in LINEAGE_FIELDS]
INGESTED_AT = "_ingested_at"  # added by the ingest job, after the lineage columns above
FIXED = {*LINEAGE, INGESTED_AT}  # columns whose types the writer fixes, never a file


def lineage_columns(file: FileRef, etag: str | None, first: int | None, n: int) -> list[pa.Array]:
    """The lineage of `n` rows of `file`, numbered from `first` (None: a row about the whole file)."""
    if first is None:
        lines = pa.nulls(n, pa.int64())
    else:
        lines = pa.array(
            np.arange(first, first + n, dtype=np.int64)
        )  # faster than a cumulative sum (measured: docs/architecture.md)
    return [
        pa.repeat(pa.scalar(file.uri, pa.string()), n),
        pa.repeat(pa.scalar(etag, pa.string()), n),
        lines,
        pa.repeat(pa.scalar(event_time(file), TIMESTAMP), n),
    ]


def event_time(file: FileRef) -> datetime:
    """The event time of `file`, in UTC (a naive time is taken as UTC)."""
    return file.event_time if file.event_time.tzinfo else file.event_time.replace(tzinfo=UTC)
