"""A new target's bootstrap from the metadata table's snapshot: rows/s and the driver's peak memory.

    nice -n 10 .venv/bin/python -m benchmarks.bootstrap [--sizes 20K,100K] [--limits 1000,10000]
        [--objects 2000] [--smoke]

Set-up (not timed): a moto_server endpoint (`LocalEndpoint`) and one bucket; per size N a metadata table
of N rows (created events written with `MetadataTable.commit` in commits of 20,000, as
`benchmarks/ingest_throughput.py` does: capture is not what is measured), in today's bucketed layout.
`--objects` of them are real JSON-lines objects under `in/` (10 lines each, PUT into moto with their
real etags); the rest name objects under `other/` that no target here reads.

Measured:
- **plan**: the whole snapshot of the N-row table planned as a bootstrapping target's batches, as the
  ingest cycle plans them (`MetadataFeed.snapshot_rows` streamed into `plan.plan_snapshot`, batch after
  batch, each resuming at the previous batch's end) for a target routing every key, at each
  `max.files.per.batch` of `--limits`; nothing is read from S3. Rows/s of the snapshot, and the driver's
  peak RSS above its RSS at the start (sampled every 20 ms): what a bootstrap holds is one batch's
  FileRefs and one record batch of the snapshot, so the rise follows the batch limit, not N.
- **ingest**: `run_ingest(--once)` of a new target routing `in/` on the largest table, with local Spark
  (local[2]): the snapshot scan (N rows, `--objects` routed), the objects' GETs and parsing, the commits.
  Lines/s, files/s, and the driver's and the JVM's peak RSS.

This machine has 2 cores shared with other work: wall times move with the load average printed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.harness import MemorySampler, Run, add_common, load_text, rss_bytes, smoke
from benchmarks.harness.endpoints import LOCAL_ENV, LocalEndpoint
from benchmarks.harness.metadata import write_created_events
from benchmarks.harness.procs import descendant
from s3events.config import load_settings
from s3events.infra import aws
from s3events.ingest.feed import MetadataFeed
from s3events.ingest.model import Checkpoint, Limits
from s3events.ingest.plan import Route, plan_snapshot

BUCKET = "bench-bootstrap"
CHUNK = 20_000
LINES = 10
MB = 1 << 20


def parse_size(text: str) -> int:
    text = text.strip().upper()
    factor = {"K": 1_000, "M": 1_000_000}.get(text[-1], 1)
    return int(float(text.rstrip("KM")) * factor)


def put_objects(s3: Any, count: int) -> list[tuple[str, str, int]]:
    """`count` JSON-lines objects under in/: (key, etag, size) each."""

    def put(i: int) -> tuple[str, str, int]:
        body = "".join(json.dumps({"f": i, "n": n, "v": "x" * 40}) + "\n" for n in range(LINES)).encode()
        key = f"in/{i:07d}.json"
        etag = s3.put_object(Bucket=BUCKET, Key=key, Body=body)["ETag"].strip('"')
        return key, etag, len(body)

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(put, range(count)))


def write_metadata(path: str, rows: int, real: list[tuple[str, str, int]]) -> None:
    """A metadata table of `rows` created events: the `real` objects, then made-up ones under other/."""
    now = datetime.now(UTC)
    made_up = ((f"other/{i:08d}.json", f"{i:032x}", 500) for i in range(rows - len(real)))
    objects = [*real, *made_up]
    write_created_events(path, BUCKET, objects, chunk=CHUNK, at=now, source="backfill", message_prefix=None)


def measure_plan(path: str, max_files: int) -> dict[str, Any]:
    """Every batch of a bootstrap of the whole snapshot, planned as the cycle plans them."""
    feed = MetadataFeed(path, storage_options={})
    latest = feed.latest_version()
    assert latest is not None
    start, rows, batches = Checkpoint.bootstrap(latest), 0, 0
    base = rss_bytes()
    began = time.perf_counter()
    with MemorySampler({"driver": "self"}, every=0.02) as sampler:
        while start.in_snapshot:
            rows_from = feed.snapshot_rows(start, bucket=None, key_prefix="")
            batch = plan_snapshot(start, rows_from, route=Route(), limits=Limits(max_files=max_files))
            if batch is None:
                break
            rows, batches, start = rows + len(batch.files), batches + 1, batch.end
    wall = time.perf_counter() - began
    return {
        "rows": rows,
        "batches": batches,
        "wall_s": round(wall, 2),
        "rows_per_s": round(rows / wall),
        "driver_rise_mb": round((sampler.peak() - base) / MB, 1),
        "driver_peak_mb": round(sampler.peak() / MB),
    }


def measure_ingest(endpoint_url: str, metadata: str, work: Path, objects: int) -> dict[str, Any]:
    from s3events.infra.spark import get_spark
    from s3events.ingest.service import run_ingest

    target = str(work / "target")
    conf = {
        "s3events.aws.endpoint.url": endpoint_url,
        "s3events.aws.region": "us-east-1",
        "s3events.metadata.table.path": metadata,
        "s3events.ingest.targets": "t",
        "s3events.ingest.target.t.path": target,
        "s3events.ingest.target.t.format": "json",
        "s3events.ingest.target.t.key.prefix": "in/",
    }
    settings = load_settings(None, [f"{k}={v}" for k, v in conf.items()])
    spark = get_spark(master="local[2]", app_name="s3events-bootstrap-bench")
    spark.sparkContext.setLogLevel("ERROR")
    jvm = descendant("jvm")
    pids: dict[str, int | str] = {"driver": "self"} | ({"jvm": jvm} if jvm else {})
    began = time.perf_counter()
    with MemorySampler(pids, every=0.02) as sampler:
        totals = run_ingest(settings, once=True, spark=spark)
    wall = time.perf_counter() - began
    assert not totals.failed and totals.rows == objects * LINES, (totals.failed, totals.rows)
    figures = {
        "rows": totals.rows,
        "batches": totals.batches,
        "wall_s": round(wall, 1),
        "rows_per_s": round(totals.rows / wall),
        "files_per_s": round(objects / wall, 1),
        "driver_peak_mb": round(sampler.peak() / MB),
        "jvm_peak_mb": round(sampler.peak("jvm") / MB) if jvm else None,
    }
    spark.stop()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sizes", default="20K,100K", help="metadata table rows (comma-separated)")
    parser.add_argument("--limits", default="1000,10000", help="max.files.per.batch values for the plan")
    parser.add_argument("--objects", type=int, default=2000, help="real objects the ingest phase reads")
    add_common(parser)
    args = parser.parse_args()
    smoke(args, sizes="2K,4K", limits="100,1000", objects=20)
    sizes = sorted(parse_size(s) for s in args.sizes.split(","))
    limits = [int(s) for s in args.limits.split(",")]
    logging.basicConfig(level=logging.WARNING)
    os.environ.update(LOCAL_ENV)
    run = Run.start("bootstrap", smoke=args.smoke)
    with LocalEndpoint() as endpoint, tempfile.TemporaryDirectory(prefix="bootstrap-", dir="/tmp") as tmp:
        work = Path(tmp)
        s3 = aws.client(aws.AwsOptions(region="us-east-1", endpoint_url=endpoint.url), "s3")
        s3.create_bucket(Bucket=BUCKET)
        real = put_objects(s3, args.objects)
        for size in sizes:
            metadata = str(work / f"metadata-{size}")
            write_metadata(metadata, size, real)
            for limit in limits:
                figures = measure_plan(metadata, limit)
                print(f"plan: {size:,} rows, max.files={limit}: {figures}; {load_text()}", flush=True)
                params = {"phase": "plan", "metadata_rows": size, "max_files": limit}
                run.add(f"plan, {size:,} rows, {limit} files a batch", params=params, figures=figures)
        figures = measure_ingest(endpoint.url, metadata, work, args.objects)
        print(f"ingest: {sizes[-1]:,} rows, {args.objects} objects: {figures}; {load_text()}", flush=True)
        params = {"phase": "ingest", "metadata_rows": sizes[-1], "objects": args.objects, "max_files": 1000}
        run.add(f"ingest, {sizes[-1]:,} rows, {args.objects:,} objects", params=params, figures=figures)
        run.save()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown (delta-rs readers can abort there; see ARCHITECTURE.md)


if __name__ == "__main__":
    sys.exit(main())
