"""The post-parse stage: from a format's parsed rows (lineage + data columns) to the rows a target
receives, for both paths. Each rule is stated once here:

- key columns (`key.pattern`, `key.columns`): the values `key_columns` takes from each object's key,
  added to its rows (a record field of the same name wins where it has a value); an object whose key
  fails is one whole-file error row (`key_failures`);
- the rescued column (`rescue`), when the target has one, follows the data and key columns;
- `_ingested_at` follows the data columns, one timestamp for the whole batch;
- schema alignment: the table's columns first, in its order (absent ones as typed nulls), then new ones;
- error rows: ERROR_SCHEMA, with the batch's `_ingested_at`; a row without a line number is a whole-file
  problem, and such a file contributes no rows (all or nothing per file);
- merge reduction: one row per record key, the largest ordering field (nulls lose, NaN above every
  number, nested values in Spark's order), then the latest event, then the last file and line
  (`latest_rows` on Arrow tables; the line path's `latest_per_key` runs it per key partition).

Both paths run the same Arrow functions: the fast path's tasks on each file's table (`finish`), the
line path on its parsed rows on the executors (`finish_parsed`: `finish` per file, then aligned to
`finished_schema`, run first in the write's or the merge reduction's mapInArrow: `ParsedRows`), and
merge reduction after a shuffle by key (`latest_per_key`). Error rows
are the one rule with a Spark side: the line path's come from Spark's PERMISSIVE parse (the fast path
declines such a file instead), and are stamped here (`stamped`) as the tasks' are. Rows a transform's
SQL made keep a Spark form of the same schema (`finish_rows`). The property test
(`tests/integration/test_dispatch.py`) holds both paths' rows and error rows equal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from s3events.errors import S3EventsError
from s3events.ingest.error_table import ERROR_SCHEMA
from s3events.ingest.files import frames, latest_rows, rescue
from s3events.ingest.files.key_columns import KeyColumns, object_key, with_key_columns
from s3events.ingest.files.line_parse import arrow_schema
from s3events.ingest.files.lineage import INGESTED_AT, TIMESTAMP, event_time
from s3events.ingest.files.merge_input import MergeInput, conform
from s3events.ingest.files.read_output import ReadOutput
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec

__all__ = ["ERROR_SCHEMA", "both_paths_latest", "error_rows", "finish", "finish_parsed", "finish_rows"]


# -- Arrow: one file's rows in a fast-path task ----------------------------------------------------------


def finish(
    table: pa.Table,
    uri: str,
    *,
    key_columns: KeyColumns | None,
    ingested_at: datetime,
    keep: frozenset[str] | None = None,
    rescued: str | None = None,
) -> pa.Table:
    """The key's columns (`key_columns.with_key_columns`), only the columns in `keep` (None: all; see
    `schema_contract.kept_columns`), the rescued column, and the ingestion time."""
    if key_columns is not None:
        table = with_key_columns(table, key_columns, object_key(uri))
    if keep is not None:
        table = table.select([name for name in table.column_names if name in keep])
    if rescued is not None:
        table = rescue.with_rescued(table, rescued)
    return table.append_column(INGESTED_AT, pa.repeat(pa.scalar(ingested_at, TIMESTAMP), table.num_rows))


def finished_schema(
    parsed: pa.Schema,
    existing: pa.Schema | None,
    *,
    key_columns: KeyColumns | None = None,
    keep: frozenset[str] | None = None,
    rescued: str | None = None,
) -> pa.Schema:
    """The schema `finish` gives rows of `parsed`, aligned to the table's: its columns first, in its
    order (absent ones of its type), then the new ones in the order `finish` gives them."""
    fields = [f for f in parsed if f.name != INGESTED_AT]
    if key_columns is not None:
        fields = [  # a record field of a key column's name keeps its type (null: it has none yet)
            pa.field(f.name, key_columns.declared(f.name))
            if f.name in key_columns.names and pa.types.is_null(f.type)
            else f
            for f in fields
        ]
        fields += [pa.field(n, key_columns.declared(n)) for n in key_columns.names if n not in parsed.names]
    if keep is not None:
        fields = [f for f in fields if f.name in keep]
    if rescued is not None:
        fields = [*[f for f in fields if f.name != rescued], pa.field(rescued, pa.string())]
    fields.append(pa.field(INGESTED_AT, TIMESTAMP))
    if existing is None:
        return pa.schema(fields)
    given = {f.name: f for f in fields}
    return pa.schema(
        [
            *[given.get(f.name, f) for f in existing],
            *[f for f in fields if f.name not in existing.names],
        ]
    )


# -- the line path: Spark's parsed rows through the same stage ---------------------------------------------


Stage = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


@dataclass(frozen=True)
class ParsedRows:
    """The line path's parsed rows with the post-parse stage (`stage`, giving `schema`) still to run.
    The mapInArrow that next takes the rows (the write's, the merge reduction's) runs it first, so the
    rows cross into Python once, where that mapInArrow groups them only by columns the stage leaves as
    they are (`groups_by`); else the stage runs in a mapInArrow of its own (`finished`)."""

    parsed: DataFrame
    schema: pa.Schema
    stage: Stage
    made: frozenset[str]  # the columns whose values the stage sets

    def finished(self) -> DataFrame:
        """The finished rows as a DataFrame: one more pass through Python when it runs."""
        return self.parsed.mapInArrow(self.stage, from_arrow_schema(self.schema))

    def groups_by(self, names: Iterable[str]) -> bool:
        """Whether the parsed rows may be grouped by `names` before the stage: it leaves their values as
        they are. Not a column it sets, nor one it casts (to the table's type, or into the rescued column
        when a value does not fit): two values equal only after a cast would fall into different groups,
        and a key's rows must meet in one."""
        parsed = arrow_schema(self.parsed.schema)
        return all(
            n in parsed.names
            and n in self.schema.names
            and n not in self.made
            and parsed.field(n).type == self.schema.field(n).type
            for n in names
        )


def finish_parsed(
    rows: DataFrame,
    *,
    target: TargetSpec,
    existing: pa.Schema | None,
    ingested_at: datetime,
    keep: frozenset[str] | None = None,
) -> ParsedRows:
    """`finish` over the line path's parsed rows (lineage + data columns), then aligned to the table's
    schema (`finished_schema`), on the executors: each file's rows apart when the key gives columns,
    nothing collected. The paths differ only in how bytes become Arrow data."""
    schema = finished_schema(
        arrow_schema(rows.schema),
        existing,
        key_columns=target.key_columns,
        keep=keep,
        rescued=target.rescued_column,
    )
    stage = partial(
        _finished_batches,
        schema=schema,
        finish_file=partial(
            finish,
            key_columns=target.key_columns,
            ingested_at=ingested_at,
            keep=keep,
            rescued=target.rescued_column,
        ),
        per_file=target.key_columns is not None,
    )
    keys = target.key_columns.names if target.key_columns is not None else ()
    made = frozenset([*keys, INGESTED_AT, *([target.rescued_column] if target.rescued_column else [])])
    return ParsedRows(rows, schema, stage, made)


def _finished_batches(
    batches: Iterator[pa.RecordBatch],
    *,
    schema: pa.Schema,
    finish_file: Callable[[pa.Table, str], pa.Table],
    per_file: bool,
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        table = pa.Table.from_batches([batch])
        if not per_file:  # the file matters only to the key's columns
            yield from conform(finish_file(table, ""), schema).to_batches()
            continue
        files = table["_source_file"]
        for uri in pc.unique(files).to_pylist():
            rows = table.filter(pc.equal(files, uri))
            yield from conform(finish_file(rows, uri), schema).to_batches()


def finish_rows(
    rows: DataFrame, *, ingested_at: datetime, existing: pa.Schema | None, rescued: str | None = None
) -> DataFrame:
    """`finished_schema`'s columns as Spark expressions, for rows a transform's SQL made (they stay in
    Spark: its held route collects them with no Python worker): the rescued column last, the ingestion
    time, the table's columns first."""
    schema = finished_schema(arrow_schema(rows.schema), existing, rescued=rescued)
    spark_types = from_arrow_schema(schema)
    columns = [
        F.lit(ingested_at).cast("timestamp").alias(f.name)
        if f.name == INGESTED_AT
        else F.col(f"`{f.name}`")
        if f.name in rows.columns
        else F.lit(None).cast(f.dataType).alias(f.name)
        for f in spark_types.fields
    ]
    return rows.select(*columns)


def key_failures(files: tuple[FileRef, ...], key_columns: KeyColumns | None) -> dict[str, str]:
    """uri -> why the object's key gives it no rows (`KeyColumns.failure`)."""
    if key_columns is None:
        return {}
    failures = {f.uri: key_columns.failure(f.key) for f in files}
    return {uri: f"key: {why}" for uri, why in failures.items() if why is not None}


def without_files(good: DataFrame, bad: DataFrame, failed: dict[str, str]) -> tuple[DataFrame, DataFrame]:
    """The rows and error rows of the files not in `failed` (a key's error row stands for each)."""
    return frames.without_files(good, list(failed)), frames.without_files(bad, list(failed))


def key_error_rows(files: tuple[FileRef, ...], failed: dict[str, str], ingested_at: datetime) -> pa.Table:
    """One whole-file error row (ERROR_SCHEMA) per object in `failed`."""
    rows = [
        {
            "_source_file": f.uri,
            "_source_etag": f.etag,
            "error": failed[f.uri],
            "_event_time": event_time(f),
            "_ingested_at": ingested_at,
        }
        for f in files
        if f.uri in failed
    ]
    return pa.Table.from_pylist(rows, schema=ERROR_SCHEMA)


def error_rows(bad: DataFrame, ingested_at: datetime) -> tuple[pa.Table, dict[str, str]]:
    """The line path's error rows (Spark's PERMISSIVE parse finds them) on the driver, stamped
    (ERROR_SCHEMA), and the whole-file problems among them."""
    errors = stamped(
        bad.select(*[f.name for f in ERROR_SCHEMA if f.name != INGESTED_AT]).toArrow(), ingested_at
    )
    return errors, whole_file_errors(errors)


def stamped(errors: pa.Table, ingested_at: datetime) -> pa.Table:
    """Error rows (LINE_ERROR_SCHEMA's columns) with the batch's ingestion time, as ERROR_SCHEMA."""
    at = pa.repeat(pa.scalar(ingested_at, TIMESTAMP), errors.num_rows)
    return errors.append_column(INGESTED_AT, at).cast(ERROR_SCHEMA)


def whole_file_errors(errors: pa.Table) -> dict[str, str]:
    """uri -> reason of the whole-file problems among error rows (those without a line number)."""
    whole_file = errors.filter(pc.is_null(errors["_source_line"])).select(["_source_file", "error"])
    return {r["_source_file"]: r["error"] for r in whole_file.to_pylist()}


def with_error_rows(out: ReadOutput, tables: list[pa.Table]) -> ReadOutput:
    """`out` with more error rows (ERROR_SCHEMA: a single-path format's, from its tasks)."""
    if tables:
        more = pa.concat_tables([t.cast(ERROR_SCHEMA) for t in tables])
        out.errors = pa.concat_tables([out.errors, more])
        out.failed_files.update(whole_file_errors(more))
    return out


def latest_per_key(rows: DataFrame | ParsedRows, target: TargetSpec) -> DataFrame:
    """One row per record key: `latest_rows.latest` (the fast path's rule) over the rows shuffled by key,
    a mapInArrow on the executors (parsed rows' stage runs in it first where the key allows:
    `ParsedRows.groups_by`). A key or ordering field it cannot reduce (a map, which Spark's window
    cannot order or group either; a key no row holds) fails the batch, naming it."""
    stage: Stage | None = None
    if isinstance(rows, ParsedRows):
        if rows.groups_by(target.record_key):
            spark_schema, stage, rows = from_arrow_schema(rows.schema), rows.stage, rows.parsed
        else:
            rows = rows.finished()
    if stage is None:
        spark_schema = rows.schema
    schema = arrow_schema(spark_schema)
    why = latest_rows.reducible(schema, target.record_key, target.ordering_field)
    if why is not None:
        raise S3EventsError(f"target {target.name}: the batch's latest rows per key cannot be chosen: {why}")
    reduce = partial(
        _latest_partition,
        record_key=target.record_key,
        ordering_field=target.ordering_field,
        schema=schema,
        stage=stage,
    )
    return rows.repartition(*[F.col(f"`{k}`") for k in target.record_key]).mapInArrow(reduce, spark_schema)


def _latest_partition(
    batches: Iterator[pa.RecordBatch],
    *,
    record_key: tuple[str, ...],
    ordering_field: str | None,
    schema: pa.Schema,
    stage: Stage | None,
) -> Iterator[pa.RecordBatch]:
    finished = batches if stage is None else stage(batches)
    received = [b for b in finished if b.num_rows]  # a key's rows are all in this partition
    if received:
        rows = pa.Table.from_batches(received).cast(schema)
        yield from latest_rows.latest(rows, record_key, ordering_field).to_batches()


def both_paths_latest(
    fast: MergeInput, line: MergeInput, schema: pa.Schema, target: TargetSpec
) -> MergeInput:
    """One latest row per key of a batch some of whose files took each path."""
    both = pa.concat_tables([conform(fast.take_rows(), schema), line.take_rows()])
    return MergeInput.held(latest_rows.latest(both, target.record_key, target.ordering_field))
