"""The fast path of an append batch: each executor task fetches its files, parses each whole with
pyarrow, adds lineage and writes Parquet, all in one Python pass per task. One task for every format;
the format's parser (`fast_json`, `fast_csv`, `fast_text`, `fast_parquet`) decides what a file's rows
are, or declines.

What the fast path cannot do exactly is handed back: files a parser declines go to the line path in the
same batch, and the whole batch takes the line path (every fast file discarded) when its files cannot
be split between the paths: the tasks' inferred types disagree with each other (a new column that is an
integer in one task and a double in another: the line path's inference sees all files at once), CSV
files have different header lines (the line path names every file's columns after one of them), or a
CSV batch that adds columns has a file the parser declined (its lines would have been part of the
inference; a Parquet batch that adds columns has a declined file: the Spark path unifies every file's
schema). Both paths give the same rows.

A parser may give a file's rows in parts (Parquet, row group by row group): the task then writes them
apart from other files' rows once they reach its flush bound, so a part that fails later (a corrupt row
group) declines the whole file and the task removes the data files it had written of it.
"""

from __future__ import annotations

import json
import logging
import math
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from s3events.errors import TransientError
from s3events.infra.aws import AwsOptions
from s3events.infra.parquet_files import (
    WRITTEN_FILE_SCHEMA,
    WrittenFile,
    from_row,
    remove_data_files,
    stage_table,
    take_staged,
    to_row,
    write_partitioned,
)
from s3events.ingest.files import fast_csv, fast_json, latest_rows
from s3events.ingest.files.fast_csv import CsvParser
from s3events.ingest.files.fast_json import JsonParser
from s3events.ingest.files.fast_parquet import ParquetParser
from s3events.ingest.files.fast_parse import FileDeclined, FileParser, Parsed
from s3events.ingest.files.fast_text import TextParser
from s3events.ingest.files.frames import TaskFunction, files_frame
from s3events.ingest.files.lines import codec_for_key
from s3events.ingest.files.merge_input import TYPE_ERRORS, MergeInput, concat_conformed, unreadable_partition
from s3events.ingest.files.objects import INGESTED_AT, LINEAGE_FIELDS, MAX_OBJECT_BYTES, Fetched, fetch
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec, key_path_value

log = logging.getLogger(__name__)

_TS = pa.timestamp("us", tz="UTC")
_TASK_BYTES = 128 << 20  # source bytes per task: one output file each, at least one task per core
_FLUSH_BYTES = 128 << 20  # Arrow bytes a task holds before it writes a file (bounds its memory)
# Objects a task downloads ahead of the one it parses: always 2 (each at most MAX_OBJECT_BYTES), and more,
# up to 16, while their sizes (as their events state them, which `fetch` holds them to) add up to at most
# 16 MiB: a batch of many small files is bound by GET latency, not bytes (100 files a second).
_FETCH_AHEAD = 2
_FETCH_AHEAD_MAX = 16
_FETCH_AHEAD_BYTES = 16 << 20
_OUT_SCHEMA = pa.schema(
    [
        *[f.with_nullable(True) for f in WRITTEN_FILE_SCHEMA],
        pa.field("schema", pa.binary()),  # the written table's schema (null-typed columns included)
        pa.field("event_id", pa.string()),  # a file for the line path ...
        pa.field("reason", pa.string()),  # ... and why
        pa.field("header", pa.string()),  # a CSV header line the task saw (one row each)
        # Merge mode: the record keys of the rows a flush wrote,
        pa.field("rows", pa.binary()),  # on driver threads as an IPC stream,
        pa.field("staged", pa.string()),  # from executors where they are staged (`stage_table`)
        pa.field("files", pa.int64()),  # the files a task was given (one row per task)
    ]
)
_FIXED = {f.name for f in LINEAGE_FIELDS} | {INGESTED_AT}


@dataclass
class FastResult:
    files: list[WrittenFile] = field(default_factory=list)
    schema: pa.Schema | None = None  # the table schema the written files belong to
    rest: tuple[FileRef, ...] = ()  # files for the line path
    reasons: dict[str, str] = field(default_factory=dict)  # uri -> why it takes the line path
    merge: MergeInput | None = None  # merge mode: the fast files' latest row per record key

    @property
    def rows(self) -> int:
        if self.merge is not None:
            return self.merge.num_rows
        return sum(f.num_records for f in self.files)


def fast_parser(
    target: TargetSpec, declared: pa.Schema | None, existing: pa.Schema | None
) -> FileParser | None:
    """The parser of the target's format with the data columns whose types are fixed (the declared
    schema, or the table's), or None when the batch cannot take the fast path."""
    if not target.fast_path:
        return None
    if declared is not None:
        known = declared
    elif existing is not None:
        known = pa.schema([f for f in existing if f.name not in _FIXED])
    else:
        known = pa.schema([])
    if target.format == "json" and not target.reader_options and fast_json.fast_path_supports(known):
        return JsonParser(known, declared is not None)
    if target.format == "csv" and fast_csv.fast_path_supports(known):
        options = fast_csv.csv_options(target.reader_options)
        if options is not None and (options.header or declared is not None):
            return CsvParser(known, declared is not None, options)
    if target.format == "text":  # the line path reads no options and no schema for text
        return TextParser()
    if target.format == "parquet":  # the Spark path reads no options and no declared schema for Parquet
        return ParquetParser(pa.schema([f for f in existing or [] if f.name not in _FIXED]))
    return None


def run_fast(
    spark: SparkSession,
    files: tuple[FileRef, ...],
    target: TargetSpec,
    *,
    parser: FileParser,
    existing: pa.Schema | None,
    aws: AwsOptions,
    ingested_at: datetime,
) -> FastResult:
    total = sum(f.size or 0 for f in files)
    tasks = max(spark.sparkContext.defaultParallelism, math.ceil(total / _TASK_BYTES))
    merge = target.mode == "merge"
    in_driver = driver_bytes(files) <= target.driver_read_max_bytes
    task = partial(
        _fast_task,
        aws=aws,
        parser=parser,
        table_uri=target.path,
        partition_by=target.partition_by,
        ingested_at=ingested_at,
        # Merge mode: tasks write their files' latest row per key and send back only the keys
        # (`merge_input`); from executors through storage: collected, a batch's keys would all be in
        # the driver's JVM at once.
        record_key=target.record_key if merge else None,
        ordering_field=target.ordering_field,
        stage=not in_driver,
    )
    if in_driver:
        log.debug("target %s: %d files read in the driver (driver.read.max.bytes)", target.name, len(files))
        results = _run_in_driver(task, files, min(len(files), tasks))
    else:  # the tasks' results are a few rows each: an RDD job, no query to plan
        results = files_frame(spark, files, tasks).run_each(task)
    rows = [row for batch in results for row in batch.to_pylist()]
    staged = [r["staged"] for r in rows if r["staged"] is not None]
    merge_keys = [pa.ipc.open_stream(pa.py_buffer(r["rows"])).read_all() for r in rows if r["rows"]]
    if staged:
        merge_keys += take_staged(target.path, staged, aws)
    written = [from_row(r) for r in rows if r["path"] is not None]
    ensure_accounted(rows, files, written, target=target.name, table_uri=target.path, aws=aws)
    declined = {r["event_id"]: r["reason"] for r in rows if r["event_id"] is not None}
    schema = _table_schema(
        existing,
        parser.known,
        [pa.ipc.read_schema(pa.py_buffer(r["schema"])) for r in rows if r["schema"]],
        target.partition_by,
        sort_new=parser.new_columns_sorted,
    )
    headers = {r["header"] for r in rows if r["header"] is not None}
    adds_columns = schema is not None and (existing is None or set(schema.names) - set(existing.names))
    whole_batch = (
        "types differ between files"
        if schema is None  # the tasks disagree on a type: let the line path infer over all files
        else "header lines differ between files"
        if len(headers) > 1
        else "the batch's new columns are typed from every file"
        if declined and adds_columns and parser.schema_from_every_file
        else None
    )
    merged: MergeInput | str | None = None
    if whole_batch is None and merge:
        assert schema is not None
        merged = _merge_written(merge_keys, written, schema, target, aws)
        if isinstance(merged, str):
            whole_batch = merged
    if whole_batch is not None:
        remove_data_files(target.path, written, aws)
        return FastResult(rest=files, reasons=dict.fromkeys((f.uri for f in files), whole_batch))
    rest = tuple(f for f in files if f.event_id in declined)
    reasons = {f.uri: declined[f.event_id] for f in rest}
    if isinstance(merged, MergeInput):  # the written files, if any, are the merge input's
        return FastResult([], schema, rest, reasons, merged)
    return FastResult(written, schema, rest, reasons)


def ensure_accounted(
    rows: list[dict[str, Any]],
    files: tuple[FileRef, ...],
    written: list[WrittenFile],
    *,
    target: str,
    table_uri: str,
    aws: AwsOptions,
) -> None:
    """TransientError, the `written` files removed, unless the tasks' result rows account for every file
    of the batch (each task reports how many it was given): a job whose results were lost (a driver out
    of heap serving them) would otherwise commit the batch without those files' rows."""
    accounted = sum(r["files"] or 0 for r in rows)
    if accounted != len(files):
        remove_data_files(table_uri, written, aws)
        raise TransientError(
            f"target {target}: the fast path's results cover {accounted} of {len(files)} files; "
            "the batch is not committed and will be retried"
        )


def _merge_written(
    keys: list[pa.Table], written: list[WrittenFile], schema: pa.Schema, target: TargetSpec, aws: AwsOptions
) -> MergeInput | str:
    """The tasks' written latest rows, by their `keys`, as the batch's; or why they cannot be. A key in
    the files of two tasks (or of two flushes of one) makes the driver read them back and reduce them."""
    why = latest_rows.reducible(schema, target.record_key, target.ordering_field)
    if why is not None:
        return why
    try:
        held = concat_conformed(keys, pa.schema([schema.field(name) for name in target.record_key]))
    except TYPE_ERRORS as exc:
        return f"types differ between files: {exc}"
    if held.num_rows != sum(f.num_records for f in written):  # rows whose keys no one would check
        remove_data_files(target.path, written, aws)
        raise TransientError(
            f"target {target.name}: the fast path's tasks sent back {held.num_rows} keys for "
            f"{sum(f.num_records for f in written)} written rows; the batch will be retried"
        )
    unreadable = unreadable_partition(written, schema)
    if unreadable is not None:
        return unreadable
    rows = MergeInput.written(written, held, schema=schema, table_uri=target.path, aws=aws)
    if latest_rows.keys_distinct(held, target.record_key):
        return rows
    return MergeInput.held(latest_rows.latest(rows.take_rows(), target.record_key, target.ordering_field))


def driver_bytes(files: tuple[FileRef, ...]) -> int:
    """What reading `files` may hold in memory, as `driver.read.max.bytes` counts it (unknown sizes as 0)."""
    return sum(_held_bytes(f) or 0 for f in files)


def _held_bytes(ref: FileRef) -> int | None:
    """What reading `ref` may hold: its stated size (`fetch` refuses more), a compressed file at the bound
    its content is read up to (a small .gz may expand a thousandfold); None when its size is unknown."""
    return MAX_OBJECT_BYTES if codec_for_key(ref.key) else ref.size


def _run_in_driver(
    task: TaskFunction, files: tuple[FileRef, ...], slices: int
) -> list[pa.RecordBatch]:
    """The tasks a Spark job would run, on threads of this process (pyarrow's parsers and writers release
    the GIL), with the files sliced in batch order as the job's partitions would be."""
    groups = [list(files[i * len(files) // slices : (i + 1) * len(files) // slices]) for i in range(slices)]
    with ThreadPoolExecutor(max_workers=slices, thread_name_prefix="s3events-read") as pool:
        return list(pool.map(task, groups))


def _table_schema(
    existing: pa.Schema | None,
    known: pa.Schema,
    written: list[pa.Schema],
    partition_by: tuple[str, ...],
    *,
    sort_new: bool = True,
) -> pa.Schema | None:
    """The table schema after the fast files, ordered as the line path orders it (new columns sorted by
    name, as Spark's JSON inference gives them, or with `sort_new=False` in the files' order, as a CSV
    header gives them); None on a conflict."""
    types: dict[str, set[pa.DataType]] = {}
    for schema in written:
        for f in schema:
            types.setdefault(f.name, set()).add(f.type)
    resolved: dict[str, pa.DataType] = {}
    for name, found in types.items():
        real = {t for t in found if not pa.types.is_null(t)}
        if len(real) > 1:
            return None
        resolved[name] = real.pop() if real else pa.string()  # Spark infers string for all-null
    base = list(existing) if existing is not None else [*LINEAGE_FIELDS, *known]
    for f in base:
        if f.name in resolved and resolved[f.name] != f.type and f.name not in _FIXED:
            return None
    names = {f.name for f in base}
    new = [n for n in resolved if n not in names and n not in _FIXED]  # in the files' order
    if sort_new:  # partition columns the records lack were appended to them: they stay last
        new = sorted(n for n in new if n not in partition_by) + [n for n in partition_by if n in new]
    tail = [] if INGESTED_AT in names else [pa.field(INGESTED_AT, _TS)]
    fields = [*base, *[pa.field(n, resolved[n]) for n in new], *tail]
    return pa.schema([f.with_nullable(True) for f in fields])


# -- inside executors ----------------------------------------------------------------------------------


def _fast_task(
    refs: list[FileRef],
    *,
    aws: AwsOptions,
    parser: FileParser,
    table_uri: str,
    partition_by: tuple[str, ...],
    ingested_at: datetime,
    record_key: tuple[str, ...] | None = None,
    ordering_field: str | None = None,
    stage: bool = False,
) -> pa.RecordBatch:
    """One task's files: fetched, parsed, written as data files; a row per written file, per declined
    file and per CSV header line seen. Merge mode (`record_key`): what is written is each flush's
    latest row per record key (`latest_rows`), and a row hands back those rows' keys (`stage`: through
    the table's staging directory)."""
    out: list[dict[str, object]] = []
    pending: list[tuple[FileRef, pa.Table]] = []
    held = 0
    hints: dict[str, pa.DataType] = {}
    headers: set[str] = set()
    flush = partial(
        _flush,
        table_uri=table_uri,
        aws=aws,
        partition_by=partition_by,
        parser=parser,
        record_key=record_key,
        ordering_field=ordering_field,
        stage=stage,
    )
    finish = partial(_finish, partition_by=partition_by, ingested_at=ingested_at)
    remove = partial(remove_data_files, table_uri, options=aws)
    with ThreadPoolExecutor(max_workers=_FETCH_AHEAD_MAX, thread_name_prefix="s3events-fetch") as pool:
        for ref, fetched in _fetched_ahead(pool, refs, aws):
            parsed = (
                parser.parse(fetched.data, ref, fetched.etag, hints)
                if fetched.data is not None
                else Parsed(None, fetched.reason)
            )
            if parsed.header is not None:
                headers.add(parsed.header)
            if parsed.parts is not None:
                held = _take_parts(ref, parsed.parts, pending, held, out, flush, finish, remove)
                continue
            if parsed.table is None:
                out.append({"event_id": ref.event_id, "reason": parsed.reason})
                continue
            table = finish(parsed.table, ref.uri)
            pending.append((ref, table))
            held += table.nbytes
            if held >= _FLUSH_BYTES:
                out.extend(flush(pending))
                pending.clear()
                held = 0
    out.extend(flush(pending))
    out.extend({"header": header} for header in sorted(headers))
    out.append({"files": len(refs)})
    return pa.RecordBatch.from_pylist(out, schema=_OUT_SCHEMA)


def _take_parts(
    ref: FileRef,
    parts: Iterator[pa.Table],
    pending: list[tuple[FileRef, pa.Table]],
    held: int,
    out: list[dict[str, object]],
    flush: Callable[[list[tuple[FileRef, pa.Table]]], list[dict[str, object]]],
    finish: Callable[[pa.Table, str], pa.Table],
    remove: Callable[[list[WrittenFile]], None],
) -> int:
    """One file's rows part by part into `pending` (or, past the flush bound, into data files of its own,
    so that a later part's failure can take them back); returns the bytes the task then holds."""
    mine: list[tuple[FileRef, pa.Table]] = []
    own: list[dict[str, object]] = []  # result rows of data files holding only this file's rows
    reason: str | None = None
    try:
        for part in parts:
            table = finish(part, ref.uri)
            mine.append((ref, table))
            held += table.nbytes
            if held >= _FLUSH_BYTES:
                out.extend(flush(pending))
                own.extend(flush(mine))
                pending.clear()
                mine, held = [], 0
        if own:  # it spilled: the rest of it is written apart too
            own.extend(flush(mine))
            mine, held = [], 0
    except FileDeclined as exc:
        reason = exc.reason
    reason = reason or next((str(r["reason"]) for r in own if r.get("event_id") is not None), None)
    if reason is None:
        out.extend(own)
        pending.extend(mine)
        return held
    remove([from_row(r) for r in own if r.get("path") is not None])
    out.append({"event_id": ref.event_id, "reason": reason})
    return held - sum(t.nbytes for _, t in mine)


def _fetched_ahead(
    pool: ThreadPoolExecutor, refs: list[FileRef], aws: AwsOptions
) -> Iterator[tuple[FileRef, Fetched]]:
    """The task's objects in order, the next ones already downloading while one is parsed: a GET's
    latency (first byte from S3 is tens of milliseconds) overlaps with parsing and with other GETs
    instead of adding to them."""
    waiting: deque[tuple[FileRef, Future[Fetched]]] = deque()
    upcoming = deque(refs)
    in_flight = 0  # bytes, by `_fetch_cost`

    def submit_more() -> None:
        nonlocal in_flight
        while upcoming and (
            len(waiting) < _FETCH_AHEAD
            or (
                len(waiting) < _FETCH_AHEAD_MAX and in_flight + _fetch_cost(upcoming[0]) <= _FETCH_AHEAD_BYTES
            )
        ):
            ref = upcoming.popleft()
            in_flight += _fetch_cost(ref)
            waiting.append((ref, pool.submit(fetch, ref, aws)))

    submit_more()
    while waiting:
        ref, future = waiting.popleft()
        in_flight -= _fetch_cost(ref)
        submit_more()
        yield ref, future.result()


def _fetch_cost(ref: FileRef) -> int:
    """`_held_bytes`, with an unknown size at the in-memory limit: downloads ahead never bet on it."""
    held = _held_bytes(ref)
    return MAX_OBJECT_BYTES if held is None else held


def _finish(table: pa.Table, uri: str, *, partition_by: tuple[str, ...], ingested_at: datetime) -> pa.Table:
    """Partition columns from the key path where the records lack them, and the ingestion time."""
    n = table.num_rows
    for name in partition_by:
        value = pa.repeat(pa.scalar(key_path_value(uri, name), pa.string()), n)
        if name not in table.column_names:
            table = table.append_column(name, value)
        else:
            index = table.column_names.index(name)
            column = table.column(index)
            if pa.types.is_null(column.type):
                table = table.set_column(index, name, value)
            elif pa.types.is_string(column.type):
                table = table.set_column(index, name, pc.coalesce(column, value))
    return table.append_column(INGESTED_AT, pa.repeat(pa.scalar(ingested_at, _TS), n))


def _flush(
    pending: list[tuple[FileRef, pa.Table]],
    *,
    table_uri: str,
    aws: AwsOptions,
    partition_by: tuple[str, ...],
    parser: FileParser,
    record_key: tuple[str, ...] | None,
    ordering_field: str | None,
    stage: bool = False,
) -> list[dict[str, object]]:
    if not pending:
        return []
    try:
        # Files of one task may differ in columns (each has its own); an integer column of one file
        # and a double column of another become double, as Spark's inference would have it.
        table = pa.concat_tables([t for _, t in pending], promote_options="permissive")
    except TYPE_ERRORS as exc:
        return _declined(pending, f"types differ between files: {exc}")
    odd = [f.name for f in table.schema if f.name not in _FIXED and not parser.keeps_type(f.type)]
    if odd:  # e.g. structs merged in an order Spark would not give
        return _declined(pending, f"merged types of {', '.join(odd)} differ from Spark's inference")
    schema_bytes = table.schema.serialize().to_pybytes()
    if record_key is not None:
        table = latest_rows.latest_if_reducible(table, record_key, ordering_field)
    # An all-null column has no type yet: the table decides it; the file simply lacks the column.
    stored = table.select([f.name for f in table.schema if not pa.types.is_null(f.type)])
    files = write_partitioned(
        stored, table_uri=table_uri, schema=stored.schema, options=aws, partition_by=partition_by
    )
    out: list[dict[str, object]] = [{**to_row(f), "schema": schema_bytes} for f in files]
    if record_key is not None:  # a key the part lacks is null: the driver conforms the keys
        keys = table.select([name for name in record_key if name in table.column_names])
        if stage:
            out.append(
                {"staged": stage_table(keys, table_uri=table_uri, options=aws), "schema": schema_bytes}
            )
        else:
            out.append({"rows": _ipc(keys), "schema": schema_bytes})
    return out


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _declined(pending: list[tuple[FileRef, pa.Table]], reason: str) -> list[dict[str, object]]:
    return [{"event_id": ref.event_id, "reason": reason} for ref, _ in pending]


def describe(result: FastResult) -> str:
    """For the log: how many files took each path, and the commonest reasons."""
    counts: dict[str, int] = {}
    for reason in result.reasons.values():
        counts[reason] = counts.get(reason, 0) + 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:3]
    return json.dumps({"fast_files": len(result.files), "line_path": len(result.rest), "reasons": dict(top)})
