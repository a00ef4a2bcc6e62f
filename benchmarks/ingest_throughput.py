"""Ingest throughput (MB/s, rows/s) against two baselines, on the same files in the same run.

    .venv/bin/python benchmarks/ingest_throughput.py [--format json|csv|text|parquet|avro|orc|xml|binary]
        [--files 40]
        [--lines 25000] [--line-bytes 120] [--rounds 3] [--no-line-path] [--mode append|merge]
        [--existing-target] [--warm-jobs 40] [--transform-sql "SELECT ... FROM src WHERE ..."]
        [--multi-line]
        [--schema-evolution add|rescue|fail|ignore]

`--mode merge` makes every contender upsert by the data's unique `id` into its fresh target (ours:
`mode=merge`, `record.key=id`; baseline A: an empty table, then one `DeltaTable.merge` of all rows;
baseline B has no merge and is left out). Ours sees that the fresh target holds none of the keys and
appends; merges that update rows are measured by `benchmarks/merge_scale.py`. `--format` (default
json) chooses the files and the target's format; every contender reads that format
(baseline A with pyarrow's reader of it: pyarrow.json, pyarrow.csv, lines split in Python, pyarrow.parquet;
baseline B with spark.read.json / csv (header, inferSchema) / text / parquet). CSV files have a header
and the columns id, user, amount, ok, country, note (no timestamp column: the CSV fast path leaves
columns Spark would infer as dates or timestamps to the line path); text files are log lines; Parquet
files hold the JSON data's rows, read row group by row group. Text and Parquet have one path (the fast
path's task; no `<format>.fast.path` key), so they have no line-path contender. Avro (deflate),
ORC and XML (`<row>` elements, rowTag=row) files hold the JSON data's rows. A binary object stands for a
scanned document, an image or a PDF: bytes that do not compress, one row per object, sizes cycling over
1/4, 1/2, 1 and 9/4 of
`--lines` x `--line-bytes` (a folder of documents differs in size; `--files 100 --lines 10000
--line-bytes 100` is 100 objects of 250 KB to 2.25 MB, 100 MB in all: what a document pipeline lands
in one batch, and enough bytes that the per-batch cost does not hide the per-object one). These four
have no line-path contender and no baseline B; A reads them with fastavro, pyarrow.orc, defusedxml's
iterparse (string columns) and the bytes as they are. `--multi-line` (json, csv) writes each JSON file
as one pretty-printed top-level array of its rows (an API dump) and gives each CSV row a quoted `note`
holding a newline; the target reads them with `reader.options=multiLine=true` (both on their fast path;
no line-path contender, which is tens of times slower, and no B) and A with json.loads or pyarrow.csv's
newlines_in_values.

Set-up (not timed): a moto_server endpoint (`LocalEndpoint`, a child process), one bucket, `--files`
objects of `--lines` JSON lines of about `--line-bytes` bytes each, PUT into it. The metadata table gets
one commit (one version) holding a created event per object, written directly with
`MetadataTable.commit` (as the integration tests' `_write_metadata_version` does) instead of by running
capture: moto's SQS costs O(queue depth) per call, which would only slow the set-up, and capture is not
what is measured here. The events carry the objects' real etags and sizes, as capture would record them.

`--existing-target` measures the steady state instead of a target's first batch: before the bench
objects' metadata commit, one seed object of 100 lines of the same format (ids above the bench's) is
committed and ingested by ours into a seed target, and written by `write_deltalake` into a seed table for
A; each round's targets are copies of those (not timed), and the round appends to them. A first batch
has no table to take types from: the JSON fast path then parses a file whose strings pyarrow reads as
timestamps twice (once to see them, once keeping them as strings, as Spark does); a target's later
batches parse each file once.

`--transform-sql` adds a contender, **ours, transform**: ours with that SQL as the target's
`transform.sql` (e.g. a cast, a derived date column and a filter); its rows plus the rows the transform
filtered must add up to the data's, and `transform_vs_ours_x` (the transform's throughput over ours
without one, same data, same run) is what the transform costs.

Measured, per round, in this order (MB = 10^6 bytes of source files):

- **ours**: `run_ingest(settings, once=True, spark=spark)` into a fresh local target path (json format,
  schema inferred, append mode): change feed → plan → executors GET the objects from moto (mapInArrow,
  boto3, `IfMatch`) → JSON fast path (each task parses its files whole with pyarrow, adds lineage,
  writes Parquet) → one delta-rs commit with the checkpoint. The data's `ts` strings look like
  timestamps, so each file is parsed twice (pyarrow infers a timestamp; Spark keeps a string).
  `s3events.ingest.target.bench.max.files.per.batch` is `--files` (and max.bytes.per.batch is 1 TiB), so
  one round is exactly one batch. Its output also carries the lineage
  columns (`_source_file`, `_source_etag`, `_source_line`, `_event_time`, `_ingested_at`).
- **ours, line path** (unless `--no-line-path`): the same with `json.fast.path=false`: lines split on
  the executors, parsed by Spark's from_json (schema inference first), then written; what every file
  the fast path declines goes through.
- **baseline A** ("pyarrow read from the same endpoint + write_deltalake"): one process, sequentially:
  boto3 `get_object` of each object from the same moto endpoint, `pyarrow.json.read_json`,
  `pa.concat_tables`, `deltalake.write_deltalake` to a fresh local path. No lineage, no error handling.
  pyarrow's JSON, CSV and Parquet readers parse on every core by default (A used about 1.4 cores in
  JSON runs), so A is not a one-core baseline.
- **A1**: A with the reader's `use_threads=False`: the one-core reader (write_deltalake as in A).
- **baseline B**: `spark.read.json(<local copy dir>).write.parquet(<fresh path>)` on a local copy of the
  same objects (copied before any timing). Schema inferred, no Delta log, no S3.

One local Spark session (`get_spark(master="local[2]")`, the session settings `s3events ingest` uses;
only the console progress bar is turned off) serves ours and baseline B. Start-up is not timed: the
session runs a tiny job, a tiny mapInArrow job, and each contender once on two small files of its own
first (ours twice: on driver threads, as so small a batch is read, and in a Spark job, as the rounds'
batches are), then ours `--warm-jobs` times more in a Spark job, until the JVM's JIT has settled (the
JVM compiles Spark's code over its first few dozen jobs: 0.2-0.4 s of CPU a job at first, which a
long-running ingest pays once; `--warm-jobs 0` measures that cold JVM). Every round's row count is
checked. Per round and as medians it prints wall time, MB/s, rows/s and the CPU seconds of this process
tree (the Spark JVM, its Python workers and the moto_server are all children of this process) split by
process, then the ratios ours/A, ours/B and ours/line path of throughput and of CPU
efficiency, and the load average: other work on a shared machine moves wall times much more than CPU
seconds (which are indicative only: they come from /proc and miss processes that end outside this tree).
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow.json as pajson
import pyarrow.parquet as pq

from benchmarks.harness import Measure, Run, add_common, load_text, median, ratio, smoke
from benchmarks.harness.baselines import READERS, pyarrow_to_delta, read_with_pyarrow, spark_to_parquet
from benchmarks.harness.endpoints import LOCAL_ENV, LocalEndpoint
from benchmarks.harness.metadata import write_created_events
from s3events.config import Settings, load_settings
from s3events.infra import aws

BUCKET = "bench-ingest"
TARGET = "bench"
FORMATS = ("json", "csv", "text", "parquet", "avro", "orc", "xml", "binary")
ONE_PATH = {"avro", "orc", "xml", "binary"}  # no line-path contender and no baseline B (+ --multi-line's)
NO_LINE_PATH = {"text", "parquet"}  # one path in s3events: no line-path contender (B stays)
A_READER: dict[str, str] = {}  # format -> baseline A's reader when not the format's own (--multi-line)


def labels_for(fmt: str, mode: str = "append") -> dict[str, str]:
    labels = {
        "ours": "ours: run_ingest (moto S3 -> Spark -> Delta)",
        "lines": f"ours, {fmt}.fast.path=false (line path)",
        "A": f"A: boto3 + {READERS[A_READER.get(fmt, fmt)]} + write_deltalake",
        "A1": f"A1: A with {READERS[A_READER.get(fmt, fmt)]} on one thread",
        "B": f"B: spark.read.{fmt}(local) + write.parquet",
        "xform": "ours, with --transform-sql",
    }
    if fmt in ONE_PATH:
        del labels["B"], labels["lines"]
    elif fmt in NO_LINE_PATH:
        del labels["lines"]
    if mode == "merge" and "B" in labels:  # B has no merge: it is left out
        del labels["B"]
        labels["A"] = f"A: boto3 + {READERS[fmt]} + DeltaTable.merge"
        labels["A1"] = f"A1: A with {READERS[fmt]} on one thread"
    return labels


def mode_settings(mode: str) -> list[str]:
    """Settings of the target's mode: merge upserts by the data's unique `id`."""
    if mode == "append":
        return []
    return [f"s3events.ingest.target.{TARGET}.mode=merge", f"s3events.ingest.target.{TARGET}.record.key=id"]


SCHEMA_DDL = "id BIGINT, ts STRING, user STRING, amount DOUBLE, ok BOOLEAN, country STRING, note STRING"


# -- data -----------------------------------------------------------------------------------------------


def make_file(file_no: int, lines: int, line_bytes: int) -> bytes:
    """`lines` JSON objects of about `line_bytes` bytes each (newline included), deterministic."""
    countries = ("DE", "FR", "US", "JP", "BR", "IN", "NG", "AU")
    out = []
    for i in range(lines):
        n = file_no * lines + i
        head = (
            f'{{"id": {n}, "ts": "2026-11-22T05:{(n // 60) % 60:02d}:{n % 60:02d}.{n % 1000:03d}Z", '
            f'"user": "user-{n % 100003:06d}", "amount": {(n % 99991) / 100:.2f}, '
            f'"ok": {"true" if n % 3 else "false"}, "country": "{countries[n % 8]}", "note": "'
        )
        pad = max(1, line_bytes - len(head) - 3)
        out.append(head + "x" * pad + '"}\n')
    return "".join(out).encode()


def make_csv_file(file_no: int, lines: int, line_bytes: int) -> bytes:
    """A header, then `lines` CSV rows of about `line_bytes` bytes each, deterministic."""
    countries = ("DE", "FR", "US", "JP", "BR", "IN", "NG", "AU")
    out = ["id,user,amount,ok,country,note\n"]
    for i in range(lines):
        n = file_no * lines + i
        head = (
            f"{n},user-{n % 100003:06d},{(n % 99991) / 100:.2f},{'true' if n % 3 else 'false'},"
            f"{countries[n % 8]},"
        )
        out.append(head + "x" * max(1, line_bytes - len(head) - 1) + "\n")
    return "".join(out).encode()


def make_text_file(file_no: int, lines: int, line_bytes: int) -> bytes:
    """`lines` log lines of about `line_bytes` bytes each, deterministic."""
    out = []
    for i in range(lines):
        n = file_no * lines + i
        head = f"2026-11-22T05:{(n // 60) % 60:02d}:{n % 60:02d}Z INFO user-{n % 100003:06d} request {n} "
        out.append(head + "x" * max(1, line_bytes - len(head) - 1) + "\n")
    return "".join(out).encode()


def make_parquet_file(file_no: int, lines: int, line_bytes: int) -> bytes:
    """The JSON data's rows as one Parquet file."""
    sink = io.BytesIO()
    pq.write_table(pajson.read_json(io.BytesIO(make_file(file_no, lines, line_bytes))), sink)
    return sink.getvalue()


def make_avro_file(file_no: int, lines: int, line_bytes: int) -> bytes:
    """The JSON data's rows as one Avro file (deflate)."""
    import fastavro

    fields = [
        ("id", "long"),
        ("ts", "string"),
        ("user", "string"),
        ("amount", "double"),
        ("ok", "boolean"),
        ("country", "string"),
        ("note", "string"),
    ]
    schema = {"type": "record", "name": "Row", "fields": [{"name": n, "type": t} for n, t in fields]}
    rows = pajson.read_json(io.BytesIO(make_file(file_no, lines, line_bytes))).to_pylist()
    sink = io.BytesIO()
    fastavro.writer(sink, fastavro.parse_schema(schema), rows, codec="deflate")
    return sink.getvalue()


def make_orc_file(file_no: int, lines: int, line_bytes: int) -> bytes:
    """The JSON data's rows as one ORC file."""
    import pyarrow.orc as orc

    sink = io.BytesIO()
    orc.write_table(pajson.read_json(io.BytesIO(make_file(file_no, lines, line_bytes))), sink)
    return sink.getvalue()


def make_xml_file(file_no: int, lines: int, line_bytes: int) -> bytes:
    """The JSON data's rows as <row> elements, one child element per column."""
    rows = pajson.read_json(io.BytesIO(make_file(file_no, lines, line_bytes))).to_pylist()
    text = (str(v).lower() if isinstance(v, bool) else str(v) for r in rows for v in r.values())
    names = list(rows[0]) if rows else []
    out = ["<rows>\n"]
    for _ in rows:
        out.append("<row>" + "".join(f"<{n}>{next(text)}</{n}>" for n in names) + "</row>\n")
    out.append("</rows>\n")
    return "".join(out).encode()


def make_binary_file(file_no: int, lines: int, line_bytes: int) -> bytes:
    """An object as an image or a PDF would be: bytes that do not compress, deterministic. Sizes cycle
    over 1/4, 1/2, 1 and 9/4 of `lines` x `line_bytes` (a mean of that), as a folder of scans differs."""
    import numpy as np

    size = lines * line_bytes * (1, 2, 4, 9)[file_no % 4] // 4
    return np.random.default_rng(file_no).bytes(size)


def make_json_array_file(file_no: int, lines: int, line_bytes: int) -> bytes:
    """`--multi-line` JSON: the JSON data's rows as one pretty-printed top-level array (an API dump)."""
    rows = [json.loads(line) for line in make_file(file_no, lines, line_bytes).splitlines()]
    return json.dumps(rows, indent=2).encode()


def make_multi_line_csv_file(file_no: int, lines: int, line_bytes: int) -> bytes:
    """`--multi-line` CSV: the CSV data with each `note` quoted and holding a newline (an export of a
    free-text column)."""
    out = []
    for i, line in enumerate(make_csv_file(file_no, lines, line_bytes).decode().splitlines(keepends=True)):
        head, _, note = line.rstrip("\n").rpartition(",")
        out.append(line if i == 0 else f'{head},"{note[: len(note) // 2]}\n{note[len(note) // 2 :]}"\n')
    return "".join(out).encode()


def use_multi_line(fmt: str) -> None:
    """`--multi-line`: the format's files hold records across lines (`reader.options=multiLine=true`):
    no line-path contender and no baseline B; A reads them with
    json.loads (an array) or pyarrow.csv with newlines_in_values."""
    if fmt not in ("json", "csv"):
        raise SystemExit("--multi-line: json or csv only")
    MAKERS[fmt] = {"json": make_json_array_file, "csv": make_multi_line_csv_file}[fmt]
    FORMAT_SETTINGS[fmt] = [f"s3events.ingest.target.{TARGET}.reader.options=multiLine=true"]
    A_READER[fmt] = f"{fmt}-multiline"
    ONE_PATH.add(fmt)


MAKERS = {
    "json": make_file,
    "csv": make_csv_file,
    "text": make_text_file,
    "parquet": make_parquet_file,
    "avro": make_avro_file,
    "orc": make_orc_file,
    "xml": make_xml_file,
    "binary": make_binary_file,
}
EXTENSIONS = {
    "json": "json",
    "csv": "csv",
    "text": "txt",
    "parquet": "parquet",
    "avro": "avro",
    "orc": "orc",
    "xml": "xml",
    "binary": "bin",
}
FORMAT_SETTINGS = {"xml": [f"s3events.ingest.target.{TARGET}.reader.options=rowTag=row"]}


def rows_of(fmt: str, files: int, lines: int) -> int:
    """The rows `files` objects of `lines` lines give: one per object for binary."""
    return files if fmt == "binary" else files * lines


def put_files(
    s3: Any, args: argparse.Namespace, local_dir: Path, prefix: str = "in/"
) -> list[tuple[str, str, int]]:
    """PUT the objects; keep a local copy (baseline B). Returns (key, etag, size) per object."""
    objects = []
    for f in range(args.files):
        body = MAKERS[args.format](f, args.lines, args.line_bytes)
        name = f"part-{f:05d}.{EXTENSIONS[args.format]}"
        key = f"{prefix}{name}"
        etag = s3.put_object(Bucket=BUCKET, Key=key, Body=body)["ETag"].strip('"')
        (local_dir / name).write_bytes(body)
        objects.append((key, etag, len(body)))
    return objects


def write_metadata(path: str, objects: list[tuple[str, str, int]]) -> None:
    """One metadata commit with a created event per object, as one capture batch would write it."""
    write_created_events(path, BUCKET, objects)


def ingest_settings(
    endpoint_url: str, metadata: str, target: str, files: int, *extra: str, fmt: str = "json"
) -> Settings:
    settings = load_settings(
        None,
        [
            f"s3events.aws.endpoint.url={endpoint_url}",
            "s3events.aws.region=us-east-1",
            f"s3events.metadata.table.path={metadata}",
            "s3events.log.level=WARNING",
            f"s3events.ingest.targets={TARGET}",
            f"s3events.ingest.target.{TARGET}.path={target}",
            f"s3events.ingest.target.{TARGET}.format={fmt}",
            f"s3events.ingest.target.{TARGET}.max.files.per.batch={files}",
            f"s3events.ingest.target.{TARGET}.max.bytes.per.batch={1 << 40}",
            *FORMAT_SETTINGS.get(fmt, []),
            *extra,
        ],
    )
    settings.validate_for("ingest")
    return settings


# -- measuring ---------------------------------------------------------------------------------------------

# -- the three contenders ----------------------------------------------------------------------------------


def run_ours(settings: Settings, spark: Any, expected_rows: int) -> Measure:
    """One run of ours; every row of the data is in the target or was filtered by its transform."""
    from s3events.ingest.service import run_ingest

    with Measure() as measured:
        totals = run_ingest(settings, once=True, spark=spark)
    if totals.rows + totals.filtered != expected_rows or totals.failed or totals.errors:
        raise SystemExit(
            f"ours: ingested {totals.rows} rows of {expected_rows}, failed={totals.failed}, "
            f"error rows={totals.errors}"
        )
    if totals.batches != 1:
        print(f"   (ours took {totals.batches} batches)")
    return measured


def run_transformed(
    args: argparse.Namespace,
    endpoint_url: str,
    metadata: str,
    target: Path,
    spark: Any,
    expected_rows: int,
) -> Measure:
    """Ours with `--transform-sql` as the target's transform, into a fresh target."""
    settings = ingest_settings(
        endpoint_url,
        metadata,
        str(target),
        args.files,
        f"s3events.ingest.target.{TARGET}.transform.sql={args.transform_sql}",
        *mode_settings(args.mode),
        fmt=args.format,
    )
    return run_ours(settings, spark, expected_rows)


def run_baseline_a(
    s3: Any,
    objects: list[tuple[str, str, int]],
    target: str,
    expected_rows: int,
    fmt: str = "json",
    mode: str = "append",
    threads: bool = True,
    seeded: bool = False,
) -> Measure:
    """A (A1 without `threads`) into `target`, a fresh path or (`seeded`) a copy of the seed table."""
    keys = [key for key, _etag, _size in objects]
    with Measure() as measured:
        table = pyarrow_to_delta(
            s3,
            BUCKET,
            keys,
            target,
            fmt=A_READER.get(fmt, fmt),
            merge_key="id" if mode == "merge" else None,
            threads=threads,
            create=not seeded,
        )
    if table.num_rows != expected_rows:
        raise SystemExit(f"baseline A: {table.num_rows} rows of {expected_rows}")
    return measured


def run_baseline_b(
    spark: Any, local_dir: Path, target: str, expected_rows: int, fmt: str = "json"
) -> Measure:
    import pyarrow.dataset as ds

    with Measure() as measured:
        spark_to_parquet(spark, fmt, local_dir, target)
    written = ds.dataset(target, format="parquet").count_rows()
    if written != expected_rows:
        raise SystemExit(f"baseline B: {written} rows of {expected_rows}")
    return measured


# -- main ---------------------------------------------------------------------------------------------------


def warm_up(
    spark: Any,
    s3: Any,
    endpoint_url: str,
    work: Path,
    fmt: str,
    mode: str,
    jobs: int = 0,
    transform_sql: str | None = None,
) -> list[float]:
    """Start-up is not timed: a tiny job, a tiny mapInArrow job (Python worker daemon), then each
    contender once on two small files of their own, ours both on driver threads and in a Spark job (the
    path the rounds' batches take): imports in the workers, first-use costs. Then ours `jobs` more times
    in a Spark job on those files: the JVM's JIT compiles Spark's planning and task code over the first
    few dozen jobs (measured: 0.2-0.4 s of the JVM's CPU a job for the first ten, 0.05-0.1 s after
    fifty), a cost a long-running ingest pays once; with `transform_sql`, each of those jobs is followed
    by one of ours with that transform (its SQL's code paths warm too). Returns the JVM's CPU seconds of
    each job of ours without a transform."""

    def identity(batches: Iterator[Any]) -> Iterator[Any]:
        yield from batches

    spark.range(10).count()
    spark.range(10).mapInArrow(identity, "id long").collect()
    local_dir = work / "warm-up-copy"
    local_dir.mkdir()
    warm = argparse.Namespace(files=2, lines=100, line_bytes=120, format=fmt)
    objects = put_files(s3, warm, local_dir, "warm-up/")
    write_metadata(str(work / "warm-up-metadata"), objects)

    def ours(target: str, *extra: str) -> Measure:
        """Ours on the warm-up files into a fresh `target`."""
        metadata = str(work / "warm-up-metadata")
        return run_ours(
            ingest_settings(endpoint_url, metadata, target, 2, *mode_settings(mode), *extra, fmt=fmt),
            spark,
            rows_of(fmt, 2, 100),
        )

    transformed = [f"s3events.ingest.target.{TARGET}.transform.sql={transform_sql}"] if transform_sql else []

    in_job = f"s3events.ingest.target.{TARGET}.driver.read.max.bytes=0"
    # Twice: on driver threads (a batch this small) and in a Spark job, the path the rounds' batches take.
    ours(str(work / "warm-up-ours-driver"))
    ours(str(work / "warm-up-ours-job"), in_job)
    run_baseline_a(s3, objects, str(work / "warm-up-a"), rows_of(fmt, 2, 100), fmt, mode)
    if mode == "append" and fmt not in ONE_PATH:
        run_baseline_b(spark, local_dir, str(work / "warm-up-b"), 200, fmt)
    jvm = []
    for job in range(jobs):
        target = work / f"warm-up-jit-{job}"
        jvm.append(ours(str(target), in_job).split["jvm"])
        shutil.rmtree(target, ignore_errors=True)
        if transformed:
            ours(str(target), in_job, *transformed)
            shutil.rmtree(target, ignore_errors=True)
    return jvm


def seed_targets(
    spark: Any, s3: Any, endpoint_url: str, work: Path, metadata: str, args: argparse.Namespace
) -> None:
    """`--existing-target`: one seed object committed to the metadata table and ingested by ours into
    `seed-ours` (and `seed-lines` for the line path), and written by A into `seed-a`, before the bench
    objects' commit. Its ids lie above the bench's, so a merge-mode batch still holds only new keys."""
    from deltalake import write_deltalake

    lines, file_no = 100, args.files * args.lines // 100 + 1
    body = MAKERS[args.format](file_no, lines, args.line_bytes)
    key = f"seed/part-seed.{EXTENSIONS[args.format]}"
    etag = s3.put_object(Bucket=BUCKET, Key=key, Body=body)["ETag"].strip('"')
    write_metadata(metadata, [(key, etag, len(body))])
    in_mode = mode_settings(args.mode)
    run_ours(
        ingest_settings(endpoint_url, metadata, str(work / "seed-ours"), 1, *in_mode, fmt=args.format),
        spark,
        lines,
    )
    if not (args.no_line_path or args.format in NO_LINE_PATH):
        line_path = f"s3events.ingest.target.{TARGET}.{args.format}.fast.path=false"
        settings = ingest_settings(
            endpoint_url, metadata, str(work / "seed-lines"), 1, line_path, *in_mode, fmt=args.format
        )
        run_ours(settings, spark, lines)
    write_deltalake(str(work / "seed-a"), read_with_pyarrow(args.format, body))


def rate(total_bytes: int, rows: int, seconds: float, cpu: float | None = None) -> str:
    text = f"{seconds:6.2f} s {total_bytes / 1e6 / seconds:6.1f} MB/s {rows / seconds / 1e3:5.0f} k rows/s"
    return text if cpu is None else f"{text} cpu {cpu:5.1f} s"


def split_text(split: dict[str, float]) -> str:
    """CPU by process, the ones that used any: `(driver 0.05, jvm 0.12, workers 1.50, moto 0.18)`."""
    used = [f"{k} {v:.2f}" for k, v in split.items() if v >= 0.005]
    return f"({', '.join(used)})" if used else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--format", choices=FORMATS, default="json", help="file format (default json)")
    parser.add_argument("--files", type=int, default=40, help="objects (default 40)")
    parser.add_argument("--lines", type=int, default=25_000, help="lines (rows) per object (default 25000)")
    parser.add_argument("--line-bytes", type=int, default=120, help="bytes per line (default 120)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (default 3)")
    parser.add_argument("--no-line-path", action="store_true", help="skip the line-path contender")
    parser.add_argument(
        "--warm-jobs",
        type=int,
        default=40,
        help="warm-up batches of ours in a Spark job before the rounds, so the JVM's JIT has settled as "
        "in a long-running ingest (default 40; 0 measures a JVM still compiling)",
    )
    parser.add_argument(
        "--mode", choices=("append", "merge"), default="append", help="the target's mode (default append)"
    )
    parser.add_argument(
        "--existing-target",
        action="store_true",
        help="append to targets holding a seed batch (a target's later batches) instead of fresh ones",
    )
    parser.add_argument(
        "--schema-evolution",
        choices=("add", "rescue", "fail", "ignore"),
        default="add",
        help="also measure ours with this schema.evolution (a contender of its own, against ours' add)",
    )
    parser.add_argument(
        "--multi-line",
        action="store_true",
        help="json: one pretty-printed top-level array per file; csv: quoted newlines in a column "
        "(reader.options=multiLine=true)",
    )
    parser.add_argument(
        "--transform-sql",
        help="also measure ours with this SQL as the target's transform.sql (a contender of its own)",
    )
    add_common(parser)
    args = parser.parse_args()
    smoke(args, files=2, lines=200, rounds=1, warm_jobs=0)
    if args.multi_line:
        use_multi_line(args.format)
    run = Run.start("ingest_throughput", smoke=args.smoke)
    if args.transform_sql and args.existing_target:
        parser.error("--transform-sql measures a fresh target: leave out --existing-target")
    if args.mode == "merge" and args.format == "text":
        parser.error("--mode merge needs a record key: text files have none (use json, csv or parquet)")
    logging.basicConfig(level=logging.WARNING)
    os.environ.update(LOCAL_ENV)

    from s3events.infra.spark import get_spark

    # The endpoint is stopped (and the temporary directory removed) before os._exit below.
    with LocalEndpoint() as endpoint, tempfile.TemporaryDirectory(prefix="ingest-bench-") as tmp:
        work = Path(tmp)
        options = aws.AwsOptions(region="us-east-1", endpoint_url=endpoint.url)
        s3 = aws.client(options, "s3")
        s3.create_bucket(Bucket=BUCKET)
        local_dir = work / "local-copy"
        local_dir.mkdir()
        started = time.perf_counter()
        objects = put_files(s3, args, local_dir)
        metadata = str(work / "metadata")
        if not args.existing_target:
            write_metadata(metadata, objects)
        total_bytes, rows = sum(o[2] for o in objects), rows_of(args.format, args.files, args.lines)
        print(
            f"data ({args.format}): {args.files} files x {args.lines} lines = {rows} rows, "
            f"{total_bytes / 1e6:.1f} MB "
            f"(PUT + metadata commit {time.perf_counter() - started:.1f} s)"
        )

        started = time.perf_counter()
        spark = get_spark(
            master="local[2]",
            app_name="s3events-ingest-bench",
            conf={"spark.ui.showConsoleProgress": "false"},  # progress bars only; no effect on speed
        )
        spark.sparkContext.setLogLevel("ERROR")
        jit = warm_up(
            spark, s3, endpoint.url, work, args.format, args.mode, args.warm_jobs, args.transform_sql
        )
        print(f"spark local[2] started and warmed up in {time.perf_counter() - started:.1f} s; {load_text()}")
        if len(jit) >= 10:
            print(
                f"  the JVM's CPU per warm-up batch (JIT settling over --warm-jobs {len(jit)}): first five "
                f"{median(jit[:5]):.2f} s, last five {median(jit[-5:]):.2f} s (medians)"
            )
        seeded = args.existing_target
        if seeded:
            seed_targets(spark, s3, endpoint.url, work, metadata, args)
            write_metadata(metadata, objects)
            print("targets: copies of seed targets holding 100 rows (--existing-target)")
        print(
            f"ours: s3events.ingest.target.{TARGET}.max.files.per.batch={args.files} "
            f"(one batch per round); MB = 10^6 bytes of source files"
        )

        fmt, mode = args.format, args.mode
        if mode == "merge":
            print(
                "target mode: merge (record.key=id; every id is new: A's MERGE inserts every row, ours "
                "appends them, its fresh target holding no key; merge_scope.holds_none_of)"
            )
        no_line_path = args.no_line_path or fmt in ONE_PATH or fmt in NO_LINE_PATH
        labels = {
            k: v
            for k, v in labels_for(fmt, mode).items()
            if not (k == "lines" and no_line_path) and not (k == "xform" and not args.transform_sql)
        }
        evolution = [f"s3events.ingest.target.{TARGET}.schema.evolution={args.schema_evolution}"]
        if args.schema_evolution != "add":
            labels["evo"] = f"ours, schema.evolution={args.schema_evolution}"
        results: dict[str, list[Measure]] = {k: [] for k in labels}
        for r in range(1, args.rounds + 1):
            in_mode = mode_settings(mode)
            if seeded:
                for name in ("ours", "a", *(() if no_line_path else ("lines",))):
                    shutil.copytree(work / f"seed-{name}", work / f"{name}-{r}")
            settings = ingest_settings(
                endpoint.url, metadata, str(work / f"ours-{r}"), args.files, *in_mode, fmt=fmt
            )
            results["ours"].append(run_ours(settings, spark, rows))
            if "evo" in results:
                if seeded:
                    shutil.copytree(work / "seed-ours", work / f"evo-{r}")
                settings = ingest_settings(
                    endpoint.url, metadata, str(work / f"evo-{r}"), args.files, *in_mode, *evolution, fmt=fmt
                )
                results["evo"].append(run_ours(settings, spark, rows))
            if "lines" in results:
                line_path = f"s3events.ingest.target.{TARGET}.{fmt}.fast.path=false"
                settings = ingest_settings(
                    endpoint.url, metadata, str(work / f"lines-{r}"), args.files, line_path, *in_mode, fmt=fmt
                )
                results["lines"].append(run_ours(settings, spark, rows))
            if "xform" in results:
                results["xform"].append(
                    run_transformed(args, endpoint.url, metadata, work / f"xform-{r}", spark, rows)
                )
            if seeded:
                shutil.copytree(work / "seed-a", work / f"a1-{r}")
            results["A"].append(
                run_baseline_a(s3, objects, str(work / f"a-{r}"), rows, fmt, mode, seeded=seeded)
            )
            results["A1"].append(
                run_baseline_a(
                    s3, objects, str(work / f"a1-{r}"), rows, fmt, mode, threads=False, seeded=seeded
                )
            )
            if "B" in results:
                results["B"].append(run_baseline_b(spark, local_dir, str(work / f"b-{r}"), rows, fmt))
            print(f"round {r}:", flush=True)
            for k, label in labels.items():
                m = results[k][-1]
                print(
                    f"  {label:46s} {rate(total_bytes, rows, m.wall, m.cpu)} {split_text(m.split)}",
                    flush=True,
                )
            # the outputs were checked: keep the disk small
            for name in ("ours", "evo", "lines", "xform", "a", "a1", "b"):
                shutil.rmtree(work / f"{name}-{r}", ignore_errors=True)

        wall = {k: median(m.wall for m in v) for k, v in results.items()}
        cpu = {k: median(m.cpu for m in v) for k, v in results.items()}
        split = {
            k: {kind: median(m.split[kind] for m in v) for kind in v[0].split} for k, v in results.items()
        }
        print("medians:")
        for k, label in labels.items():
            print(f"  {label:46s} {rate(total_bytes, rows, wall[k], cpu[k])} {split_text(split[k])}")
        for base in [b for b in ("A", "A1", "B", "lines", "xform") if b in results]:
            print(
                f"ratio ours/{base}: throughput {wall[base] / wall['ours']:.2f} "
                f"(CPU efficiency {cpu[base] / cpu['ours']:.2f})"
            )
        print(f"({load_text()})", flush=True)
        figures: dict[str, float] = {"mb": round(total_bytes / 1e6, 1), "rows": rows}
        for k in results:
            figures[f"{k.lower()}_s"] = round(wall[k], 3)
            figures[f"{k.lower()}_cpu_s"] = round(cpu[k], 3)
            if k != "ours":
                figures[f"ours_vs_{k.lower()}_x"] = round(ratio(wall[k], wall["ours"]), 2)
        figures.update({f"ours_cpu_{kind}_s": round(s, 3) for kind, s in split["ours"].items() if s})
        if "xform" in results:
            figures["transform_vs_ours_x"] = round(ratio(wall["ours"], wall["xform"]), 2)
        if "evo" in results:  # > 1: the mode is faster than add
            figures["evolution_vs_add_x"] = round(ratio(wall["ours"], wall["evo"]), 2)
            print(f"ratio schema.evolution={args.schema_evolution}/add: {figures['evolution_vs_add_x']:.2f}")
        case = f"{fmt}{' multi-line' if args.multi_line else ''}, {mode}" + (
            ", existing target" if seeded else ""
        )
        case += ", transform" if args.transform_sql else ""
        case += f", schema.evolution={args.schema_evolution}" if "evo" in results else ""
        params = {"format": fmt, "mode": mode, "existing_target": seeded, "files": args.files}
        params |= {"multi_line": True} if args.multi_line else {}
        params |= {"transform_sql": args.transform_sql} if args.transform_sql else {}
        params |= {"schema_evolution": args.schema_evolution} if "evo" in results else {}
        params |= {"lines": args.lines, "rounds": args.rounds, "warm_jobs": args.warm_jobs}
        run.add(case, params=params, figures=figures)
        run.save()

        sys.stdout.flush()
        spark.stop()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown (delta-rs readers can abort there; see ARCHITECTURE.md)


if __name__ == "__main__":
    main()
