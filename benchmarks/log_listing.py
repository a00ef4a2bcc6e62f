"""What a long `_delta_log` costs a local table: open and update time against the number of log entries.

    .venv/bin/python benchmarks/log_listing.py [--entries 1000,5000,20000] [--repeat 30]

Each table holds one data file and N commits (commitInfo-only entries written directly, then a checkpoint
at the last version, as delta-rs would make every 100 commits), so an open reads the same checkpoint and
no JSON commit whatever N is: what grows is only the listing. object_store's local file system lists
`_delta_log` from a version by walking the whole directory, so the time grows with N; on S3 the listing
starts after a version (`start-after`) and stays flat. Printed: median open, median `update()` of an
open table (what capture does before each commit), and a plain `os.listdir` of the directory, each with
its ratio to the smallest N.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from benchmarks.harness import Run, add_common, int_list, median, smoke
from benchmarks.harness.timing import timed


def build(path: str, entries: int) -> None:
    write_deltalake(path, pa.table({"a": [1]}))
    log = os.path.join(path, "_delta_log")
    commit = json.dumps({"commitInfo": {"timestamp": 1, "operation": "WRITE"}}) + "\n"
    for version in range(1, entries):
        with open(os.path.join(log, f"{version:020d}.json"), "w") as out:
            out.write(commit)
    DeltaTable(path).create_checkpoint()


def median_ms(call: Callable[[], object], repeat: int) -> float:
    return median(timed(call, repeat)) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int_list, default=[1000, 5000, 20000])
    parser.add_argument("--repeat", type=int, default=30)
    add_common(parser)
    args = parser.parse_args()
    smoke(args, entries=[100, 500], repeat=3)
    run = Run.start("log_listing", smoke=args.smoke)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for entries in args.entries:
            path = os.path.join(tmp, f"t{entries}")
            build(path, entries)
            table = DeltaTable(path)
            rows.append(
                (
                    entries,
                    median_ms(partial(DeltaTable, path), args.repeat),
                    median_ms(table.update_incremental, args.repeat),
                    median_ms(partial(os.listdir, os.path.join(path, "_delta_log")), args.repeat),
                )
            )
    base = rows[0]
    print("| log entries | open ms | update ms | listdir ms | open / first | update / first |")
    print("|---|---|---|---|---|---|")
    for entries, opened, updated, listed in rows:
        print(
            f"| {entries:,} | {opened:.1f} | {updated:.1f} | {listed:.1f} | {opened / base[1]:.2f} "
            f"| {updated / base[2]:.2f} |"
        )
        figures = {
            "open_ms": round(opened, 1),
            "update_ms": round(updated, 1),
            "listdir_ms": round(listed, 1),
        }
        figures |= {
            "open_vs_first_x": round(opened / base[1], 2),
            "update_vs_first_x": round(updated / base[2], 2),
        }
        run.add(
            f"{entries:,} log entries", params={"entries": entries, "repeat": args.repeat}, figures=figures
        )
    run.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
