"""The rows a fast-path task hands back to the driver (`fast_path` reads them by name): one per data
file it wrote, per file it declined, per CSV header it saw and per field schema.evolution=ignore
dropped; its error rows, the rows a transform in Arrow removed and the count of files it was given."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa

from s3events.infra.parquet_files import WRITTEN_FILE_SCHEMA
from s3events.ingest.files import post_parse
from s3events.ingest.model import FileRef

TASK_ROWS = pa.schema(
    [
        *[f.with_nullable(True) for f in WRITTEN_FILE_SCHEMA],
        pa.field("schema", pa.binary()),  # the written table's schema (null-typed columns included)
        pa.field("event_id", pa.string()),  # a file for the line path ...
        pa.field("reason", pa.string()),  # ... and why
        pa.field("header", pa.string()),  # a CSV header line the task saw (one row each)
        # Merge mode: the record keys of the rows a flush wrote,
        pa.field("rows", pa.binary()),  # on driver threads as an IPC stream,
        pa.field("staged", pa.string()),  # from executors where they are staged (`stage_table`)
        pa.field("files", pa.int64()),  # the files a task was given (one row per task)
        pa.field("dropped", pa.string()),  # a new field schema.evolution=ignore dropped (one row each)
        pa.field("errors", pa.binary()),  # a single-path format's error rows (IPC, ERROR_SCHEMA; one row)
        pa.field("filtered", pa.int64()),  # rows a transform in Arrow (`reshape`) removed (one row)
    ]
)


def result(
    out: list[dict[str, object]],
    headers: set[str],
    dropped: set[str],
    errors: list[pa.Table],
    filtered: int,
    ingested_at: datetime,
    files: int,
) -> pa.RecordBatch:
    """The task's rows: `out` (written and declined files), then headers, dropped fields, error rows
    (stamped with the batch's ingestion time), the rows a transform removed and the files given."""
    out.extend({"header": header} for header in sorted(headers))
    out.extend({"dropped": name} for name in sorted(dropped))
    if errors:
        out.append({"errors": ipc(post_parse.stamped(pa.concat_tables(errors), ingested_at))})
    out.extend([{"filtered": filtered}] if filtered else [])
    out.append({"files": files})
    return pa.RecordBatch.from_pylist(out, schema=TASK_ROWS)


def ipc(table: pa.Table) -> bytes:
    """`table` as an Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def declined(pending: list[tuple[FileRef, pa.Table]], reason: str) -> list[dict[str, object]]:
    """A declined file's row for each of `pending`."""
    return [{"event_id": ref.event_id, "reason": reason} for ref, _ in pending]
