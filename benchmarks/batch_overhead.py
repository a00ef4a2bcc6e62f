"""A batch's target-side table work as the target's log grows: kept table handles against opening each time.

    .venv/bin/python benchmarks/batch_overhead.py [--files 1000,10000,50000] [--batches 15]

Per size N, a local target table is created whose log adds N data files (the add actions carry
statistics, as ours write them; the files themselves are never read), then checkpointed. Then `--batches`
tiny batches go through what the ingest cycle does on the target for each: `TargetTable.checkpoint()`
(the cycle's position), `schema()`, `commit_append` of one real one-row data file (its guard reads the
stored checkpoint, `commit_files` commits and reads its version back) and `checkpoint()` again (the next
cycle). Two contenders, alternating batch by batch on two copies of the table:

- **kept**: one `TargetTable`, whose `delta.TableHandle` is opened once and brought up to date with
  `update_incremental` (the commits since its last use);
- **open each time**: the same, with the handle forgotten before every step, so each step opens the
  table afresh, reading the log from its checkpoint (what every step did before the handles).

Printed per size: the median and p90 milliseconds per batch of each and the ratio. Local tables only: on
S3 an open is also several requests (LIST of the log, GETs of `_last_checkpoint`, the checkpoint and the
commits since), so the gap there is wider than here.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa

from benchmarks.harness import Run, add_common, median, percentile, ratio, smoke
from s3events.infra import delta
from s3events.infra.aws import AwsOptions
from s3events.infra.delta_commit import commit_files
from s3events.infra.parquet_files import WrittenFile, write_data_file
from s3events.ingest.model import Checkpoint
from s3events.ingest.target_table import TARGET_SCHEMA_VERSION, TargetTable

APP_ID = "s3events.ingest/bench"
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def make_target(path: Path, files: int) -> None:
    """A target whose log adds `files` data files with statistics, then a checkpoint."""
    added = [
        WrittenFile(
            path=f"part-{i:07d}.parquet",
            size=1000,
            num_records=10,
            partition_values={},
            modification_time=0,
            stats=json.dumps(
                {
                    "numRecords": 10,
                    "minValues": {"id": 10 * i, "v": "a"},
                    "maxValues": {"id": 10 * i + 9, "v": "z"},
                    "nullCount": {"id": 0, "v": 0},
                }
            ),
        )
        for i in range(files)
    ]
    commit_files(
        str(path),
        added,
        schema=SCHEMA,
        partition_by=[],
        storage_options={},
        transactions={},
        configuration=delta.table_properties("target", TARGET_SCHEMA_VERSION),
    )
    delta.open_table(str(path), {}).create_checkpoint()  # type: ignore[union-attr]


def same(table: TargetTable) -> TargetTable:
    return table


def one_batch(table: Callable[[], TargetTable], n: int) -> float:
    """The cycle's target-side steps for batch `n` (one one-row file), each on `table()`; seconds."""
    written = write_data_file(
        [pa.table({"id": [n], "v": ["x"]})],
        table_uri=table().path,
        schema=SCHEMA,
        options=AwsOptions(region="us-east-1"),
    )
    assert written is not None
    started = time.perf_counter()
    stored = table().checkpoint()
    table().schema()
    table().commit_append([written], schema=SCHEMA, partition_by=(), expected=stored, end=Checkpoint(n, 0))
    table().checkpoint()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument(
        "--files", default="1000,10000,50000", help="data files in the log (default 1000,10000,50000)"
    )
    parser.add_argument("--batches", type=int, default=15, help="batches per contender (default 15)")
    add_common(parser)
    args = parser.parse_args()
    smoke(args, files="100,1000", batches=3)
    run = Run.start("batch_overhead", smoke=args.smoke)
    with tempfile.TemporaryDirectory(prefix="batch-overhead-") as tmp:
        for files in (int(f) for f in args.files.split(",")):
            base = Path(tmp) / f"base-{files}"
            make_target(base, files)
            kept_path, fresh_path = Path(tmp) / f"kept-{files}", Path(tmp) / f"fresh-{files}"
            shutil.copytree(base, kept_path)
            shutil.copytree(base, fresh_path)
            kept = TargetTable(str(kept_path), APP_ID, storage_options={})

            def fresh(path: str = str(fresh_path)) -> TargetTable:  # a new table object opens the table
                return TargetTable(path, APP_ID, storage_options={})

            times: dict[str, list[float]] = {"kept": [], "open each time": []}
            for n in range(1, args.batches + 1):
                times["kept"].append(one_batch(partial(same, kept), n))
                times["open each time"].append(one_batch(fresh, n))
            line = []
            for name, values in times.items():
                p90 = percentile(values, 0.9)
                line.append(f"{name} {median(values) * 1e3:6.1f} ms (p90 {p90 * 1e3:6.1f})")
            opened = ratio(median(times["open each time"]), median(times["kept"]))
            figures = {"kept_ms": round(median(times["kept"]) * 1e3, 1)}
            figures |= {"open_each_time_ms": round(median(times["open each time"]) * 1e3, 1)}
            run.add(
                f"{files:,} data files",
                params={"files": files, "batches": args.batches},
                figures=figures | {"open_vs_kept_x": round(opened, 2)},
            )
            print(
                f"{files:>7,} files in the log: "
                + " | ".join(line)
                + f" | open each time / kept {opened:.2f}x"
            )
            shutil.rmtree(base)
    run.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
