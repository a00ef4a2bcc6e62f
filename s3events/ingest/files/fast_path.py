"""The fast path, the driver's half: it runs the tasks (`fast_task`) as a Spark job, or on threads of
the driver for a small batch, and decides from what they hand back which files the batch keeps. One task
for every format; the format's parser (`formats/`) decides what a file's rows are, or declines.

What the fast path cannot do exactly is handed back: files a parser declines go to the line path in the
same batch, and the whole batch takes the line path (every fast file discarded) when its files cannot
be split between the paths: the tasks' inferred types disagree with each other (a new column that is an
integer in one task and a double in another: the line path's inference sees all files at once), CSV
files have different header lines (the line path names every file's columns after one of them), or a
CSV batch that adds columns has a file the parser declined (its lines would have been part of the
inference; a Parquet batch that adds columns has a declined file: the Spark path unifies every file's
schema). Both paths give the same rows.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from s3events.errors import TransientError
from s3events.infra.aws import AwsOptions
from s3events.infra.parquet_files import WrittenFile, from_row, remove_data_files, take_staged
from s3events.ingest.files import case_clash, latest_rows
from s3events.ingest.files.fast_task import fast_task, held_bytes
from s3events.ingest.files.formats.base import FileParser
from s3events.ingest.files.frames import TaskFunction, files_frame
from s3events.ingest.files.lineage import FIXED, INGESTED_AT, LINEAGE_FIELDS, TIMESTAMP
from s3events.ingest.files.merge_input import TYPE_ERRORS, MergeInput, concat_conformed, unreadable_partition
from s3events.ingest.files.schema_contract import kept_columns, new_fields
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec

log = logging.getLogger(__name__)

_TASK_BYTES = 128 << 20  # source bytes per task: one output file each, at least one task per core


@dataclass
class FastResult:
    files: list[WrittenFile] = field(default_factory=list)
    schema: pa.Schema | None = None  # the table schema the written files belong to (or would have)
    rest: tuple[FileRef, ...] = ()  # files for the line path
    reasons: dict[str, str] = field(default_factory=dict)  # uri -> why it takes the line path
    merge: MergeInput | None = None  # merge mode: the fast files' latest row per record key
    ignored_fields: tuple[str, ...] = ()  # new fields schema.evolution=ignore dropped
    errors: list[pa.Table] = field(default_factory=list)  # a single-path format's error rows (ERROR_SCHEMA)
    untyped: frozenset[str] = frozenset()  # new columns only null in the fast files (which lack them)
    filtered: int = 0  # rows a transform in Arrow (`reshape`) removed

    @property
    def rows(self) -> int:
        if self.merge is not None:
            return self.merge.num_rows
        return sum(f.num_records for f in self.files)


def run_fast(
    spark: SparkSession,
    files: tuple[FileRef, ...],
    target: TargetSpec,
    *,
    parser: FileParser,
    existing: pa.Schema | None,
    aws: AwsOptions,
    ingested_at: datetime,
    reshape: Callable[[pa.Table], pa.Table] | None = None,
) -> FastResult:
    """`reshape`: a transform's Arrow plan, run by the tasks over each file's rows (`fast_task`)."""
    keep = kept_columns(target, existing)
    task = partial(_run_tasks, spark, files, target, parser=parser, aws=aws, ingested_at=ingested_at)
    rows = task(keep=keep, reshape=reshape)
    staged = [r["staged"] for r in rows if r["staged"] is not None]
    merge_keys = [pa.ipc.open_stream(pa.py_buffer(r["rows"])).read_all() for r in rows if r["rows"]]
    if staged:
        merge_keys += take_staged(target.path, staged, aws)
    written = [from_row(r) for r in rows if r["path"] is not None]
    ensure_accounted(rows, files, written, target=target.name, table_uri=target.path, aws=aws)
    declined = {r["event_id"]: r["reason"] for r in rows if r["event_id"] is not None}
    task_schemas = [pa.ipc.read_schema(pa.py_buffer(r["schema"])) for r in rows if r["schema"]]
    schema = table_schema(
        existing, parser.known, task_schemas, last_columns(target), sort_new=parser.new_columns_sorted
    )
    headers = {r["header"] for r in rows if r["header"] is not None}
    whole_batch = unsplittable(schema, existing, headers, bool(declined), parser) or _refused(
        schema, existing, target
    )
    merged: MergeInput | str | None = None
    if whole_batch is None and target.mode == "merge":
        assert schema is not None
        merged = _merge_written(merge_keys, written, schema, target, aws)
        if isinstance(merged, str):
            whole_batch = merged
    errors = _error_tables(rows)
    if whole_batch is not None:
        remove_data_files(target.path, written, aws)
        reasons = dict.fromkeys((f.uri for f in files), whole_batch)
        return FastResult(schema=schema, rest=files, reasons=reasons, errors=errors)
    rest = tuple(f for f in files if f.event_id in declined)
    reasons = {f.uri: declined[f.event_id] for f in rest}
    ignored = tuple(sorted({r["dropped"] for r in rows if r["dropped"] is not None}))
    untyped = _only_null(task_schemas)
    if isinstance(merged, MergeInput):  # the written files, if any, are the merge input's
        return FastResult([], schema, rest, reasons, merged, ignored, errors, untyped)
    filtered = sum(r["filtered"] or 0 for r in rows)
    return FastResult(
        written,
        schema,
        rest,
        reasons,
        ignored_fields=ignored,
        errors=errors,
        untyped=untyped,
        filtered=filtered,
    )


def _refused(schema: pa.Schema | None, existing: pa.Schema | None, target: TargetSpec) -> str | None:
    """Why a batch with new fields under schema.evolution=fail goes to the line path, if so."""
    if target.schema_evolution != "fail" or schema is None:
        return None
    if not new_fields(schema.names, existing, target.rescued_column):
        return None
    return "new fields under schema.evolution=fail (the line path names the first line)"


def _only_null(task_schemas: list[pa.Schema]) -> frozenset[str]:
    """The columns every task found only nulls in (its written files lack them)."""
    types: dict[str, set[bool]] = {}
    for schema in task_schemas:
        for f in schema:
            types.setdefault(f.name, set()).add(pa.types.is_null(f.type))
    return frozenset(name for name, nulls in types.items() if nulls == {True})


def _error_tables(rows: list[dict[str, Any]]) -> list[pa.Table]:
    """The tasks' error rows (a single-path format's; ERROR_SCHEMA)."""
    return [pa.ipc.open_stream(pa.py_buffer(r["errors"])).read_all() for r in rows if r["errors"]]


def last_columns(target: TargetSpec) -> tuple[str, ...]:
    """The columns every task appends to the data columns, in this order (`post_parse.finish`)."""
    keyed = target.key_columns.names if target.key_columns is not None else ()
    return (*keyed, *((target.rescued_column,) if target.rescued_column is not None else ()))


def _run_tasks(
    spark: SparkSession,
    files: tuple[FileRef, ...],
    target: TargetSpec,
    *,
    parser: FileParser,
    aws: AwsOptions,
    ingested_at: datetime,
    keep: frozenset[str] | None = None,
    reshape: Callable[[pa.Table], pa.Table] | None = None,
) -> list[dict[str, Any]]:
    """Every task's result rows: from a Spark job, or from threads of the driver for a small batch."""
    tasks = task_count(spark, files)
    in_driver = reads_in_driver(files, target)
    task = partial(
        fast_task,
        aws=aws,
        parser=parser,
        table_uri=target.path,
        partition_by=target.partition_by,
        ingested_at=ingested_at,
        # Merge mode: tasks write their files' latest row per key and send back only the keys
        # (`merge_input`); from executors through storage: collected, a batch's keys would all be in
        # the driver's JVM at once.
        record_key=target.record_key if target.mode == "merge" else None,
        ordering_field=target.ordering_field,
        marker=target.delete.field if target.delete is not None else None,
        stage=not in_driver,
        key_columns=target.key_columns,
        keep=keep,
        rescued=target.rescued_column,
        reshape=reshape,
    )
    if in_driver:
        log.debug("target %s: %d files read in the driver (driver.read.max.bytes)", target.name, len(files))
        results = run_in_driver(task, files, min(len(files), tasks))
    else:  # the tasks' results are a few rows each: an RDD job, no query to plan
        results = files_frame(spark, files, tasks).run_each(task)
    return [row for batch in results for row in batch.to_pylist()]


def unsplittable(
    schema: pa.Schema | None,
    existing: pa.Schema | None,
    headers: set[str],
    declined: bool,
    parser: FileParser,
) -> str | None:
    """Why the batch's files cannot be split between the paths (then all take the line path), if so."""
    if schema is None:  # the tasks disagree on a type: let the line path infer over all files
        return "types differ between files"
    if len(headers) > 1:
        return "header lines differ between files"
    if case_clash.clashing_groups(schema.names):  # the line path keeps one name (`case_clash`)
        return "field names differ only in case between files"
    adds_columns = existing is None or bool(set(schema.names) - set(existing.names))
    if declined and adds_columns and parser.schema_from_every_file:
        return "the batch's new columns are typed from every file"
    return None


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
        held = concat_conformed(keys, pa.schema([schema.field(name) for name in _sent(schema, target)]))
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


def _sent(schema: pa.Schema, target: TargetSpec) -> list[str]:
    """The columns tasks send back per written row: the record key, and delete.field's marker (the
    commit merges a batch holding a delete instead of appending it)."""
    if target.delete is None or target.delete.field not in schema.names:
        return list(target.record_key)
    return [*target.record_key, target.delete.field]


def task_count(spark: SparkSession, files: tuple[FileRef, ...]) -> int:
    """Tasks for a batch read in Spark: one per `_TASK_BYTES` of source, at least one per core."""
    total = sum(f.size or 0 for f in files)
    return max(spark.sparkContext.defaultParallelism, math.ceil(total / _TASK_BYTES))


def driver_bytes(files: tuple[FileRef, ...]) -> int:
    """What reading `files` may hold in memory, as `driver.read.max.bytes` counts it (unknown sizes as 0)."""
    return sum(held_bytes(f) or 0 for f in files)


def reads_in_driver(files: tuple[FileRef, ...], target: TargetSpec) -> bool:
    """Whether a batch is small enough to read on the driver's threads (`driver.read.max.bytes`)."""
    return driver_bytes(files) <= target.driver_read_max_bytes


def run_in_driver(task: TaskFunction, files: tuple[FileRef, ...], slices: int) -> list[pa.RecordBatch]:
    """The tasks a Spark job would run, on threads of this process (pyarrow's parsers and writers release
    the GIL), with the files sliced in batch order as the job's partitions would be."""
    groups = [list(files[i * len(files) // slices : (i + 1) * len(files) // slices]) for i in range(slices)]
    with ThreadPoolExecutor(max_workers=slices, thread_name_prefix="s3events-read") as pool:
        return list(pool.map(task, groups))


def table_schema(
    existing: pa.Schema | None,
    known: pa.Schema,
    written: list[pa.Schema],
    keyed: tuple[str, ...],
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
        if f.name in resolved and resolved[f.name] != f.type and f.name not in FIXED:
            return None
    names = {f.name for f in base}
    new = [n for n in resolved if n not in names and n not in FIXED]  # in the files' order
    if sort_new:  # key columns the records lack were appended to them: they stay last
        new = sorted(n for n in new if n not in keyed) + [n for n in keyed if n in new]
    tail = [] if INGESTED_AT in names else [pa.field(INGESTED_AT, TIMESTAMP)]
    fields = [*base, *[pa.field(n, resolved[n]) for n in new], *tail]
    return pa.schema([f.with_nullable(True) for f in fields])


def split_schema(
    fast: FastResult, line: pa.Schema, existing: pa.Schema | None, known: pa.Schema, keyed: tuple[str, ...]
) -> pa.Schema | None:
    """The table schema after a batch split between the paths whose halves typed their new columns each
    on its own (the fast files in the tasks, the declined ones by the line path's inference): a column
    one half holds only nulls of (or lacks) takes the other half's type, as Spark's inference over
    every file gives it. None when the halves type a column differently or spell a name two ways: then
    a half's values would have to be parsed again against the merged type (the whole batch takes the
    line path, whose inference spans every file)."""
    assert fast.schema is not None
    typed = pa.schema([f.with_type(pa.null()) if f.name in fast.untyped else f for f in fast.schema])
    merged = table_schema(existing, known, [typed, line], keyed)
    if merged is None or case_clash.clashing_groups(merged.names):
        return None
    return merged


def describe(result: FastResult) -> str:
    """For the log: how many files took each path, and the commonest reasons."""
    counts: dict[str, int] = {}
    for reason in result.reasons.values():
        counts[reason] = counts.get(reason, 0) + 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:3]
    return json.dumps({"fast_files": len(result.files), "line_path": len(result.rest), "reasons": dict(top)})
