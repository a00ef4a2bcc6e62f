"""A transform's Arrow route: the batch read as a plain fast-path batch, each file's rows put through the
transform's Arrow plan (`transform_arrow`) in the task that parsed them, before they are written. No
row enters the JVM.

The route is taken when Spark's optimized plan of the SQL over the batch's `src` translates
(`transform_arrow_plan`), the target appends (a MERGE target, `schema.evolution` other than `add` and a
rescued column keep Spark's route) and the fast path reads every file. `src`'s schema is what the
Spark route would give it: one file of the batch is parsed on the driver and the schema decided as
for a whole batch (`transform_src.sample_schema`); a file whose columns or types differ is not the
plan's `src` and declines. Whenever the Arrow route cannot give Spark's answer (a file declined, a
value the plan cannot take, an error row, types the table holds otherwise) its files are removed and
the batch runs on Spark, which owns the splitting out of failing files: the Arrow route never
decides an error row, nor judges the SQL (a column the sampled file lacks leaves it to Spark).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime
from functools import partial

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from s3events.errors import ConfigError
from s3events.infra.aws import AwsOptions
from s3events.infra.parquet_files import remove_data_files
from s3events.ingest.files.dispatch import fast_parser
from s3events.ingest.files.fast_path import describe, run_fast
from s3events.ingest.files.formats.base import FileDeclined, FileParser
from s3events.ingest.files.line_parse import arrow_schema, declared_schema
from s3events.ingest.files.post_parse import ERROR_SCHEMA
from s3events.ingest.files.read_output import ReadOutput
from s3events.ingest.files.transform import Transform, first_line, quiet_spark_errors
from s3events.ingest.files.transform_arrow import ArrowPlan, NotOurAnswer, evaluate
from s3events.ingest.files.transform_arrow_plan import translate
from s3events.ingest.files.transform_src import sample_schema
from s3events.ingest.model import Batch
from s3events.ingest.target import TargetSpec

log = logging.getLogger(__name__)

# (statements, src's schema) -> its Arrow plan or why none, for the process: what Spark's analysis decided
# depends on nothing else (the session's ANSI mode and time zone are the product's), and a run that
# starts a new `Transform` per target then skips the JVM's analysis (0.1-0.5 s of its CPU per target).
_DECIDED: dict[tuple[tuple[str, ...], bytes], ArrowPlan | str] = {}
_DECIDED_MAX = 256


def run_arrow(
    spark: SparkSession,
    batch: Batch,
    target: TargetSpec,
    transform: Transform,
    *,
    existing_schema: pa.Schema | None,
    aws: AwsOptions,
    ingested_at: datetime,
) -> ReadOutput | None:
    """The batch by the Arrow route, or None (nothing of it left written) when Spark's route takes it."""
    plan = _plan_for(spark, batch, target, transform, aws, ingested_at)
    if plan is None:
        return None
    schema = aligned(plan.output, existing_schema)
    if schema is None or any(name not in plan.output.names for name in target.partition_by):
        return None  # Spark's route says what is wrong
    parser = _parser(target)
    assert parser is not None
    reshape = partial(reshaped, plan)
    fast = run_fast(
        spark,
        batch.files,
        target,
        parser=parser,
        existing=None,
        aws=aws,
        ingested_at=ingested_at,
        reshape=reshape,
    )
    if fast.rest or fast.errors or fast.schema is None or fast.merge is not None:
        remove_data_files(target.path, fast.files, aws)
        log.info("target %s: the transform runs on Spark for this batch: %s", target.name, describe(fast))
        return None
    out = ReadOutput(schema, ERROR_SCHEMA.empty_table(), rows=fast.rows, files=fast.files)
    out.fast_path_files, out.filtered = len(batch.files), fast.filtered
    out.transform = transform.spec.identity
    return out


def reshaped(plan: ArrowPlan, table: pa.Table) -> pa.Table:
    """`evaluate` in a fast-path task: a file it cannot answer for Spark declines (the batch then runs
    on Spark)."""
    try:
        return evaluate(plan, table)
    except NotOurAnswer as exc:
        raise FileDeclined(f"transform in Arrow: {exc}") from exc


def arrow_plan(transform: Transform, src: pa.Schema) -> ArrowPlan | None:
    """The transform's Arrow plan over rows of `src`, or None (Spark's route, which also judges SQL
    that does not analyse); decided once per `src` schema, and said in one log line."""
    key = src.serialize().to_pybytes()
    if key not in transform.routes:
        known = (transform.spec.statements, key)
        found = _DECIDED[known] if known in _DECIDED else _translated(transform, src)
        if len(_DECIDED) < _DECIDED_MAX:
            _DECIDED[known] = found
        transform.routes[key] = found
        if isinstance(found, ArrowPlan):
            log.info(
                "%s: the transform runs in Arrow (every step of its plan is proven equal)", transform.spec.key
            )
        else:
            log.info("%s: the transform runs on Spark: its plan has %s", transform.spec.key, found)
    found = transform.routes[key]
    return found if isinstance(found, ArrowPlan) else None


def _translated(transform: Transform, src: pa.Schema) -> ArrowPlan | str:
    session = transform.session
    # Rows Spark cannot see through: over an empty or local relation the optimizer would fold the plan.
    rows = session.createDataFrame(session.sparkContext.emptyRDD(), schema=from_arrow_schema(src))
    try:
        frame = transform.frame_of(rows)
    except ConfigError as exc:  # src of one file may lack a column: the batch's analysis decides
        return f"SQL that does not analyse against this src ({exc})"
    try:
        with quiet_spark_errors():
            found = translate(frame._jdf.queryExecution().optimizedPlan(), src)
            spark_schema = arrow_schema(frame.schema)
    except Exception as exc:  # Spark's route will say it again, with its rules
        return f"no plan Spark could optimize ({first_line(exc)})"
    if isinstance(found, ArrowPlan):
        computed = [f.name for f in found.output if f.name not in src.names or src.field(f.name) != f]
        if [found.output.field(n) for n in computed] != [spark_schema.field(n) for n in computed]:
            return f"output types other than Spark's ({found.output} against {spark_schema})"
    return found


def announce(transform: Transform, target: TargetSpec, src: pa.Schema) -> None:
    """At start-up, when `src` is known (the target declares `schema`): the log line saying which route
    the target's transform takes, and why."""
    if not _noted_ineligible(transform, target):
        arrow_plan(transform, src)


def _noted_ineligible(transform: Transform, target: TargetSpec) -> bool:
    why = _ineligible(target)
    if why is not None and b"" not in transform.routes:
        transform.routes[b""] = why
        log.info("%s: the transform runs on Spark: %s", transform.spec.key, why)
    return why is not None


def _plan_for(
    spark: SparkSession,
    batch: Batch,
    target: TargetSpec,
    transform: Transform,
    aws: AwsOptions,
    ingested_at: datetime,
) -> ArrowPlan | None:
    if _noted_ineligible(transform, target):
        return None
    parser = _parser(target)
    if parser is None or not batch.files:
        return None
    src = sample_schema(spark, batch.files, _as_src(target), parser=parser, aws=aws, ingested_at=ingested_at)
    return arrow_plan(transform, src) if src is not None else None


def _ineligible(target: TargetSpec) -> str | None:
    if target.mode != "append":
        return "the target merges (the Arrow route appends only)"
    if target.schema_evolution != "add" or target.rescued_column is not None:
        return "schema.evolution other than add, or a rescued column"
    return None


def _as_src(target: TargetSpec) -> TargetSpec:
    return replace(target, partition_by=(), record_key=(), ordering_field=None)


def _parser(target: TargetSpec) -> FileParser | None:
    as_src = _as_src(target)
    declared = declared_schema(as_src)
    return fast_parser(as_src, arrow_schema(declared) if declared is not None else None, None)


def aligned(output: pa.Schema, existing: pa.Schema | None) -> pa.Schema | None:
    """The table's schema after rows of `output`: its columns first, in its order, then new ones (as
    `post_parse.finish_rows` aligns Spark's rows); None when a column the table holds comes out with
    another type."""
    if existing is None:
        return output
    for f in output:
        if f.name in existing.names and existing.field(f.name).type != f.type:
            return None
    new = [f for f in output if f.name not in existing.names]
    return pa.schema([*[f.with_nullable(True) for f in existing], *new])
