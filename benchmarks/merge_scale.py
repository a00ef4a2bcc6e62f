"""Merge mode at scale: one batch of K changed keys into targets of N rows; batch time and driver memory.

    nice -n 10 .venv/bin/python benchmarks/merge_scale.py [--sizes 1M,3M,10M] [--keys 100000]
        [--update-fraction 0.5] [--updates uniform|recent|oldest] [--files 10] [--rounds 3]

Set-up per target size N (not timed):
- a moto_server endpoint (`LocalEndpoint`), one bucket, a metadata table per size (events written with
  `MetadataTable.commit`, as `benchmarks/ingest_throughput.py` and the integration tests do: capture is not
  what is measured);
- the target's **first version comes from our own ingest path**: a seed file of 1,000 JSON lines
  (`id`, `seq`, `user`, `amount`, `country`, `note`) ingested by `run_ingest` in merge mode
  (`record.key=id`, `ordering.field=seq`), so the table's schema, lineage columns, properties (change data
  feed on) and checkpoint are exactly what ours writes. The remaining N - 1,000 rows are **appended with
  `write_deltalake` in chunks** (`--chunk`, default 1M rows, one commit each) in that table's own schema,
  lineage columns filled as ours would (`_source_file`, `_source_etag`, `_source_line`, `_event_time`,
  `_ingested_at`); ids are 0..N-1 in order, so each data file holds a contiguous id range;
- the batch: `--files` JSON-lines objects (PUT into moto) holding K distinct keys, `--update-fraction` of
  them existing ids and the rest new ids N, N+1, ...; all with `seq` 2 (newer than the target's 1), in one
  metadata commit after the checkpoint. `--updates uniform` (default) draws the existing ids uniformly
  from 0..N-1, so every data file of the target holds some (the worst case for time: a MERGE rewrites
  each file it matches a row in); `--updates recent` takes the most recent ids N-u..N-1, so one data file
  holds them all (the case where delta-rs's MERGE, scanning every file, held each untouched one in memory);
  `--updates oldest` takes the oldest ids 0..u-1: with the new ids, the batch's keys span the whole
  target while two data files hold them (one range from the lowest key to the highest scanned them all).

Before the first size's rounds, one untimed cycle of ours warms the session up. Measured per round, each
contender on its own hard-linked copy of the same target (data files linked, `_delta_log` copied:
delta-rs never rewrites a file in place):
- **ours**: the whole user-visible cycle, `run_ingest(settings, once=True, spark=spark)`: change feed ->
  plan -> GET the K-key objects from moto and parse them -> latest row per key -> `TargetTable.commit_merge`
  (delta-rs MERGE, checkpoint in the same commit). Which read path runs is the code's choice, not this
  benchmark's: the fast path (tasks reduce their files' rows to the latest per key, on driver threads for
  a batch under `driver.read.max.bytes`, else in a Spark job) or the line path (Spark reads, a window
  picks the latest row, `toArrow()` to the driver). `commit_merge` is timed on its own (wrapped,
  benchmark-side), so the report splits the cycle into the MERGE commit and the rest (the read and
  latest-row step). `max.files.per.batch` is `--files`: one round is one batch.
- **baseline A**: plain `DeltaTable.merge` of the same K Arrow rows (those ours handed to commit_merge,
  lineage columns included) into the same target, with the same clauses (`t.id = s.id`, update all when
  `s.seq >= t.seq`, insert all) and nothing else (ours adds the batch's key ranges as conditions on the
  target, so delta-rs skips the files outside it), in a fresh spawned process (so its peak RSS is its
  own); timed around the MERGE only (the rows are read from an Arrow IPC file under /tmp first).

Both are checked: the commit must report K x update-fraction rows updated and the rest inserted.

Memory: a sampling thread reads VmRSS of this process (the driver: Python, py4j, delta-rs) and of the
Spark JVM (the `java` child; local mode, so the executors live in it) every 20 ms. "peak" is the highest
driver RSS during the cycle (the kernel's VmHWM, reset through /proc/self/clear_refs before each cycle
when allowed, else the sampled maximum); "rise" is peak minus the RSS at the cycle's start (memory the
batch needed above what the process already held; malloc_trim(0) runs before each cycle). For A, peak is
the child's VmHWM and rise is that minus its RSS after reading the rows, before the MERGE.

Prints per round and medians per size, ratios ours/A, and how the medians grow from the smallest to the
largest size, with the load average (this machine has 2 cores shared with other work: wall times move
with it).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import pyarrow as pa

from benchmarks.harness import MemorySampler, Run, add_common, median, rss_bytes, smoke
from benchmarks.harness import load_text as load
from benchmarks.harness.baselines import delta_merge
from benchmarks.harness.endpoints import LOCAL_ENV, LocalEndpoint
from benchmarks.harness.procs import descendant, malloc_trim, reset_peak
from benchmarks.ingest_throughput import BUCKET, TARGET, ingest_settings, write_metadata
from s3events.infra import aws

SEED_ROWS = 1_000
COUNTRIES = ("DE", "FR", "US", "JP", "BR", "IN", "NG", "AU")
NOTE = "x" * 40
MB = 1 << 20


# -- data -------------------------------------------------------------------------------------------------


def json_lines(ids: np.ndarray, seq: int) -> bytes:
    """One JSON object a line per id (about 110 bytes each)."""
    return "".join(
        f'{{"id": {i}, "seq": {seq}, "user": "user-{i % 100003:06d}", "amount": {(i % 99991) / 100:.2f}, '
        f'"country": "{COUNTRIES[i % 8]}", "note": "{NOTE}"}}\n'
        for i in ids.tolist()
    ).encode()


def put_objects(s3: Any, prefix: str, parts: list[np.ndarray], seq: int) -> list[tuple[str, str, int]]:
    objects = []
    for n, ids in enumerate(parts):
        key = f"{prefix}part-{n:05d}.json"
        body = json_lines(ids, seq)
        etag = s3.put_object(Bucket=BUCKET, Key=key, Body=body)["ETag"].strip('"')
        objects.append((key, etag, len(body)))
    return objects


def rows_like(schema: pa.Schema, start: int, stop: int, chunk_no: int) -> pa.Table:
    """Rows start..stop-1 in the target's own schema, lineage filled as our ingest fills it."""
    n = stop - start
    ids = np.arange(start, stop, dtype=np.int64)
    now = datetime.now(UTC)
    users = pa.array([f"user-{u:06d}" for u in range(100003)])
    columns: dict[str, pa.Array] = {
        "id": pa.array(ids),
        "seq": pa.array(np.ones(n, dtype=np.int64)),
        "user": users.take(pa.array(ids % 100003)),
        "amount": pa.array((ids % 99991) / 100),
        "country": pa.array(COUNTRIES).take(pa.array(ids % 8)),
        "note": pa.repeat(pa.scalar(NOTE), n),
        "_source_file": pa.repeat(pa.scalar(f"s3://{BUCKET}/load/part-{chunk_no:05d}.json"), n),
        "_source_etag": pa.repeat(pa.scalar(f"etag-{chunk_no:05d}"), n),
        "_source_line": pa.array(np.arange(1, n + 1, dtype=np.int64)),
        "_event_time": pa.repeat(pa.scalar(now, pa.timestamp("us", tz="UTC")), n),
        "_ingested_at": pa.repeat(pa.scalar(now, pa.timestamp("us", tz="UTC")), n),
    }
    unknown = [f.name for f in schema if f.name not in columns]
    if unknown:
        raise SystemExit(f"the seeded target has columns this benchmark does not fill: {unknown}")
    return pa.table({f.name: columns[f.name].cast(f.type) for f in schema}, schema=schema)


def link_copy(src: Path, dst: Path) -> None:
    """A copy of a local Delta table: data files hard-linked, the log copied."""
    for root, _dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        in_log = rel.parts[:1] == ("_delta_log",)
        for name in files:
            (shutil.copy2 if in_log else os.link)(Path(root) / name, dst / rel / name)


def dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*.parquet")) / 1e6


# -- memory -----------------------------------------------------------------------------------------------


@dataclass
class Contender:
    wall: float
    peak: int  # bytes
    rise: int  # bytes above the RSS at the start
    merge_wall: float = 0.0  # ours: commit_merge alone
    merge_peak: int = 0  # ours: driver peak sampled during commit_merge
    jvm_peak: int = 0
    rows: pa.Table | None = field(default=None, repr=False)


@contextmanager
def timing_commit_merge() -> Iterator[list[tuple[float, float, pa.Table]]]:
    """Wrap TargetTable.commit_merge (benchmark-side): records (start, end, rows) of each call."""
    from s3events.ingest.target_table import TargetTable

    calls: list[tuple[float, float, pa.Table]] = []
    original: Callable[..., int] = TargetTable.commit_merge

    def timed(self: TargetTable, batch: Any, **kwargs: Any) -> int:
        started = time.perf_counter()
        try:
            return original(self, batch, **kwargs)
        finally:  # rows written by the tasks are read back from the files now committed, after the timing
            calls.append((started, time.perf_counter(), batch.rows()))

    TargetTable.commit_merge = timed  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        TargetTable.commit_merge = original  # type: ignore[method-assign]


def merge_settings(endpoint_url: str, metadata: str, target: Path, files: int, errors: Path) -> Any:
    return ingest_settings(
        endpoint_url,
        metadata,
        str(target),
        files,
        f"s3events.ingest.target.{TARGET}.mode=merge",
        f"s3events.ingest.target.{TARGET}.record.key=id",
        f"s3events.ingest.target.{TARGET}.ordering.field=seq",
        f"s3events.ingest.target.{TARGET}.error.table.path={errors}",
    )


def run_ours(settings: Any, spark: Any, sampler: MemorySampler, expected_rows: int) -> Contender:
    from s3events.ingest.service import run_ingest

    malloc_trim()
    exact = reset_peak()
    before = rss_bytes()
    with timing_commit_merge() as calls:
        started = time.perf_counter()
        totals = run_ingest(settings, once=True, spark=spark)
        ended = time.perf_counter()
    time.sleep(sampler.every * 2)  # a last sample
    if totals.rows != expected_rows or totals.failed or totals.errors or totals.batches != 1:
        raise SystemExit(f"ours: {totals} (expected {expected_rows} rows in one batch)")
    if len(calls) != 1:
        raise SystemExit(f"ours: {len(calls)} commit_merge calls")
    (m_start, m_end, rows) = calls[0]
    peaks = sampler.peaks(started, ended)
    sampled, jvm = peaks["driver"], peaks.get("jvm", 0)
    peak = max(rss_bytes(field_name="VmHWM"), sampled) if exact else sampled
    return Contender(
        wall=ended - started,
        peak=peak,
        rise=peak - before,
        merge_wall=m_end - m_start,
        merge_peak=sampler.peaks(m_start, m_end)["driver"],
        jvm_peak=jvm,
        rows=rows,
    )


def baseline_a(table_path: str, rows_path: str) -> tuple[float, int, int, dict[str, Any]]:
    """In a spawned child: plain DeltaTable.merge of the rows; (wall, VmHWM, RSS before, metrics)."""
    with pa.memory_map(rows_path) as source:
        rows = pa.ipc.open_file(source).read_all()
    before = rss_bytes()
    started = time.perf_counter()
    metrics = delta_merge(table_path, rows, "id", newer="seq")
    wall = time.perf_counter() - started
    return wall, rss_bytes(field_name="VmHWM"), before, metrics


def run_a(table_path: Path, rows_path: Path) -> tuple[Contender, dict[str, Any]]:
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        wall, peak, before, metrics = pool.submit(baseline_a, str(table_path), str(rows_path)).result()
    return Contender(wall=wall, peak=peak, rise=peak - before), metrics


def check_commit(name: str, table_path: Path, updated: int, inserted: int) -> None:
    from deltalake import DeltaTable

    table = DeltaTable(str(table_path))
    last = table.history(1)[0]
    metrics = last.get("operationMetrics", {})
    if last.get("operation") == "WRITE" and updated == 0:  # ours appends a batch of new keys only
        # the tasks' files committed as they are: no row metrics, so count the rows the version added
        before = DeltaTable(str(table_path), version=table.version() - 1)
        added = _held_rows(table) - _held_rows(before)
        if added != inserted:
            raise SystemExit(f"{name}: append added {added} rows, expected {inserted}")
        return
    got = (int(metrics.get("num_target_rows_updated", -1)), int(metrics.get("num_target_rows_inserted", -1)))
    if got != (updated, inserted):
        raise SystemExit(f"{name}: MERGE updated/inserted {got}, expected {(updated, inserted)}")


def _held_rows(table: Any) -> int:
    return int(pa.table(table.get_add_actions(flatten=True)).column("num_records").to_numpy().sum())


# -- one size ---------------------------------------------------------------------------------------------


@dataclass
class SizeResult:
    size: int
    files: int
    mb: float
    ours: list[Contender]
    a: list[Contender]


def measure_size(
    size: int,
    args: argparse.Namespace,
    work: Path,
    s3: Any,
    endpoint_url: str,
    spark: Any,
    sampler: MemorySampler,
    *,
    warm_up: bool,
) -> SizeResult:
    from deltalake import DeltaTable, write_deltalake

    here = work / f"n{size}"
    here.mkdir()
    metadata = str(here / "metadata")
    base = here / "target"
    started = time.perf_counter()

    # The first version through our own ingest path (merge mode): schema, lineage, properties, checkpoint.
    seed = put_objects(s3, f"n{size}/seed/", [np.arange(SEED_ROWS, dtype=np.int64)], seq=1)
    write_metadata(metadata, seed)
    seeded = run_ours(
        merge_settings(endpoint_url, metadata, base, 1, here / "seed-errors"), spark, sampler, SEED_ROWS
    )
    schema = seeded.rows.schema if seeded.rows is not None else pa.schema(DeltaTable(str(base)).schema())
    for chunk_no, start in enumerate(range(SEED_ROWS, size, args.chunk)):
        write_deltalake(
            str(base), rows_like(schema, start, min(size, start + args.chunk), chunk_no), mode="append"
        )
    files = len(DeltaTable(str(base)).file_uris())
    mb = dir_mb(base)

    rng = np.random.default_rng(size)
    updates = int(args.keys * args.update_fraction)
    inserts = args.keys - updates
    existing = {
        "uniform": lambda: rng.choice(size, updates, replace=False).astype(np.int64),
        "recent": lambda: np.arange(size - updates, size, dtype=np.int64),
        "oldest": lambda: np.arange(updates, dtype=np.int64),
    }[args.updates]()
    keys = np.concatenate(
        [
            existing,
            np.arange(size, size + inserts, dtype=np.int64),
        ]
    )
    rng.shuffle(keys)
    batch = put_objects(s3, f"n{size}/batch/", np.array_split(keys, args.files), seq=2)
    write_metadata(metadata, batch)
    batch_mb = sum(o[2] for o in batch) / 1e6
    print(
        f"target {size:,} rows: {files} data files, {mb:.0f} MB Parquet; batch {args.keys:,} keys "
        f"({updates:,} updates, {inserts:,} new) in {args.files} objects, {batch_mb:.1f} MB "
        f"(set-up {time.perf_counter() - started:.0f} s; {load()})",
        flush=True,
    )

    rows_path = here / "batch-rows.arrow"
    if warm_up:  # not timed: the first full-size cycle of the session (JIT, Python workers, first uses)
        copy = here / "warm-up"
        link_copy(base, copy)
        run_ours(
            merge_settings(endpoint_url, metadata, copy, args.files, here / "warm-up-errors"),
            spark,
            sampler,
            args.keys,
        )
        shutil.rmtree(copy)
    ours: list[Contender] = []
    a: list[Contender] = []
    for r in range(1, args.rounds + 1):
        copy = here / f"ours-{r}"
        link_copy(base, copy)
        settings = merge_settings(endpoint_url, metadata, copy, args.files, here / f"ours-{r}-errors")
        run = run_ours(settings, spark, sampler, args.keys)
        check_commit("ours", copy, updates, inserts)
        if r == 1 and run.rows is not None:
            with pa.OSFile(str(rows_path), "wb") as sink, pa.ipc.new_file(sink, run.rows.schema) as writer:
                writer.write_table(run.rows)
        run.rows = None
        ours.append(run)
        shutil.rmtree(copy)

        copy = here / f"a-{r}"
        link_copy(base, copy)
        a_run, metrics = run_a(copy, rows_path)
        got = (metrics.get("num_target_rows_updated"), metrics.get("num_target_rows_inserted"))
        if got != (updates, inserts):
            raise SystemExit(f"A: MERGE updated/inserted {got}, expected {(updates, inserts)}")
        a.append(a_run)
        shutil.rmtree(copy)
        print(
            f"  round {r}: ours {run.wall:6.1f} s (commit_merge {run.merge_wall:5.1f} s, rest "
            f"{run.wall - run.merge_wall:5.1f} s), driver peak {run.peak / MB:5.0f} MB "
            f"(rise {run.rise / MB:5.0f}, during commit_merge {run.merge_peak / MB:5.0f}), "
            f"JVM peak {run.jvm_peak / MB:5.0f} MB | A {a_run.wall:6.1f} s, peak {a_run.peak / MB:5.0f} MB "
            f"(rise {a_run.rise / MB:5.0f}) | {load()}",
            flush=True,
        )
    shutil.rmtree(here)
    return SizeResult(size, files, mb, ours, a)


# -- report -----------------------------------------------------------------------------------------------


def med(runs: list[Contender], attr: str) -> float:
    return median(getattr(r, attr) for r in runs)


def report(results: list[SizeResult], args: argparse.Namespace) -> None:
    print(
        f"\nmedians of {args.rounds} rounds, batch of {args.keys:,} keys "
        f"({args.update_fraction:.0%} updates):"
    )
    header = (
        "| target rows | data files | ours cycle s | of which commit_merge s | A merge s | ours/A time "
        "| driver peak MB (rise) | A peak MB (rise) | ours/A peak | JVM peak MB |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for s in results:
        o_wall, a_wall = med(s.ours, "wall"), med(s.a, "wall")
        o_peak, a_peak = med(s.ours, "peak"), med(s.a, "peak")
        print(
            f"| {s.size:,} | {s.files} | {o_wall:.1f} | {med(s.ours, 'merge_wall'):.1f} | {a_wall:.1f} "
            f"| {o_wall / a_wall:.2f} | {o_peak / MB:.0f} ({med(s.ours, 'rise') / MB:.0f}) "
            f"| {a_peak / MB:.0f} ({med(s.a, 'rise') / MB:.0f}) | {o_peak / a_peak:.2f} "
            f"| {med(s.ours, 'jvm_peak') / MB:.0f} |"
        )
    if len(results) > 1:
        small, large = results[0], results[-1]
        grow = large.size / small.size
        print(f"growth from {small.size:,} to {large.size:,} rows (x{grow:.0f} the target):")
        for label, runs, attr in (
            ("ours cycle time", "ours", "wall"),
            ("ours commit_merge time", "ours", "merge_wall"),
            ("A merge time", "a", "wall"),
            ("ours driver peak", "ours", "peak"),
            ("ours driver rise", "ours", "rise"),
            ("A peak", "a", "peak"),
            ("A rise", "a", "rise"),
            ("JVM peak", "ours", "jvm_peak"),
        ):
            lo, hi = med(getattr(small, runs), attr), med(getattr(large, runs), attr)
            print(f"  {label:24s} x{hi / lo:.2f}" if lo > 0 else f"  {label:24s} n/a")
    print(f"({load()})", flush=True)


def parse_size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("KM")) * scale)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sizes", default="1M,3M,10M", help="target sizes in rows (default 1M,3M,10M)")
    parser.add_argument("--keys", type=int, default=100_000, help="changed keys per batch (default 100000)")
    parser.add_argument("--update-fraction", type=float, default=0.5, help="existing keys among them (0.5)")
    parser.add_argument(
        "--updates",
        choices=("uniform", "recent", "oldest"),
        default="uniform",
        help="which existing keys change: drawn from all ids (every data file touched), the most recent "
        "ids (one data file touched) or the oldest (one data file, the new ids at the other end)",
    )
    parser.add_argument("--files", type=int, default=10, help="objects the batch's rows come in (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per size (default 3)")
    parser.add_argument("--chunk", type=int, default=1_000_000, help="rows per write_deltalake append")
    add_common(parser)
    args = parser.parse_args()
    smoke(args, sizes="20K", keys=2_000, files=2, rounds=1, chunk=10_000)
    run = Run.start("merge_scale", smoke=args.smoke)
    sizes = sorted(parse_size(s) for s in args.sizes.split(","))
    if sizes[0] <= SEED_ROWS:
        raise SystemExit(f"sizes must be above {SEED_ROWS}")
    logging.basicConfig(level=logging.WARNING)
    os.environ.update(LOCAL_ENV)

    from s3events.infra.spark import get_spark

    with LocalEndpoint() as endpoint, tempfile.TemporaryDirectory(prefix="merge-scale-", dir="/tmp") as tmp:
        work = Path(tmp)
        s3 = aws.client(aws.AwsOptions(region="us-east-1", endpoint_url=endpoint.url), "s3")
        s3.create_bucket(Bucket=BUCKET)
        started = time.perf_counter()
        spark = get_spark(
            master="local[2]",
            app_name="s3events-merge-bench",
            conf={"spark.ui.showConsoleProgress": "false"},
        )
        spark.sparkContext.setLogLevel("ERROR")
        spark.range(10).count()
        jvm = descendant("jvm")
        print(
            f"spark local[2] started in {time.perf_counter() - started:.1f} s (JVM pid {jvm}, "
            f"driver RSS {rss_bytes() / MB:.0f} MB, "
            f"VmHWM reset {'allowed' if reset_peak() else 'not allowed'}); "
            f"{load()}",
            flush=True,
        )
        results: list[SizeResult] = []
        pids: dict[str, int | str] = {"driver": "self"} | ({"jvm": jvm} if jvm else {})
        with MemorySampler(pids, every=0.02) as sampler:
            for size in sizes:
                results.append(
                    measure_size(size, args, work, s3, endpoint.url, spark, sampler, warm_up=not results)
                )
        report(results, args)
        for result in results:
            o_wall, a_wall = med(result.ours, "wall"), med(result.a, "wall")
            params = {"target_rows": result.size, "keys": args.keys, "update_fraction": args.update_fraction}
            params |= {"updates": args.updates, "files": args.files, "rounds": args.rounds}
            figures = {
                "ours_s": round(o_wall, 2),
                "ours_commit_merge_s": round(med(result.ours, "merge_wall"), 2),
                "a_s": round(a_wall, 2),
                "ours_vs_a_x": round(a_wall / o_wall, 2),
                "driver_peak_mb": round(med(result.ours, "peak") / MB),
                "driver_rise_mb": round(med(result.ours, "rise") / MB),
                "a_peak_mb": round(med(result.a, "peak") / MB),
                "jvm_peak_mb": round(med(result.ours, "jvm_peak") / MB),
                "target_files": result.files,
            }
            case = f"{args.keys:,} keys, {args.update_fraction:.0%} updates ({args.updates})"
            case += f", {result.size:,} rows"
            run.add(case, params=params, figures=figures)
        run.save()
        sys.stdout.flush()
        spark.stop()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown (delta-rs readers can abort there; see ARCHITECTURE.md)


if __name__ == "__main__":
    main()
