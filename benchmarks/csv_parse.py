"""What the CSV fast path's parse of one file costs against pyarrow's reader alone (A's), in CPU.

    .venv/bin/python benchmarks/csv_parse.py [--lines 20000] [--line-bytes 120] [--repeat 200]

One file of `ingest_throughput`'s CSV data (single-line, and with `--multi-line`'s quoted newlines),
parsed in this process, the contenders alternating call by call: **ours**, `csv_format.parse_csv` as a
fresh target's fast path runs it (every check that the rows are the line path's, the columns typed as
Spark's inference types them, the lineage columns); **A**, `pyarrow.csv.read_csv` with its own type
inference (multi-line: `newlines_in_values`), on its threads; **A1**, the same on one thread. Per file:
the median CPU milliseconds of this process (every thread) and wall milliseconds. No endpoint, no
Spark, no write: what `ingest_throughput`'s batches add around the parse (fetch, Parquet files, the
commit, the metadata table) is not here.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
import pyarrow.csv as pacsv

from benchmarks.harness import Run, add_common, median, smoke
from benchmarks.ingest_throughput import make_csv_file, make_multi_line_csv_file
from s3events.ingest.files.formats.csv_fields import CsvOptions
from s3events.ingest.files.formats.csv_format import parse_csv
from s3events.ingest.model import FileRef


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def contenders(data: bytes, multi_line: bool) -> dict[str, Callable[[], None]]:
    ref = FileRef("bench", "in/f.csv", "e", None, len(data), datetime.now(UTC), "ev", "created", 1)
    options = CsvOptions(multi_line=multi_line)
    parse = pacsv.ParseOptions(newlines_in_values=multi_line)

    def ours() -> None:
        parsed = parse_csv(data, ref, "e", known=pa.schema([]), declared=False, options=options)
        if parsed.table is None:
            raise SystemExit(f"ours declined the file: {parsed.reason}")

    def a(threads: bool) -> None:
        pacsv.read_csv(
            pa.py_buffer(data), read_options=pacsv.ReadOptions(use_threads=threads), parse_options=parse
        )

    return {"ours": ours, "a": lambda: a(True), "a1": lambda: a(False)}


def measure(calls: dict[str, Callable[[], None]], repeat: int) -> dict[str, tuple[float, float]]:
    """Median (CPU ms, wall ms) per contender, called in turn `repeat` times after one untimed call."""
    cpu: dict[str, list[float]] = {k: [] for k in calls}
    wall: dict[str, list[float]] = {k: [] for k in calls}
    for call in calls.values():
        call()
    for _ in range(repeat):
        for name, call in calls.items():
            c, w = cpu_seconds(), time.perf_counter()
            call()
            wall[name].append((time.perf_counter() - w) * 1000)
            cpu[name].append((cpu_seconds() - c) * 1000)
    return {k: (median(cpu[k]), median(wall[k])) for k in calls}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=20_000, help="data lines per file (default 20000)")
    parser.add_argument("--line-bytes", type=int, default=120, help="bytes per line (default 120)")
    parser.add_argument("--repeat", type=int, default=200, help="calls of each contender (default 200)")
    add_common(parser)
    args = parser.parse_args()
    smoke(args, lines=200, repeat=3)
    run = Run.start("csv_parse", smoke=args.smoke)
    for multi_line, make in ((False, make_csv_file), (True, make_multi_line_csv_file)):
        data = make(0, args.lines, args.line_bytes)
        got = measure(contenders(data, multi_line), args.repeat)
        (ours_cpu, ours_wall), (a_cpu, a_wall), (a1_cpu, _) = got["ours"], got["a"], got["a1"]
        case = f"csv{' multi-line' if multi_line else ''}, one file of {args.lines:,} lines"
        print(
            f"{case} ({len(data) / 1e6:.1f} MB): CPU ms ours {ours_cpu:.2f}, A {a_cpu:.2f}, A1 {a1_cpu:.2f} "
            f"(A/ours {a_cpu / ours_cpu:.2f}); wall ms ours {ours_wall:.2f}, A {a_wall:.2f}"
        )
        figures = {
            "ours_cpu_ms": round(ours_cpu, 2),
            "a_cpu_ms": round(a_cpu, 2),
            "a1_cpu_ms": round(a1_cpu, 2),
        }
        figures |= {"ours_wall_ms": round(ours_wall, 2), "a_wall_ms": round(a_wall, 2)}
        figures |= {
            "ours_vs_a_cpu_x": round(a_cpu / ours_cpu, 2),
            "ours_vs_a1_cpu_x": round(a1_cpu / ours_cpu, 2),
        }
        params = {"multi_line": multi_line, "lines": args.lines, "line_bytes": args.line_bytes}
        run.add(case, params=params | {"repeat": args.repeat}, figures=figures)
    run.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
