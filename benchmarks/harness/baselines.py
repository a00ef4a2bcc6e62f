"""The plain ways of doing what s3events does, that benchmarks measure it against in the same run.

- **A** (ingest): boto3 GETs, pyarrow's reader of the format, one `write_deltalake` (or one
  `DeltaTable.merge`) in this process; no lineage, no error rows, no checkpoint. **A1**: the same with the
  reader on one thread (pyarrow's readers use every core by default).
- **B** (ingest): `spark.read.<format>` of a local copy + `write.parquet`; no Delta log, no S3.
- **plain** and **held** SQS loops (capture): ReceiveMessage(10) + DeleteMessageBatch, at once or after
  holding as many messages as capture's batch.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

READERS = {
    "json": "pyarrow.json",
    "csv": "pyarrow.csv",
    "text": "split lines",
    "parquet": "pyarrow.parquet",
    "avro": "fastavro",
    "orc": "pyarrow.orc",
    "xml": "defusedxml iterparse",
    "binary": "the bytes",
    "json-multiline": "json.loads",
    "csv-multiline": "pyarrow.csv (newlines_in_values)",
}


def read_with_pyarrow(fmt: str, body: bytes, threads: bool = True) -> pa.Table:
    """pyarrow's reader of `fmt` (text: lines split in Python); its JSON, CSV and Parquet readers use
    every core unless `threads` is false (A1)."""
    if fmt == "json":
        return pajson.read_json(io.BytesIO(body), read_options=pajson.ReadOptions(use_threads=threads))
    if fmt == "csv":
        return pacsv.read_csv(io.BytesIO(body), read_options=pacsv.ReadOptions(use_threads=threads))
    if fmt == "csv-multiline":  # quoted newlines inside records
        return pacsv.read_csv(
            io.BytesIO(body),
            read_options=pacsv.ReadOptions(use_threads=threads),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
        )
    if fmt == "json-multiline":  # a top-level array (pyarrow.json reads only JSON lines)
        return pa.Table.from_pylist(json.loads(body))
    if fmt == "text":
        return pa.table({"value": pa.array(body.decode("utf-8").splitlines(), pa.string())})
    if fmt in _WHOLE_FILE:
        return _WHOLE_FILE[fmt](body)
    return pq.read_table(io.BytesIO(body), use_threads=threads)


def _avro(body: bytes) -> pa.Table:
    import fastavro

    return pa.Table.from_pylist(list(fastavro.reader(io.BytesIO(body))))


def _orc(body: bytes) -> pa.Table:
    import pyarrow.orc as orc

    return orc.read_table(io.BytesIO(body))


def _xml(body: bytes) -> pa.Table:
    """Each <row> element's children as string columns (the benchmark's flat rows)."""
    import defusedxml.ElementTree as safe_xml

    rows = []
    for _, element in safe_xml.iterparse(io.BytesIO(body)):
        if element.tag == "row":
            rows.append({child.tag: child.text for child in element})
            element.clear()
    return pa.Table.from_pylist(rows)


def _binary(body: bytes) -> pa.Table:
    return pa.table({"content": pa.array([body], pa.binary()), "size": pa.array([len(body)], pa.int64())})


_WHOLE_FILE = {"avro": _avro, "orc": _orc, "xml": _xml, "binary": _binary}


def delta_merge(table_path: str, rows: pa.Table, key: str, *, newer: str | None = None) -> dict[str, Any]:
    """One `DeltaTable.merge` of `rows` by `key`: update every matched row (only where `rows`' `newer`
    column is at least the target's, if given), insert the others; delta-rs's metrics."""
    from deltalake import DeltaTable

    merge = DeltaTable(table_path).merge(
        rows, predicate=f"t.`{key}` = s.`{key}`", source_alias="s", target_alias="t"
    )
    updated = merge.when_matched_update_all(predicate=f"s.`{newer}` >= t.`{newer}`" if newer else None)
    return dict(updated.when_not_matched_insert_all().execute())


def pyarrow_to_delta(
    s3: Any,
    bucket: str,
    keys: Iterable[str],
    target: str,
    *,
    fmt: str,
    merge_key: str | None = None,
    threads: bool = True,
    create: bool = True,
) -> pa.Table:
    """A (A1 with `threads=False`): GET each object, read it with pyarrow, concatenate, and append to the
    Delta table at `target` (with `merge_key`: MERGE by it, into an empty table of the data's schema
    first unless `create` is false). The rows read."""
    from deltalake import write_deltalake

    tables = [
        read_with_pyarrow(fmt, s3.get_object(Bucket=bucket, Key=k)["Body"].read(), threads) for k in keys
    ]
    table = pa.concat_tables(tables, promote_options="default")
    if merge_key is None:
        write_deltalake(target, table, mode="append")
        return table
    if create:
        write_deltalake(target, table.schema.empty_table())
    delta_merge(target, table, merge_key)
    return table


def spark_to_parquet(spark: Any, fmt: str, source: Path, target: str) -> None:
    """B: Spark's own reader of `fmt` over a local directory (CSV: header, schema inferred), then Parquet."""
    reader = spark.read.options(header=True, inferSchema=True) if fmt == "csv" else spark.read
    getattr(reader, fmt)(str(source)).write.parquet(target)


def _delete(sqs: Any, queue_url: str, messages: list[dict[str, Any]]) -> None:
    for start in range(0, len(messages), 10):
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
            for i, m in enumerate(messages[start : start + 10])
        ]
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries)


def sqs_drain(sqs: Any, queue_url: str, *, hold: int = 10) -> tuple[int, float]:
    """Drain a queue as a plain loop would, until it answers empty; (messages, seconds). `hold=10`: the
    plain loop, ReceiveMessage(10) + DeleteMessageBatch of what it gave; larger: the held loop, which
    receives until `hold` messages are in hand (as many in flight as capture's batch), then deletes."""
    started, done = time.perf_counter(), 0
    while True:
        held: list[dict[str, Any]] = []
        while len(held) < hold:
            wanted = min(10, hold - len(held))
            got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=wanted).get("Messages", [])
            held.extend(got)
            if not got or hold <= 10:  # the plain loop deletes what each receive gave at once
                break
        if not held:
            return done, time.perf_counter() - started
        _delete(sqs, queue_url, held)
        done += len(held)
