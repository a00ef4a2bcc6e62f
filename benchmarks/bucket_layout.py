"""Why the metadata table has 64 identity buckets: one capture MERGE against layouts of one table.

    .venv/bin/python benchmarks/bucket_layout.py [--rows 1000000] [--buckets 0,16,64,256]
        [--small-per-bucket 1,4] [--repeats 12] [--seed 1]

A table holding `--rows` rows captured within the dedupe window (one large write), then `small` small
one-row files per bucket on average (what a few commits leave between compactions), then the median of
`--repeats` 5-event MERGEs of new ids: the insert-if-absent MERGE capture runs (join on event_id, the
window's `captured_at` bound, and with buckets the join on `id_bucket`, which delta-rs expands to the
batch's exact buckets). 0 buckets is the unpartitioned layout of schema version 1, the baseline every
ratio is against, measured in the same run. More buckets mean fewer rows read per MERGE and more files in
the snapshot, which delta-rs pays for in every commit too.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from benchmarks.harness import Run, add_common, median, smoke
from benchmarks.harness.timing import timed

TS = pa.timestamp("us", tz="UTC")


def new_ids(n: int, rng: random.Random) -> list[str]:
    return [hashlib.sha256(str(rng.random()).encode()).hexdigest() for _ in range(n)]


def rows(ids: list[str], buckets: int) -> pa.Table:
    now = datetime.now(UTC)
    table = pa.table(
        {
            "event_id": ids,
            "bucket": ["landing"] * len(ids),
            "key": [f"in/{i}.json" for i in ids],
            "size": [1] * len(ids),
            "event_kind": ["created"] * len(ids),
            "event_time": pa.array([now] * len(ids), TS),
            "captured_at": pa.array([now] * len(ids), TS),
        }
    )
    if buckets:
        names = [f"{int(i[:2], 16) % buckets:02x}" for i in ids]
        table = table.append_column("id_bucket", pa.array(names))
    return table


def measure(root: str, n_rows: int, buckets: int, small: int, repeats: int, seed: int) -> tuple[float, int]:
    path = f"{root}/b{buckets}-s{small}"
    rng = random.Random(seed)
    partition_by = ["id_bucket"] if buckets else None
    write_deltalake(path, rows(new_ids(n_rows, rng), buckets), partition_by=partition_by)
    for _ in range(max(buckets, 1) * small):
        write_deltalake(path, rows(new_ids(1, rng), buckets), mode="append", partition_by=partition_by)
    since = (datetime.now(UTC) - timedelta(days=15)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    predicate = f"t.captured_at >= '{since}' AND t.event_id = s.event_id"
    if buckets:
        predicate = f"t.id_bucket = s.id_bucket AND {predicate}"
    times = []
    for _ in range(repeats):
        table = DeltaTable(path)
        batch = rows(new_ids(5, rng), buckets)
        merger = table.merge(
            batch, predicate=predicate, source_alias="s", target_alias="t", streamed_exec=False
        )
        times += timed(merger.when_not_matched_insert_all().execute)
    return median(times) * 1000, len(DeltaTable(path).file_uris())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--buckets", default="0,16,64,256")
    parser.add_argument("--small-per-bucket", default="1,4")
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--seed", type=int, default=1)
    add_common(parser)
    args = parser.parse_args()
    smoke(args, rows=2_000, buckets="0,4", small_per_bucket="1", repeats=2)
    run = Run.start("bucket_layout", smoke=args.smoke)
    print("| buckets | small files per bucket | files in the table | 5-event MERGE p50 | vs unbucketed |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as root:
        baseline = None
        for buckets in (int(b) for b in args.buckets.split(",")):
            for small in (int(s) for s in args.small_per_bucket.split(",")):
                p50, files = measure(root, args.rows, buckets, small, args.repeats, args.seed)
                if buckets == 0 and baseline is None:
                    baseline = p50
                ratio = f"{p50 / baseline:.2f}x" if baseline else "-"
                print(f"| {buckets or 'none'} | {small} | {files} | {p50:.0f} ms | {ratio} |", flush=True)
                params = {"rows": args.rows, "buckets": buckets, "small_per_bucket": small}
                figures = {"merge_p50_ms": round(p50, 1), "files": files}
                if baseline:
                    figures["vs_unbucketed_x"] = round(p50 / baseline, 2)
                run.add(
                    f"{buckets or 'no'} buckets, {small} small files each", params=params, figures=figures
                )
    run.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
