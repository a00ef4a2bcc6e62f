"""Months in minutes: does commit cost stay flat as history grows? Maintenance on against off, one run.

    .venv/bin/python benchmarks/long_run.py [--commits 20000] [--marks 1000,5000,10000,20000]
        [--variants on,off] [--s3 local|moto|gofakes3|both] [--off-commits 3000] [--seconds-per-commit 5]
        [--ingest-every 20] [--block 200] [--seed 7] [--count-requests] [--minutes M]
    .venv/bin/python benchmarks/long_run.py --s3 gofakes3 --commits 20000 --variants off,on \
        --off-commits 2000 --off-minutes 12 --minutes 70

What a quiet queue makes capture do for weeks: one `MetadataTable.commit` per cycle of 1-10 events,
about 3% of them redeliveries of events already captured. The table is opened as capture opens it, the
window's event ids in memory: a cycle of new events is an append, a cycle holding a redelivery the
project's own MERGE (insert-if-absent on event_id within the 15-day dedupe window, re-creation refresh).
`--merge-every-commit` makes every commit that MERGE (`s3events.metadata.dedupe.ids.in.memory=false`),
whose cost follows the rows of the window. Every `--ingest-every` commits an
ingest step follows: a fresh `MetadataFeed` reads the change feed after the target's checkpoint, `plan`
makes the batch, one small Parquet file of its entries is written and `TargetTable.commit_append` commits
it with the checkpoint (ingest's per-batch Delta work, without Spark reading the objects).

- **on**: what a `--continuous` process does between its cycles (`PeriodicMaintenance`, the class capture
  and ingest run, with its clock advanced `--seconds-per-commit` per commit): compaction of a table as
  soon as it holds `s3events.maintenance.compact.small.files` small files (checked every 30 s), and a
  full pass (compaction, checkpoint, log cleanup, vacuum) every `s3events.maintenance.interval.seconds`.
  Its own time is printed apart, not counted in the commit times.
- **off**: no maintenance, today's growth. It is stopped after `--off-commits` (its cost grows linearly,
  so 20k commits would take hours); the table shows where it got.

At each mark the p50/p99 of the last `--block` capture commits, the p50 of the ingest steps in the same
stretch, and the metadata table's data files and `_delta_log` entries are printed; then, per variant,
the ratio of the p50 at the last mark to the p50 at the first (goal with maintenance on: <= 1.2).
`--endpoint moto` keeps the tables in the local S3 endpoint (moto_server) instead of a local directory;
with `--count-requests` the tables' S3 requests go through a counting proxy and each mark also prints the
median S3 requests and LISTed keys per capture commit, and S3 requests per ingest step: the work a real
S3 does for them, which moto's own timings hide (moto walks the whole bucket on every LIST, real S3
starts at `start-after`).
`--s3 gofakes3` (`--endpoint` is the same option) keeps them in gofakes3 (benchmarks/harness/gofakes3.py:
its memory backend behind our LIST that stops at the prefix's end, built with `go build` on first use),
whose LIST seeks to `start-after` as S3 does, so the timings show our own cost as history grows.
`--minutes` (`--off-minutes`) bounds each variant with (without) maintenance: still going then, it
takes a last mark where it got, recorded as such, and the run goes on with the next variant.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import Run, add_common, int_list, load_text, median, percentile, smoke
from benchmarks.harness.table_stores import Store, endpoint_for
from s3events.config import Settings, load_settings
from s3events.events.model import ObjectEvent
from s3events.events.record import EventRecord
from s3events.infra import aws
from s3events.infra.parquet_files import write_data_file
from s3events.ingest.feed import MetadataFeed
from s3events.ingest.model import Checkpoint, Limits
from s3events.ingest.plan import Route, plan
from s3events.ingest.target_table import TargetTable
from s3events.maintenance.model import TableToMaintain
from s3events.maintenance.service import PeriodicMaintenance
from s3events.metadata.table import MetadataTable

TARGET_SCHEMA = pa.schema([pa.field("_source_file", pa.string()), pa.field("size", pa.int64())])
WINDOW = timedelta(days=15)


@dataclass
class Mark:
    commits: int
    capture_p50: float
    capture_p99: float
    ingest_p50: float | None
    data_files: int
    log_entries: int
    requests: float | None = None  # per capture commit (median of the block), with --count-requests
    listed_keys: float | None = None
    ingest_requests: float | None = None  # per ingest step (median of the stretch), with --count-requests


@dataclass
class Variant:
    name: str
    marks: list[Mark] = field(default_factory=list)
    maintenance_seconds: list[float] = field(default_factory=list)
    stopped_early: bool = False  # --minutes ran out: the last mark is where it got


def ms(values: list[float], q: float) -> float:
    return 1000 * percentile(values, q)


class Workload:
    """Synthetic S3 events: 1-10 per cycle, ~3% of them redeliveries of recent ones."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.recent: list[EventRecord] = []
        self.n = 0

    def cycle(self) -> list[EventRecord]:
        records = []
        for _ in range(self.rng.randint(1, 10)):
            if self.recent and self.rng.random() < 0.03:
                records.append(self.rng.choice(self.recent))
                continue
            self.n += 1
            now = datetime.now(UTC)
            event = ObjectEvent(
                bucket="landing",
                key=f"in/{self.n // 1000:05d}/{self.n:09d}.json",
                event_name="ObjectCreated:Put",
                event_time=now,
                size=self.rng.randint(100, 10_000),
                etag=uuid.UUID(int=self.rng.getrandbits(128)).hex,
                sequencer=f"{self.n:016X}",
            )
            records.append(EventRecord(event, "sqs", now, message_id=str(uuid.uuid4())))
        self.recent = (self.recent + records)[-200:]
        return records


class Ingest:
    """Ingest's per-batch Delta work for one target: feed read, plan, one file + checkpoint commit."""

    def __init__(
        self, metadata_path: str, target_path: str, storage: dict[str, str], options: aws.AwsOptions
    ) -> None:
        self.feed = MetadataFeed(metadata_path, storage_options=storage)
        self.target = TargetTable(target_path, "bench", storage_options=storage)
        self.target_path = target_path
        self.options = options
        self.checkpoint = Checkpoint(-1, 0)
        self.stored: Checkpoint | None = None  # what the target holds (none before its first batch)

    def step(self) -> float:
        started = time.perf_counter()
        latest = self.feed.latest_version()
        assert latest is not None
        changes = self.feed.changes_after(self.checkpoint.version, up_to=latest)
        batch = plan(self.checkpoint, changes.rows, route=Route(), limits=Limits(), latest_version=latest)
        if batch is not None:
            rows = pa.table(
                {"_source_file": [f.uri for f in batch.files], "size": [f.size for f in batch.files]},
                schema=TARGET_SCHEMA,
            )
            written = write_data_file(
                rows.to_batches(), table_uri=self.target_path, schema=TARGET_SCHEMA, options=self.options
            )
            files = [written] if written is not None else []
            self.target.commit_append(
                files, schema=TARGET_SCHEMA, partition_by=(), expected=self.stored, end=batch.end
            )
            self.checkpoint = self.stored = batch.end
        return time.perf_counter() - started


def table_shape(path: str, storage: dict[str, str]) -> tuple[int, int]:
    from deltalake import DeltaTable

    table = DeltaTable(path, storage_options=storage or None)
    files = len(table.file_uris())
    if path.startswith("s3://"):
        bucket, _, prefix = path.removeprefix("s3://").partition("/")
        s3 = aws.client(aws.AwsOptions(region="us-east-1", endpoint_url=storage["AWS_ENDPOINT_URL"]), "s3")
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/_delta_log/")
        logs = sum(len(page.get("Contents", [])) for page in pages)
    else:
        logs = len(list(Path(path, "_delta_log").iterdir()))
    return files, logs


@dataclass
class Seen:
    """What a variant measured so far: each capture commit's seconds, each ingest step's (commit number,
    seconds); with --count-requests each commit's (S3 requests, listed keys), each step's requests."""

    capture: list[float] = field(default_factory=list)
    ingest: list[tuple[int, float]] = field(default_factory=list)
    requests: list[tuple[int, int]] = field(default_factory=list)
    ingest_requests: list[tuple[int, int]] = field(default_factory=list)


def take_mark(name: str, i: int, seen: Seen, metadata_path: str, storage: dict[str, str], block: int) -> Mark:
    """The figures at commit `i`: the last `block` capture commits, the ingest steps in the same stretch
    (5 blocks), the metadata table's shape; printed as they are taken."""
    stretch = [t for n, t in seen.ingest if n > i - block * 5]
    files, logs = table_shape(metadata_path, storage)
    counted = seen.requests[-block:]
    ingest_counted = [r for n, r in seen.ingest_requests if n > i - block * 5]
    mark = Mark(
        i,
        ms(seen.capture[-block:], 0.5),
        ms(seen.capture[-block:], 0.99),
        ms(stretch, 0.5) if stretch else None,
        files,
        logs,
        median(r for r, _ in counted) if counted else None,
        median(k for _, k in counted) if counted else None,
        median(ingest_counted) if ingest_counted else None,
    )
    ingest_text = f"{mark.ingest_p50:8.1f}" if mark.ingest_p50 is not None else "       -"
    counted_text = (
        f"  S3 requests/commit {mark.requests:.0f}, keys listed/commit {mark.listed_keys:.0f}, "
        f"requests/ingest step {mark.ingest_requests or 0:.0f}"
        if mark.requests is not None
        else ""
    )
    print(
        f"{name:10s} {i:7d} commits: capture p50 {mark.capture_p50:7.1f} ms  p99 "
        f"{mark.capture_p99:7.1f} ms  ingest p50 {ingest_text} ms  metadata files {files:6d}  "
        f"log entries {logs:6d}{counted_text}  ({load_text()})",
        flush=True,
    )
    return mark


def run_variant(name: str, store: Store, args: argparse.Namespace) -> Variant:
    maintained = name.endswith("on")
    budget = args.minutes if maintained else args.off_minutes
    deadline = time.monotonic() + 60 * budget if budget else float("inf")
    commits = args.commits if maintained else min(args.commits, args.off_commits)
    marks = sorted(m for m in args.marks if m <= commits) or [commits]
    metadata_path, target_path = store.path(name, "metadata"), store.path(name, "target")
    storage, options, counter = store.storage, store.options, store.counter
    # As capture opens it: with the window's ids in memory (the default of
    # s3events.metadata.dedupe.ids.in.memory), a batch of new events is appended and only a batch holding a
    # known id is MERGEd; --merge-every-commit measures the setting's `false`.
    metadata = MetadataTable(
        metadata_path, storage_options=storage, dedupe_window=WINDOW, known_ids=not args.merge_every_commit
    )
    ingest = Ingest(metadata_path, target_path, storage, options)
    workload = Workload(args.seed)
    clock = SimulatedClock()
    periodic = PeriodicMaintenance(
        settings_for(metadata_path, options),
        [TableToMaintain("metadata", metadata_path), TableToMaintain("target:bench", target_path)],
        clock=clock,
    )
    variant, seen = Variant(name), Seen()
    for i in range(1, commits + 1):
        records = workload.cycle()
        if counter is not None:
            counter.reset()
        started = time.perf_counter()
        metadata.commit(records, custom_metadata={"s3events.writer": "benchmark"})
        seen.capture.append(time.perf_counter() - started)
        if counter is not None:
            stats = counter.stats()
            seen.requests.append((stats["requests"], stats["listed_keys"]))
        if i % args.ingest_every == 0:
            if counter is not None:
                counter.reset()
            seen.ingest.append((i, ingest.step()))
            if counter is not None:
                seen.ingest_requests.append((i, counter.stats()["requests"]))
        clock.now += args.seconds_per_commit
        if maintained:
            started = time.perf_counter()
            if periodic.run_if_due():
                variant.maintenance_seconds.append(time.perf_counter() - started)
        variant.stopped_early = time.monotonic() > deadline and i < commits
        if i in marks or variant.stopped_early:  # out of time: a last mark where it got
            variant.marks.append(take_mark(name, i, seen, metadata_path, storage, args.block))
        if variant.stopped_early:
            print(f"{name}: --minutes ran out after {i} commits", flush=True)
            break
    return variant


class SimulatedClock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def settings_for(metadata_path: str, options: aws.AwsOptions) -> Settings:
    conf = [f"s3events.metadata.table.path={metadata_path}"]
    if options.endpoint_url:
        conf += [f"s3events.aws.endpoint.url={options.endpoint_url}", "s3events.aws.region=us-east-1"]
    return load_settings(None, conf)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=20_000)
    parser.add_argument("--marks", type=int_list, default=[1000, 5000, 10_000, 20_000])
    parser.add_argument("--variants", default="on,off")
    parser.add_argument(
        "--endpoint",
        "--s3",
        dest="endpoint",
        choices=["local", "moto", "gofakes3", "both"],
        default="local",
        help="where the tables live: a local directory, moto_server, gofakes3, or local and moto",
    )
    parser.add_argument("--off-commits", type=int, default=3000)
    parser.add_argument("--seconds-per-commit", type=float, default=5.0)
    parser.add_argument("--ingest-every", type=int, default=20)
    parser.add_argument("--block", type=int, default=200)
    parser.add_argument("--target-file-bytes", type=int, default=128 << 20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--minutes",
        type=float,
        default=0.0,
        help="a time budget for each variant with maintenance: still going then, it takes a last mark and "
        "stops (0: none)",
    )
    parser.add_argument(
        "--off-minutes", type=float, default=0.0, help="the same for each variant without maintenance"
    )
    parser.add_argument(
        "--merge-every-commit",
        action="store_true",
        help="capture as with s3events.metadata.dedupe.ids.in.memory=false: every commit a MERGE over the "
        "dedupe window (default: the ids in memory, new events appended)",
    )
    parser.add_argument(
        "--count-requests",
        action="store_true",
        help="moto: count each capture commit's S3 requests and LISTed keys through a proxy",
    )
    add_common(parser)
    args = parser.parse_args()
    smoke(args, commits=60, marks=[30, 60], off_commits=60, ingest_every=10, block=20)
    run = Run.start("long_run", smoke=args.smoke)
    logging.basicConfig(level=logging.WARNING)
    results = []
    for kind in ("local", "moto") if args.endpoint == "both" else (args.endpoint,):
        with endpoint_for(kind, count_requests=args.count_requests) as store:
            for maintenance in args.variants.split(","):
                results.append(run_variant(f"{kind}-{maintenance}", store, args))
    print()
    print(
        "| variant | commits | capture p50 ms | capture p99 ms | ingest p50 ms | metadata files | log files "
        "| S3 requests / commit | keys listed / commit |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for variant in results:
        for m in variant.marks:
            ingest_text = f"{m.ingest_p50:.1f}" if m.ingest_p50 is not None else "-"
            counted = "- | -"
            if m.requests is not None and m.listed_keys is not None:
                counted = f"{m.requests:.0f} | {m.listed_keys:.0f}"
            print(
                f"| {variant.name} | {m.commits} | {m.capture_p50:.1f} | {m.capture_p99:.1f} | {ingest_text} "
                f"| {m.data_files} | {m.log_entries} | {counted} |"
            )
    print()
    for variant in results:
        first, last = variant.marks[0], variant.marks[-1]
        passes = variant.maintenance_seconds
        extra = f", {len(passes)} maintenance steps, median {median(passes):.2f} s" if passes else ""
        print(
            f"{variant.name}: capture p50 at {last.commits} commits / at {first.commits} = "
            f"{last.capture_p50 / first.capture_p50:.2f}x{extra}"
        )
        for m in variant.marks:
            figures: dict[str, float | None] = {"capture_p50_ms": round(m.capture_p50, 1)}
            figures |= {"capture_p99_ms": round(m.capture_p99, 1)}
            figures |= {"ingest_p50_ms": None if m.ingest_p50 is None else round(m.ingest_p50, 1)}
            figures |= {"metadata_files": m.data_files, "log_entries": m.log_entries}
            if m.requests is not None:
                figures |= {"s3_requests_per_commit": m.requests, "keys_listed_per_commit": m.listed_keys}
                figures |= {"s3_requests_per_ingest_step": m.ingest_requests}
            params = {
                "variant": variant.name,
                "commits": m.commits,
                "seconds_per_commit": args.seconds_per_commit,
            }
            params |= {"ingest_every": args.ingest_every, "block": args.block}
            params |= {"ids_in_memory": not args.merge_every_commit}
            mode = ", every commit a MERGE" if args.merge_every_commit else ""
            case = f"{variant.name}{mode}, {m.commits} commits"
            if variant.stopped_early and m is last:
                params["planned_commits"] = args.commits if variant.name.endswith("on") else args.off_commits
                case += " (where the time budget ran out)"
            run.add(case, params=params, figures=figures)
    run.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
