"""The tables the real flows write (capture, ingest, maintenance), read back by delta-spark: the metadata
table and its change data feed, the quarantine table, targets in append and merge mode partitioned by
key-path fields, schema evolution, error tables, compaction and vacuum, a downstream stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from s3events.capture.service import run_capture
from s3events.config import load_settings
from s3events.ingest.service import run_ingest
from s3events.maintenance.service import run_maintenance, select_tables
from tests.conftest import Stack
from tests.interop.delta_read import (
    Probe,
    assert_filters_agree,
    assert_same_rows,
    canonical,
    history,
    spark_read,
    spark_rows,
    transactions,
)

pytestmark = [pytest.mark.integration, pytest.mark.interop]

# Key-path partition values with what needs escaping in a directory name, and again in the log.
SOURCES = ["a b", "ünï 日本", "x=y", "100%", "%2F", "plus+sign"]


def capture(stack: Stack) -> None:
    run_capture(load_settings(None, stack.conf()), once=True)


def settings_for(stack: Stack, targets: dict[str, dict[str, object]]) -> Any:
    conf: dict[str, object] = {"ingest__targets": ",".join(targets)}
    for name, target in targets.items():
        conf.update({f"ingest__target__{name}__{k}": v for k, v in target.items()})
    settings = load_settings(None, stack.conf(**conf))
    settings.validate_for("ingest")
    return settings


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def change_feed_rows(path: str) -> list[dict[str, Any]]:
    """delta-rs' change data feed from version 0, without the commit timestamps (file times differ)."""
    rows = pa.table(DeltaTable(path).load_cdf(starting_version=0).read_all())
    return rows.drop_columns(["_commit_timestamp"]).to_pylist()


def spark_change_feed_rows(spark: Any, path: str) -> list[dict[str, Any]]:
    df = spark_read(spark, path, readChangeFeed="true", startingVersion=0).drop("_commit_timestamp")
    return spark_rows(df)[1]


def test_metadata_table_its_change_feed_and_the_quarantine_table(delta_spark, make_stack, s3, sqs):
    stack = make_stack()
    keys = ["plain.json", "with space/and more.json", "ünï/日本語.json", "equals/dt=2026-11-22/x.json"]
    for key in keys:
        s3.put_object(Bucket=stack.bucket, Key=key, Body=b'{"a": 1}\n')
    sqs.send_message(QueueUrl=stack.queue_url, MessageBody="{not an S3 event")
    capture(stack)
    s3.put_object(Bucket=stack.bucket, Key=keys[0], Body=b'{"a": 1}\n')  # same bytes: an update
    s3.delete_object(Bucket=stack.bucket, Key=keys[1])
    s3.put_object(Bucket=stack.bucket, Key="later 100%.json", Body=b'{"a": 2}\n')
    capture(stack)
    metadata, quarantine = stack.metadata_path, stack.metadata_path + "_quarantine"

    rows = assert_same_rows(delta_spark, metadata)
    assert {r["key"] for r in rows} == {*keys, "later 100%.json"}
    assert len(assert_same_rows(delta_spark, quarantine)) == 1
    feed = change_feed_rows(metadata)
    assert {r["_change_type"] for r in feed} >= {"insert", "update_preimage", "update_postimage"}
    assert canonical(spark_change_feed_rows(delta_spark, metadata)) == canonical(feed)
    ours = DeltaTable(metadata).history()
    assert history(delta_spark, metadata) == sorted((int(h["version"]), h["operation"]) for h in ours)

    # Compaction, a checkpoint (a Parquet file delta-rs writes), log cleanup and vacuum: the same rows,
    # the same change feed (compaction changes no data), and the version before them still readable.
    before = DeltaTable(metadata).version()
    reports = run_maintenance(
        load_settings(None, stack.conf()), select_tables(load_settings(None, stack.conf()), "all")
    )
    assert not [r.error for r in reports if r.error]
    assert DeltaTable(metadata).version() > before
    delta_spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    assert_same_rows(delta_spark, metadata)
    assert_same_rows(delta_spark, metadata, version=before)
    assert canonical(spark_change_feed_rows(delta_spark, metadata)) == canonical(change_feed_rows(metadata))


def test_append_target_partitioned_by_key_path_fields_evolving_with_an_error_table(
    delta_spark, spark, make_stack, s3, tmp_path: Path
):
    stack = make_stack()
    for i, source in enumerate(SOURCES):
        rows = [
            {
                "id": i * 10 + n,
                "amount": 1.5 * n - i,
                "ok": n % 2 == 0,
                "tags": ["t", str(n)],
                "nested": {"k": n},
            }
            for n in range(3)
        ]
        body = jsonl(rows) + (b"{broken\n" if i == 0 else b"")
        s3.put_object(Bucket=stack.bucket, Key=f"in/src={source}/day=2026-11-2{i % 2}/f {i}.json", Body=body)
    capture(stack)
    target = str(tmp_path / "t")
    settings = settings_for(
        stack,
        {
            "t": {
                "path": target,
                "format": "json",
                "key.prefix": "in/",
                "partition.by": "src,day",
                "key.columns": "src,day",
            }
        },
    )
    run_ingest(settings, once=True, spark=spark)
    first = DeltaTable(target).version()
    s3.put_object(
        Bucket=stack.bucket,
        Key="in/src=a b/day=2026-11-23/new column.json",
        Body=jsonl([{"id": 100, "amount": 0.5, "ok": True, "extra": "new"}, {"id": "not a number"}]),
    )
    capture(stack)
    run_ingest(settings, once=True, spark=spark)

    rows = assert_same_rows(delta_spark, target)
    # key.columns undoes %XX in folder values as Spark's partition discovery does: src=%2F is "/"
    assert {r["src"] for r in rows} == {"/" if s == "%2F" else s for s in SOURCES}
    assert len(rows) == len(SOURCES) * 3 + 1
    assert [r["extra"] for r in rows if r["id"] == 100] == ["new"]
    assert all("extra" not in r for r in assert_same_rows(delta_spark, target, version=first))
    errors = assert_same_rows(delta_spark, target + "_errors")
    assert sorted(e["raw"] for e in errors) == ['{"id": "not a number"}', "{broken"]
    table = DeltaTable(target)
    ours = {app: table.transaction_version(app) for app in transactions(delta_spark, target)}
    assert transactions(delta_spark, target) == ours and "s3events.ingest/t" in ours
    probes = [
        *(Probe(f"src = '{s}'", lambda r, s=s: r["src"] == s) for s in SOURCES),
        Probe("day = '2026-11-23'", lambda r: r["day"] == "2026-11-23"),
        Probe("id = 0", lambda r: r["id"] == 0),
        Probe("id = 100", lambda r: r["id"] == 100),
        Probe("id = 52", lambda r: r["id"] == 52),
        Probe("id = 7", lambda r: False),
        Probe("amount <= -5.0", lambda r: r["amount"] <= -5.0),
        Probe("extra IS NULL", lambda r: r["extra"] is None),
    ]
    assert_filters_agree(delta_spark, target, probes)

    version = table.version()
    reports = run_maintenance(settings, select_tables(settings, "target:t"))
    assert not [r.error for r in reports if r.error] and any(r.compacted_from for r in reports)
    delta_spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    assert_same_rows(delta_spark, target)
    assert_same_rows(delta_spark, target, version=version)
    assert_same_rows(delta_spark, target + "_errors")


def stream_once(spark: Any, source: str, sink: str, checkpoint: str) -> None:
    """A downstream Structured Streaming query over our target: whatever is new, then stop."""
    query = (
        spark.readStream.format("delta")
        .load(source)
        .writeStream.format("parquet")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(sink)
    )
    query.awaitTermination()
    assert query.exception() is None


def test_merge_target_and_a_downstream_stream_over_an_append_target(
    delta_spark, spark, make_stack, s3, tmp_path: Path
):
    stack = make_stack()
    s3.put_object(
        Bucket=stack.bucket,
        Key="m/1.json",
        Body=jsonl([{"id": 1, "ts": 1, "v": "a"}, {"id": 2, "ts": 1, "v": "b"}]),
    )
    s3.put_object(Bucket=stack.bucket, Key="s/1.json", Body=jsonl([{"n": 1}, {"n": 2}]))
    capture(stack)
    merged, appended = str(tmp_path / "m"), str(tmp_path / "s")
    settings = settings_for(
        stack,
        {
            "m": {
                "path": merged,
                "format": "json",
                "key.prefix": "m/",
                "mode": "merge",
                "record.key": "id",
                "ordering.field": "ts",
            },
            "s": {"path": appended, "format": "json", "key.prefix": "s/"},
        },
    )
    sink, checkpoint = str(tmp_path / "sink"), str(tmp_path / "sink-checkpoint")
    run_ingest(settings, once=True, spark=spark)
    stream_once(delta_spark, appended, sink, checkpoint)
    first = DeltaTable(merged).version()
    s3.put_object(
        Bucket=stack.bucket,
        Key="m/2.json",
        Body=jsonl([{"id": 1, "ts": 2, "v": "a2"}, {"id": 3, "ts": 1, "v": "c"}]),
    )
    s3.put_object(Bucket=stack.bucket, Key="s/2.json", Body=jsonl([{"n": 3}]))
    capture(stack)
    run_ingest(settings, once=True, spark=spark)
    stream_once(delta_spark, appended, sink, checkpoint)

    assert {r["id"]: r["v"] for r in assert_same_rows(delta_spark, merged)} == {1: "a2", 2: "b", 3: "c"}
    assert {r["id"]: r["v"] for r in assert_same_rows(delta_spark, merged, version=first)} == {1: "a", 2: "b"}
    assert transactions(delta_spark, merged)["s3events.ingest/m"] == DeltaTable(merged).transaction_version(
        "s3events.ingest/m"
    )
    # Each row of our two commits reached the stream's sink once.
    streamed = delta_spark.read.parquet(sink).toArrow().to_pylist()
    assert canonical(streamed) == canonical(assert_same_rows(delta_spark, appended))
    assert sorted(r["n"] for r in streamed) == [1, 2, 3]
