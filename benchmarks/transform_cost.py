"""What a SQL transform costs on the driver's route, part by part, against a plain batch's work.

    .venv/bin/python -m benchmarks.transform_cost [--formats json,csv] [--files 8] [--lines 20000]
        [--line-bytes 120] [--rounds 5] [--warm 3] [--sql "SELECT ... FROM src ..."] [--smoke]

The same local files (`ingest_throughput`'s data: JSON lines, or CSV with a header) go through each
contender in every round, in an order that alternates between rounds; the figures are medians over the
rounds of wall and CPU seconds (`procs.Measure`: this process, the Spark JVM and Spark's Python workers
apart). No S3: fetching the objects costs every contender the same and is left out.

- **a** — the plain batch's work: the fast path's parser of the format and `post_parse.finish` (lineage
  columns, `_ingested_at`) on two threads, one Arrow table, written as Parquet by the product's writer
  (`parquet_files.write_partitioned`) on up to one thread per core, as the driver's route writes.
- **b** — a, then the table into the JVM as Arrow (`createDataFrame`, `localRelationThreshold=0` as the
  transform's session sets it) and `count()`: the transfer in alone.
- **c** — today's driver route: parse, `createDataFrame`, the transform (`Transform.frame_of`: the SQL
  and the service's plan rewrite), back as Arrow (`toArrow`), written by pyarrow as in a. Its phases are
  measured apart too: parse, into the JVM, plan, run and back, write.
- **c+knob** — c with one Spark setting of the transform's session changed: `maxRecordsPerBatch=100000`
  (Arrow batches of 100,000 rows instead of 10,000), `useLargeVarTypes=true`, `wholeStage=false`.
- **d** — c, but Spark's own Parquet writer writes the transform's rows (`df.write.parquet` into a
  scratch folder): nothing comes back to Python.
- **d+stats** — d, then each file Spark wrote read back by pyarrow and its Delta statistics computed by
  `file_stats.stats_of` (what delta-rs would commit the files with: exact bounds, not Spark's).
- **e** — no Python at all: Spark's JSON / CSV reader (`spark.read`, schema inferred) → the same SQL
  (as written: without the service's plan rewrite) → Spark's Parquet writer. Spark's reader gives no
  line numbers, so `_source_line` is absent and `_event_time` a constant here; its rows are not the fast
  path's (types, error rows): a bound on what Spark alone costs, not a route the product could take as
  it is.
- **f** — with the default SQL only: a, plus its cast, date and filter done by `pyarrow.compute` on the
  parsed table before the write. Not Spark's semantics (pyarrow's casts round and fail otherwise; the
  date is the string's first ten characters): a bound on what evaluating the SQL without the JVM costs.
- **g** — the transform's Arrow route (docs/transforms.md): a, with the Arrow plan that Spark's
  optimized plan of the SQL translates to evaluated on the parsed rows before the write (Spark's
  semantics; a SQL with no Arrow plan stops the run).

Every contender's output rows are checked against c's. Ratios are a's time over the contender's
(throughput, 1.0 = as fast as a plain batch; the product's goal is 0.8). Results: one record per format
in benchmarks/results/transform_cost.jsonl.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.harness import Measure, Run, add_common, load_text, median, ratio, smoke
from benchmarks.ingest_throughput import make_csv_file, make_file

SQL = {
    "json": "SELECT *, CAST(amount AS DECIMAL(18,2)) AS amount_d, to_date(ts) AS dt FROM src WHERE ok",
    "csv": (
        "SELECT *, CAST(amount AS DECIMAL(18,2)) AS amount_d, to_date(_event_time) AS dt FROM src WHERE ok"
    ),
}
KNOBS = {
    "c+batch100k": ("spark.sql.execution.arrow.maxRecordsPerBatch", "100000"),
    "c+largevar": ("spark.sql.execution.arrow.useLargeVarTypes", "true"),
    "c+nowholestage": ("spark.sql.codegen.wholeStage", "false"),
}
PHASES = ("parse", "into_jvm", "plan", "run_and_back", "write")
EVENT_TIME = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
SHARED_BYTES = 32 << 20  # source bytes per writing thread, as the driver's route shares a write


class Bench:
    """One format's files, their parser and the Spark session every contender uses."""

    def __init__(self, spark: Any, fmt: str, folder: Path, sql: str, files: int, lines: int, width: int):
        from s3events.config import load_settings
        from s3events.ingest.files.dispatch import fast_parser
        from s3events.ingest.model import FileRef
        from s3events.ingest.target import target_specs

        self.spark, self.fmt, self.folder, self.sql = spark, fmt, folder, sql
        make = make_file if fmt == "json" else make_csv_file
        self.paths = []
        for n in range(files):
            path = folder / "data" / f"part-{n:03d}.{fmt}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(make(n, lines, width))
            self.paths.append(path)
        self.bytes = sum(p.stat().st_size for p in self.paths)
        conf = ["s3events.ingest.targets=t", f"s3events.ingest.target.t.path={folder}/t"]
        conf += [f"s3events.ingest.target.t.format={fmt}"]
        [self.target] = target_specs(load_settings(None, conf))
        self.parser = fast_parser(self.target, None, None)
        self.refs = [
            FileRef("bench", p.name, f"etag-{i}", None, p.stat().st_size, EVENT_TIME, f"e{i}", "created", 1)
            for i, p in enumerate(self.paths)
        ]

    # -- the parts every contender is made of ---------------------------------------------------------

    def parse(self) -> pa.Table:
        """The fast path's parse of every file on two threads, finished, as one table."""
        from s3events.ingest.files import post_parse
        from s3events.ingest.files.formats.base import parse_or_decline

        def one(i: int) -> pa.Table:
            ref = self.refs[i]
            parsed = parse_or_decline(self.parser, self.paths[i].read_bytes(), ref, ref.etag, {})
            parts = parsed.parts if parsed.parts is not None else [parsed.table]
            if any(p is None for p in parts):
                raise SystemExit(f"the fast path declined {ref.key}: {parsed.reason}")
            finish = partial(post_parse.finish, key_columns=None, ingested_at=EVENT_TIME)
            return pa.concat_tables([finish(p, ref.uri) for p in parts])

        with ThreadPoolExecutor(max_workers=2) as pool:
            return pa.concat_tables(list(pool.map(one, range(len(self.refs)))), promote_options="permissive")

    def write(self, rows: pa.Table, name: str) -> int:
        """`rows` as Parquet data files by the product's writer, a slice per thread; rows written."""
        from s3events.infra.aws import AwsOptions
        from s3events.infra.parquet_files import write_partitioned

        out = self._fresh(name)
        slices = max(1, min(os.cpu_count() or 1, math.ceil(self.bytes / SHARED_BYTES), rows.num_rows))
        size = math.ceil(rows.num_rows / slices)
        parts = [rows.slice(i * size, size) for i in range(slices)]
        write = partial(
            write_partitioned, table_uri=str(out), schema=rows.schema, options=AwsOptions(), partition_by=()
        )
        with ThreadPoolExecutor(max_workers=len(parts)) as pool:
            return sum(f.num_records for written in pool.map(write, parts) for f in written)

    def transform(self, knob: tuple[str, str] | None = None) -> Any:
        from s3events.ingest.files.transform import Transform, TransformSpec

        made = Transform(self.spark, TransformSpec("bench.transform.sql", (self.sql,)))
        made.session.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        if knob is not None:
            made.session.conf.set(*knob)
        return made

    def into_jvm(self, session: Any, rows: pa.Table) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        return session.createDataFrame(rows, schema=from_arrow_schema(rows.schema))

    def spark_written(self, name: str) -> int:
        return sum(pq.read_metadata(p).num_rows for p in self.out_dir(name).glob("*.parquet"))

    def out_dir(self, name: str) -> Path:
        return self.folder / "out" / name

    def _fresh(self, name: str) -> Path:
        out = self.out_dir(name)
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        return out


# -- the contenders: each returns the rows it wrote ------------------------------------------------------


def plain(bench: Bench) -> int:
    return bench.write(bench.parse(), "a")


def counted(bench: Bench, transform: Any) -> int:
    rows = bench.parse()
    if bench.into_jvm(transform.session, rows).count() != rows.num_rows:
        raise SystemExit("b: Spark counted other rows than it was given")
    return bench.write(rows, "b")


def driver_route(
    bench: Bench, transform: Any, phases: dict[str, list[dict[str, float]]] | None = None
) -> int:
    """c: today's driver route, each phase measured apart when `phases` is given."""
    steps: list[tuple[str, Callable[[Any], Any]]] = [
        ("parse", lambda _: bench.parse()),
        ("into_jvm", lambda rows: bench.into_jvm(transform.session, rows)),
        ("plan", transform.frame_of),
        ("run_and_back", lambda frame: frame.toArrow()),
        ("write", lambda rows: bench.write(rows, "c")),
    ]
    value: Any = None
    for name, step in steps:
        with Measure() as measured:
            value = step(value)
        if phases is not None:
            phases.setdefault(name, []).append({"wall": measured.wall, **measured.split})
    return int(value)


def spark_writer(bench: Bench, transform: Any) -> int:
    frame = transform.frame_of(bench.into_jvm(transform.session, bench.parse()))
    frame.write.mode("overwrite").parquet(str(bench.out_dir("d")))
    return bench.spark_written("d")


def spark_writer_stats(bench: Bench, transform: Any) -> int:
    """d, then each file read back by pyarrow for the exact statistics a delta-rs commit would carry."""
    from s3events.infra.file_stats import stats_of

    spark_writer(bench, transform)
    tables = [pq.read_table(p) for p in sorted(bench.out_dir("d").glob("*.parquet"))]
    return sum(len(stats_of(t)) and t.num_rows for t in tables)


def spark_alone(bench: Bench, transform: Any) -> int:
    from pyspark.sql import functions as F

    reader = transform.session.read
    if bench.fmt == "csv":
        reader = reader.options(header="true", inferSchema="true")
    src = (
        reader.format(bench.fmt)
        .load([str(p) for p in bench.paths])
        .select(
            "*",
            F.col("_metadata.file_path").alias("_source_file"),
            F.lit(EVENT_TIME).alias("_event_time"),
            F.lit(EVENT_TIME).alias("_ingested_at"),
        )
    )
    src.createOrReplaceTempView("src")  # the SQL as it is: the lineage rewrite wants src's own columns
    transform.session.sql(bench.sql).write.mode("overwrite").parquet(str(bench.out_dir("e")))
    return bench.spark_written("e")


def by_pyarrow(bench: Bench) -> int:
    """f: the default SQL's work done by pyarrow.compute on the parsed table (a bound, not Spark's
    semantics: its casts round and fail otherwise, and the date is the string's first ten characters)."""
    import pyarrow.compute as pc

    rows = bench.parse()
    rows = rows.filter(pc.fill_null(rows["ok"], False))
    amount = pc.cast(rows["amount"], pa.decimal128(18, 2), safe=False)
    day = (
        pc.cast(pc.utf8_slice_codeunits(rows["ts"], 0, 10), pa.date32())
        if bench.fmt == "json"
        else pc.cast(rows["_event_time"], pa.date32())
    )
    return bench.write(rows.append_column("amount_d", amount).append_column("dt", day), "f")


def arrow_route(bench: Bench, transform: Any) -> int:
    """g: the transform's Arrow route: a, with the Arrow plan Spark's optimized plan translates to
    (`transform_arrow`, Spark's semantics) evaluated on the parsed rows before the write."""
    from s3events.ingest.files.transform_arrow import evaluate
    from s3events.ingest.files.transform_arrow_route import arrow_plan

    rows = bench.parse()
    plan = arrow_plan(transform, rows.schema)  # decided once (the JVM's analysis), then remembered
    if plan is None:
        raise SystemExit(f"g: the SQL has no Arrow plan: {next(iter(transform.routes.values()))}")
    return bench.write(evaluate(plan, rows), "g")


def contenders(bench: Bench) -> dict[str, Callable[[], int]]:
    shared = bench.transform()
    found: dict[str, Callable[[], int]] = {
        "a": partial(plain, bench),
        "b": partial(released, partial(counted, bench, shared), shared),
        "c": partial(released, partial(driver_route, bench, shared), shared),
    }
    for name, knob in KNOBS.items():
        own = bench.transform(knob)
        found[name] = partial(released, partial(driver_route, bench, own), own)
    for name, run in (("d", spark_writer), ("d+stats", spark_writer_stats), ("e", spark_alone)):
        own = bench.transform()
        found[name] = partial(released, partial(run, bench, own), own)
    if bench.sql == SQL[bench.fmt]:
        found["f"] = partial(by_pyarrow, bench)
    found["g"] = partial(arrow_route, bench, bench.transform())
    return found


def released(run: Callable[[], int], transform: Any) -> int:
    """`run`, then its session's `src` view dropped: a view keeps its batch's Arrow rows in the JVM's heap,
    and one per contender's session filled a 1 GiB heap."""
    try:
        return run()
    finally:
        transform.session.catalog.dropTempView("src")


# -- measuring ---------------------------------------------------------------------------------------------


def measure(bench: Bench, rounds: int, warm: int) -> tuple[dict[str, list[Measure]], dict[str, Any]]:
    """Every contender `warm` times untimed, then `rounds` timed rounds in alternating order; and the
    phases of c, measured in separate runs of it (a phase's samples would slow the timed c)."""
    runs = contenders(bench)
    expected = None
    for _ in range(warm):
        for run in runs.values():
            run()
    results: dict[str, list[Measure]] = {name: [] for name in runs}
    phases: dict[str, list[dict[str, float]]] = {}
    shared = bench.transform()
    for r in range(rounds):
        print(f"  round {r + 1} of {rounds}", file=sys.stderr, flush=True)
        order = list(runs) if r % 2 == 0 else list(reversed(runs))
        for name in order:
            with Measure() as measured:
                rows = runs[name]()
            if name not in ("a", "b", "e"):  # e reads other rows than the fast path's (types, lineage)
                expected = rows if expected is None else expected
                if rows != expected:
                    raise SystemExit(f"{name} wrote {rows} rows, c {expected}")
            results[name].append(measured)
        released(partial(driver_route, bench, shared, phases), shared)
    parts = {
        phase: {kind: median(p[kind] for p in phases[phase]) for kind in phases[phase][0]} for phase in PHASES
    }
    return results, {"phases": parts, "rows_out": expected}


def figures_of(
    results: dict[str, list[Measure]], extra: dict[str, Any], rows: int, size: int
) -> dict[str, Any]:
    wall = {k: median(m.wall for m in v) for k, v in results.items()}
    cpu = {k: median(m.cpu for m in v) for k, v in results.items()}
    figures: dict[str, Any] = {"mb": round(size / 1e6, 1), "rows": rows, "rows_out": extra["rows_out"]}
    for k, measured in results.items():
        key = k.replace("+", "_")
        figures[f"{key}_s"] = round(wall[k], 3)
        figures[f"{key}_cpu_s"] = round(cpu[k], 3)
        for kind in ("driver", "jvm", "workers"):
            figures[f"{key}_cpu_{kind}_s"] = round(median(m.split[kind] for m in measured), 3)
        if k != "a":  # throughput over a's: 0.8 is the goal, 1.0 as fast as a plain batch
            figures[f"{key}_vs_a_x"] = round(ratio(wall["a"], wall[k]), 2)
            figures[f"{key}_cpu_vs_a_x"] = round(ratio(cpu["a"], cpu[k]), 2)
    for phase, split in extra["phases"].items():
        figures[f"c_{phase}_wall_s"] = round(split["wall"], 3)
        for kind in ("driver", "jvm", "workers"):
            figures[f"c_{phase}_cpu_{kind}_s"] = round(split[kind], 3)
    return figures


def show(figures: dict[str, Any], names: list[str]) -> None:
    print(
        f"{'contender':16s} {'wall s':>7s} {'x of a':>7s} {'CPU s':>6s} {'CPU x':>6s}  driver   jvm  workers"
    )
    for name in names:
        k = name.replace("+", "_")
        print(
            f"{name:16s} {figures[f'{k}_s']:7.3f} {figures.get(f'{k}_vs_a_x', 1.0):7.2f} "
            f"{figures[f'{k}_cpu_s']:6.2f} {figures.get(f'{k}_cpu_vs_a_x', 1.0):6.2f}  "
            f"{figures[f'{k}_cpu_driver_s']:6.2f} {figures[f'{k}_cpu_jvm_s']:5.2f} "
            f"{figures[f'{k}_cpu_workers_s']:7.2f}"
        )
    print("c by phase (medians):   wall s  driver CPU  jvm CPU  workers CPU")
    for phase in PHASES:
        get = partial(lambda p, kind: figures[f"c_{p}_{kind}_s"], phase)
        print(
            f"  {phase:20s} {get('wall'):7.3f} {get('cpu_driver'):10.3f} {get('cpu_jvm'):8.3f} "
            f"{get('cpu_workers'):11.3f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--formats", default="json,csv", help="json, csv or both (default json,csv)")
    parser.add_argument("--files", type=int, default=8, help="files (default 8)")
    parser.add_argument("--lines", type=int, default=20_000, help="lines (rows) per file (default 20000)")
    parser.add_argument("--line-bytes", type=int, default=120, help="bytes per line (default 120)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument(
        "--warm", type=int, default=3, help="untimed runs of each contender first (default 3)"
    )
    parser.add_argument("--sql", help="the transform (default: a cast, a derived date and a filter)")
    add_common(parser)
    args = parser.parse_args()
    smoke(args, files=2, lines=200, rounds=1, warm=0)

    from s3events.infra.spark import get_spark

    spark = get_spark(
        master="local[2]", app_name="s3events-transform-cost", conf={"spark.ui.showConsoleProgress": "false"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    run = Run.start("transform_cost", smoke=args.smoke)
    with tempfile.TemporaryDirectory(prefix="transform-cost-") as tmp:
        for fmt in args.formats.split(","):
            sql = args.sql or SQL[fmt]
            bench = Bench(spark, fmt, Path(tmp) / fmt, sql, args.files, args.lines, args.line_bytes)
            rows = args.files * args.lines
            print(f"{fmt}: {args.files} files x {args.lines} lines = {rows} rows, {bench.bytes / 1e6:.1f} MB")
            print(f"  transform: {sql}")
            results, extra = measure(bench, args.rounds, args.warm)
            figures = figures_of(results, extra, rows, bench.bytes)
            show(figures, list(results))
            print(f"({load_text()})", flush=True)
            params = {"format": fmt, "files": args.files, "lines": args.lines, "line_bytes": args.line_bytes}
            params |= {"rounds": args.rounds, "warm": args.warm, "sql": sql}
            run.add(fmt, params=params, figures=figures)
    run.save()
    sys.stdout.flush()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
