"""The fast path's task, inside a Spark executor (or on a driver thread): fetch the task's objects, parse
each whole with its format's parser, finish the rows (`post_parse.finish`) and write them as data files,
in one Python pass. It hands back a row per written file, per declined file and per CSV header seen.

A parser may give a file's rows in parts (Parquet, row group by row group): the task then writes them
apart from other files' rows once they reach its flush bound, so a part that fails later (a corrupt row
group) declines the whole file and the task removes the data files it had written of it.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from functools import partial

import pyarrow as pa

from s3events.infra.aws import AwsOptions
from s3events.infra.parquet_files import (
    WrittenFile,
    from_row,
    remove_data_files,
    stage_table,
    to_row,
    write_partitioned,
)
from s3events.ingest.files import latest_rows, post_parse, task_rows
from s3events.ingest.files.formats.base import (
    LINE_ERROR_SCHEMA,
    FileDeclined,
    FileFailed,
    FileParser,
    ParsedFile,
    SinglePathParser,
    parse_or_decline,
)
from s3events.ingest.files.key_columns import KeyColumns
from s3events.ingest.files.lineage import FIXED, lineage_columns
from s3events.ingest.files.lines import codec_for_key
from s3events.ingest.files.merge_input import TYPE_ERRORS
from s3events.ingest.files.objects import MAX_OBJECT_BYTES, Fetched, fetch
from s3events.ingest.model import FileRef

_FLUSH_BYTES = 128 << 20  # Arrow bytes a task holds before it writes a file (bounds its memory)
# Objects a task downloads ahead of the one it parses: always 2 (each at most MAX_OBJECT_BYTES), and more,
# up to 16, while their sizes (as their events state them, which `fetch` holds them to) add up to at most
# 16 MiB: a batch of many small files is bound by GET latency, not bytes (docs/architecture.md).
_FETCH_AHEAD = 2
_FETCH_AHEAD_MAX = 16
_FETCH_AHEAD_BYTES = 16 << 20


def held_bytes(ref: FileRef) -> int | None:
    """What reading `ref` may hold: its stated size (`fetch` refuses more), a compressed file at the bound
    its content is read up to (a small .gz may expand a thousandfold); None when its size is unknown."""
    return MAX_OBJECT_BYTES if codec_for_key(ref.key) else ref.size


def fast_task(
    refs: list[FileRef],
    *,
    aws: AwsOptions,
    parser: FileParser,
    table_uri: str,
    partition_by: tuple[str, ...],
    ingested_at: datetime,
    record_key: tuple[str, ...] | None = None,
    ordering_field: str | None = None,
    marker: str | None = None,
    stage: bool = False,
    key_columns: KeyColumns | None = None,
    keep: frozenset[str] | None = None,
    rescued: str | None = None,
    reshape: Callable[[pa.Table], pa.Table] | None = None,
) -> pa.RecordBatch:
    """One task's files: fetched, parsed, written as data files; a row per written file, per declined
    file and per CSV header line seen. Merge mode (`record_key`): what is written is each flush's
    latest row per record key (`latest_rows`), and a row hands back those rows' keys, with their
    `marker` (delete.field) values (`stage`: through the table's staging directory). `reshape`: a
    transform's Arrow plan over each file's finished rows (`transform_arrow_route`; FileDeclined when
    it cannot give Spark's answer)."""
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
        marker=marker,
        stage=stage,
        reshaped=reshape is not None,
    )
    finish, dropped, removed = _finisher(key_columns, ingested_at, keep, rescued, reshape)
    remove = partial(remove_data_files, table_uri, options=aws)
    errors: list[pa.Table] = []  # a single-path format's error rows
    with contextlib.closing(fetched_ahead(refs, aws)) as objects:
        for ref, fetched in objects:
            parsed = _parsed(ref, fetched, parser, hints, aws, key_columns)
            if parsed.header is not None:
                headers.add(parsed.header)
            if parsed.parts is not None:
                held = take_parts(ref, parsed.parts, pending, held, out, flush, finish, remove, errors)
                errors.extend(parsed.errors)
                continue
            table = _whole_file(ref, fetched, parsed, finish, out, errors)
            if table is None:
                continue
            pending.append((ref, table))
            held = _flushed_at_bound(pending, held + table.nbytes, out, flush)
    out.extend(flush(pending))
    return task_rows.result(out, headers, dropped, errors, removed[0], ingested_at, len(refs))


def _finisher(
    key_columns: KeyColumns | None,
    ingested_at: datetime,
    keep: frozenset[str] | None,
    rescued: str | None,
    reshape: Callable[[pa.Table], pa.Table] | None,
) -> tuple[Callable[[pa.Table, str], pa.Table], set[str], list[int]]:
    """The task's step from a file's parsed rows to those it writes (`post_parse.finish`, then a
    transform's `reshape`), the new fields it drops (schema.evolution=ignore, filled as it runs) and
    the rows `reshape` removed (one count)."""
    dropped: set[str] = set()
    finish = partial(
        _finish, key_columns=key_columns, ingested_at=ingested_at, keep=keep, dropped=dropped, rescued=rescued
    )
    removed = [0]
    if reshape is not None:
        finish = partial(_reshaped, finish=finish, reshape=reshape, removed=removed)
    return finish, dropped, removed


def _reshaped(
    table: pa.Table,
    uri: str,
    *,
    finish: Callable[[pa.Table, str], pa.Table],
    reshape: Callable[[pa.Table], pa.Table],
    removed: list[int],
) -> pa.Table:
    finished = finish(table, uri)
    out = reshape(finished)
    removed[0] += finished.num_rows - out.num_rows
    return out


def _flushed_at_bound(
    pending: list[tuple[FileRef, pa.Table]],
    held: int,
    out: list[dict[str, object]],
    flush: Callable[[list[tuple[FileRef, pa.Table]]], list[dict[str, object]]],
) -> int:
    """The bytes the task holds: `held`, or 0 once they reach the flush bound and `pending` is written."""
    if held < _FLUSH_BYTES:
        return held
    out.extend(flush(pending))
    pending.clear()
    return 0


def _whole_file(
    ref: FileRef,
    fetched: Fetched,
    parsed: ParsedFile,
    finish: Callable[[pa.Table, str], pa.Table],
    out: list[dict[str, object]],
    errors: list[pa.Table],
) -> pa.Table | None:
    """A file parsed whole, finished for writing; or None, its error row in `errors` (a single-path
    format's failed file) or its declined row in `out`."""
    errors.extend(parsed.errors)
    if parsed.failed:
        errors.append(file_error(ref, fetched.etag or ref.etag, parsed.reason or "unreadable"))
        return None
    if parsed.table is None:
        out.append({"event_id": ref.event_id, "reason": parsed.reason})
        return None
    try:
        return finish(parsed.table, ref.uri)
    except FileDeclined as exc:  # a transform's Arrow plan could not give Spark's answer
        out.append({"event_id": ref.event_id, "reason": exc.reason})
        return None


def _parsed(
    ref: FileRef,
    fetched: Fetched,
    parser: FileParser,
    hints: dict[str, pa.DataType],
    aws: AwsOptions,
    key_columns: KeyColumns | None,
) -> ParsedFile:
    """The file parsed, or why it takes the line path. A key that gives no columns is an error row: the
    line path's to record, or the task's for a format without one, which also streams an object it could
    not hold whole (or read: its error row) instead of declining it."""
    single = isinstance(parser, SinglePathParser)
    unkeyed = key_columns.failure(ref.key) if key_columns is not None else None
    if unkeyed is not None:
        return ParsedFile(None, f"key: {unkeyed}" if single else unkeyed, failed=single)
    if fetched.data is not None:
        return parse_or_decline(parser, fetched.data, ref, fetched.etag, hints)
    if isinstance(parser, SinglePathParser):
        return parser.streamed(ref, aws)
    return ParsedFile(None, fetched.reason)


def file_error(ref: FileRef, etag: str | None, reason: str) -> pa.Table:
    """A whole-file error row (LINE_ERROR_SCHEMA: no line number, no raw line)."""
    lineage = lineage_columns(ref, etag, None, 1)
    columns = [*lineage[:3], pa.nulls(1, pa.string()), pa.array([reason], pa.string()), lineage[3]]
    return pa.Table.from_arrays(columns, schema=LINE_ERROR_SCHEMA)


def _finish(
    table: pa.Table,
    uri: str,
    *,
    key_columns: KeyColumns | None,
    ingested_at: datetime,
    keep: frozenset[str] | None,
    dropped: set[str],
    rescued: str | None = None,
) -> pa.Table:
    """`post_parse.finish`, noting the fields `keep` drops."""
    finished = post_parse.finish(
        table, uri, key_columns=key_columns, ingested_at=ingested_at, keep=keep, rescued=rescued
    )
    if keep is not None:
        given = {*table.column_names, *(key_columns.names if key_columns is not None else ())}
        dropped.update(given - set(finished.column_names))
    return finished


def take_parts(
    ref: FileRef,
    parts: Iterator[pa.Table],
    pending: list[tuple[FileRef, pa.Table]],
    held: int,
    out: list[dict[str, object]],
    flush: Callable[[list[tuple[FileRef, pa.Table]]], list[dict[str, object]]],
    finish: Callable[[pa.Table, str], pa.Table],
    remove: Callable[[list[WrittenFile]], None],
    errors: list[pa.Table],
) -> int:
    """One file's rows part by part into `pending` (or, past the flush bound, into data files of its own,
    so that a later part's failure can take them back); returns the bytes the task then holds. A part
    that fails (FileFailed) makes the file one error row in `errors` instead of a declined file."""
    mine: list[tuple[FileRef, pa.Table]] = []
    own: list[dict[str, object]] = []  # result rows of data files holding only this file's rows
    reason: str | None = None
    failed = False
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
        reason, failed = exc.reason, isinstance(exc, FileFailed)
    reason = reason or next((str(r["reason"]) for r in own if r.get("event_id") is not None), None)
    if reason is None:
        out.extend(own)
        pending.extend(mine)
        return held
    remove([from_row(r) for r in own if r.get("path") is not None])
    if failed:  # all or nothing per file: the rows it had are dropped, one error row says why
        errors.append(file_error(ref, ref.etag, reason))
    else:
        out.append({"event_id": ref.event_id, "reason": reason})
    return held - sum(t.nbytes for _, t in mine)


def fetched_ahead(refs: list[FileRef], aws: AwsOptions) -> Generator[tuple[FileRef, Fetched], None, None]:
    """`_fetched_ahead` on a pool of its own, shut down when the iteration ends or is closed."""
    with ThreadPoolExecutor(max_workers=_FETCH_AHEAD_MAX, thread_name_prefix="s3events-fetch") as pool:
        yield from _fetched_ahead(pool, refs, aws)


def _fetched_ahead(
    pool: ThreadPoolExecutor, refs: list[FileRef], aws: AwsOptions
) -> Iterator[tuple[FileRef, Fetched]]:
    """The task's objects in order, the next ones already downloading while one is parsed: a GET's
    latency overlaps with parsing and with other GETs instead of adding to them."""
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
    held = held_bytes(ref)
    return MAX_OBJECT_BYTES if held is None else held


def _flush(
    pending: list[tuple[FileRef, pa.Table]],
    *,
    table_uri: str,
    aws: AwsOptions,
    partition_by: tuple[str, ...],
    parser: FileParser,
    record_key: tuple[str, ...] | None,
    ordering_field: str | None,
    marker: str | None = None,
    stage: bool = False,
    reshaped: bool = False,
) -> list[dict[str, object]]:
    if not pending:
        return []
    try:
        # Files of one task may differ in columns (each has its own); an integer column of one file
        # and a double column of another become double, as Spark's inference would have it.
        table = pa.concat_tables([t for _, t in pending], promote_options="permissive")
    except TYPE_ERRORS as exc:
        return task_rows.declined(pending, f"types differ between files: {exc}")
    odd = [f.name for f in table.schema if f.name not in FIXED and not parser.keeps_type(f.type)]
    if odd and not reshaped:  # e.g. structs merged in an order Spark would not give (a transform's: Spark's)
        return task_rows.declined(pending, f"merged types of {', '.join(odd)} differ from Spark's inference")
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
        sent = [*record_key, marker] if marker else record_key  # the marker: whether a MERGE is needed
        keys = table.select([name for name in sent if name in table.column_names])
        if stage:
            out.append(
                {"staged": stage_table(keys, table_uri=table_uri, options=aws), "schema": schema_bytes}
            )
        else:
            out.append({"rows": task_rows.ipc(keys), "schema": schema_bytes})
    return out
