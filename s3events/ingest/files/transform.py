"""A target's SQL transform on Spark: read at start-up, checked before anything is written, applied to
each batch's parsed rows.

- `src` is the batch's rows, lineage columns included. Each target's transform runs in a Spark session
  of its own (`newSession`: shared JVM and executors, its own temporary views), so two targets' `src`
  never meet.
- The lineage columns survive any projection because the service carries them, not the user's `*`:
  the analyzed plan is rewritten so that every projection passes them on from its input, last, in one
  order (`_carry_lineage`). A row-wise plan (`transform_sql.refusal`) gives every output row exactly one
  input row, so its lineage is that row's.
- Bad data at run time (an ANSI cast that fails, a function that throws on a value) is found file by
  file: the batch is split in halves until each failing file stands alone; it becomes one error row
  (the first line of Spark's message) and every other file is written. A failure that no file explains
  (every half succeeds), that every file of a batch of several has, or that is about the SQL itself (a
  column these rows lack) fails the target instead (`TransformFailed`): nothing is committed for it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from s3events.errors import ConfigError, S3EventsError
from s3events.infra import aws
from s3events.infra.spark_log import PYSPARK_LOGGERS
from s3events.ingest.files.lineage import INGESTED_AT, LINEAGE
from s3events.ingest.files.transform_sql import SRC, PlanNode, refusal, statements

log = logging.getLogger(__name__)

R = TypeVar("R")
CARRIED = (*LINEAGE, INGESTED_AT)  # the columns the service carries through a transform


class TransformFailed(S3EventsError):
    """A transform failed for every file of a batch, or for a reason no file explains: the target fails
    (nothing committed for it) and the others go on."""


@dataclass(frozen=True, slots=True)
class TransformSpec:
    key: str  # the key it came from, as written in the file (for every message about it)
    statements: tuple[str, ...]  # temporary views first, the query whose rows are written last

    @property
    def identity(self) -> str:
        """Which SQL wrote a batch (its commit's info, `status`): a hash of the statements, so a changed
        file or value shows as a new identity."""
        digest = hashlib.sha256(";\n".join(self.statements).encode("utf-8")).hexdigest()
        return f"sha256:{digest[:16]}"


@dataclass(slots=True)
class Transformed:
    rows: pa.Table
    errors: list[tuple[str, str]] = field(default_factory=list)  # (source file, first line of the error)
    filtered: int = 0  # input rows that gave no output row (a WHERE)


def transform_spec(
    *, sql: str | None, sql_file: str | None, keys: tuple[str, str], aws_options: aws.AwsOptions
) -> TransformSpec | None:
    """A target's transform from its `transform.sql` or `transform.sql.file` value (`keys`: both keys'
    names as written), or None; ConfigError (exit 2) naming the key when both are set, the file cannot be
    read, or it holds no statement."""
    inline, from_file = keys
    if sql and sql_file:
        raise ConfigError(inline, f"set either {inline} or {from_file}, not both")
    if not sql and not sql_file:
        return None
    key = inline if sql else from_file
    text = sql or read_user_file(sql_file or "", key, aws_options)
    found = statements(text)
    if not found:
        raise ConfigError(key, "holds no SQL statement")
    return TransformSpec(key, tuple(found))


def read_user_file(source: str, key: str, aws_options: aws.AwsOptions) -> str:
    """A file a key names (`s3://…` with our S3 client, or a local path) as UTF-8 text, read at start-up;
    ConfigError naming the key when it cannot be read."""
    try:
        if source.startswith("s3://"):
            bucket, _, name = source[len("s3://") :].partition("/")
            body = aws.client(aws_options, "s3").get_object(Bucket=bucket, Key=name)["Body"].read()
            return bytes(body).decode("utf-8")
        return Path(source).read_text(encoding="utf-8")
    except Exception as exc:  # any reason the file cannot be read is the user's to fix
        raise ConfigError(key, f"cannot read {source}: {first_line(exc)}") from exc


class Transform:
    """One target's transform in a Spark session of its own."""

    def __init__(self, spark: Any, spec: TransformSpec, *, marker: tuple[str, str] | None = None) -> None:
        self.spec = spec
        self._marker = marker  # merge mode's delete.field: (its key, the column it names)
        self._session = spark.newSession()
        # `createDataFrame` of an Arrow table below this threshold becomes a LocalRelation: rows converted
        # one by one on the driver and kept in the plan (measured: twice the JVM's CPU of a 160,000-row
        # batch, and a 1 GiB driver heap filled within a dozen batches). At 0 the batches stay Arrow until
        # the tasks decode them.
        self._session.conf.set("spark.sql.execution.arrow.localRelationThreshold", "0")
        self.removes_rows = True  # whether the last plan can drop an input row (a WHERE, a generator)
        # Whether an input row of the last plan may give several rows (a generator; UNION ALL of branches
        # over src): then the rows it removed are counted by lineage, not as input less output.
        self.fans_out = True
        self._analysed = False  # whether the SQL has analysed against rows once (start-up or a batch)
        self._jvm: _Classes | None = None  # looked up at the first plan rewrite
        # src's schema (IPC bytes) -> its Arrow plan, or why it runs on Spark (`transform_arrow_route`)
        self.routes: dict[bytes, Any] = {}

    def check(self, schema: pa.Schema) -> pa.Schema:
        """The schema of the rows the transform writes for input rows of `schema`; ConfigError naming the
        key (one line, first line of Spark's message) for SQL Spark refuses or a plan that is not
        row-wise. Runs no Spark job."""
        with quiet_spark_errors():
            try:
                frame = self._frame(schema.empty_table())
            except ConfigError:
                raise
            except Exception as exc:
                raise ConfigError(self.spec.key, first_line(exc)) from exc
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(frame.schema, timezone=self._session.conf.get("spark.sql.session.timeZone"))

    def apply(self, rows: pa.Table) -> Transformed:
        """The transform of `rows`; the files that fail it as error rows, the rest transformed."""

        def run(files: list[str]) -> pa.Table:
            part = rows.filter(pc.is_in(rows["_source_file"], value_set=pa.array(files, pa.string())))
            return self._frame(part).toArrow()

        with quiet_spark_errors():
            outputs, failed = isolate(_files(rows), run, key=self.spec.key)
        gone = pa.array(list(failed), pa.string())
        kept = rows.filter(pc.invert(pc.is_in(rows["_source_file"], value_set=gone))) if failed else rows
        out = pa.concat_tables(outputs) if outputs else self._empty_output(rows.schema)
        return Transformed(out, sorted(failed.items()), filtered=rows_without_output(kept, out))

    def release(self) -> None:
        """Drop the session's temporary views (`src`, and those the SQL's statements made) once a batch is
        done: a view over Arrow rows holds them in the driver JVM's heap until the next batch replaces
        it (measured: 130 MB for a batch of 85 MB of Arrow, in every transformed target's session)."""
        names = self._session._jsparkSession.sessionState().catalog().getTempViewNames()
        for name in _items(names):
            self._session.catalog.dropTempView(str(name))

    def _empty_output(self, schema: pa.Schema) -> pa.Table:
        return self.check(schema).empty_table()

    @property
    def session(self) -> Any:
        """The transform's own Spark session (a DataFrame for `frame_of` must belong to it)."""
        return self._session

    def _frame(self, rows: pa.Table) -> Any:
        src = self._session.createDataFrame(rows if rows.num_rows else [], schema=_spark_schema(rows.schema))
        return self.frame_of(src)

    def _analyzed(self) -> Any:
        """The query's analyzed plan over the `src` view. SQL that does not analyse against the first
        rows it meets (start-up's declared schema, or the first batch's) is a configuration mistake:
        ConfigError naming the key, before anything is written; later, rows that lack what the SQL
        names fail the target (`isolate`), as the data's problem."""
        *setup, query = self.spec.statements
        try:
            with quiet_spark_errors():
                for statement in setup:
                    self._session.sql(statement)
                analyzed = self._session.sql(query)._jdf.queryExecution().analyzed()
        except Exception as exc:
            if self._analysed or not about_the_sql(exc):
                raise
            raise ConfigError(self.spec.key, first_line(exc)) from exc
        self._analysed = True
        return analyzed

    def frame_of(self, src: Any) -> Any:
        """The transform's DataFrame over the DataFrame `src` (of `session`), its plan checked and its
        lineage carried."""
        from pyspark.sql import DataFrame

        session = self._session
        src.createOrReplaceTempView(SRC)
        analyzed = self._analyzed()
        tree = _plan_node(analyzed)
        self.removes_rows = _holds(tree, {"Filter", "Generate"})
        self.fans_out = _holds(tree, {"Generate", "Union"})
        reason = refusal(tree)
        if reason:
            raise ConfigError(self.spec.key, f"a transform must be row-wise, and this one has {reason}")
        self._check_marker(src.columns, [str(a.name()) for a in _items(analyzed.output())])
        jvm = self._jvm = self._jvm or _Classes.of(session._jvm)
        if analyzed.getClass().getSimpleName() == "WithCTE":  # references to a CTE keep stale columns
            analyzed = jvm.inline_cte(True, False).apply(analyzed)
        carried = [c for c in CARRIED if c in src.columns]
        plan = _carry_lineage(jvm, analyzed, carried)
        return DataFrame(jvm.dataset.ofRows(session._jsparkSession, plan), session)

    def _check_marker(self, inputs: Sequence[str], outputs: Sequence[str]) -> None:
        """ConfigError when the rows hold delete.field's column and the transform drops it: the MERGE
        would see no deletes (a row without the column is an upsert), silently."""
        if self._marker is None:
            return
        key, column = self._marker
        if column in inputs and column not in outputs:
            raise ConfigError(
                self.spec.key,
                f"the transform drops {column}, the column {key} names: every delete would be written "
                f"as an upsert; select it (SELECT *, ... or name {column})",
            )


def isolate(files: list[str], run: Callable[[list[str]], R], *, key: str) -> tuple[list[R], dict[str, str]]:
    """`run` over `files`, or over halves of them until each file that makes it fail stands alone: the
    results, and the failing files (uri -> the first line of Spark's message). TransformFailed when the
    SQL itself is refused, when no single file explains a failure, or when every file of several fails."""
    results, failed = _halving(files, run, key)
    if failed and len(failed) == len(files) > 1:
        raise TransformFailed(f"{key} failed for every file of the batch: {next(iter(failed.values()))}")
    return results, failed


def _halving(files: list[str], run: Callable[[list[str]], R], key: str) -> tuple[list[R], dict[str, str]]:
    if not files:
        return [], {}
    try:
        return [run(files)], {}
    except ConfigError:
        raise
    except Exception as exc:
        reason = first_line(exc)
        if about_the_sql(exc):  # the SQL does not fit these rows: no file is to blame
            raise TransformFailed(f"{key}: {reason}") from exc
        if len(files) == 1:
            return [], {files[0]: reason}
        results: list[R] = []
        failed: dict[str, str] = {}
        for half in (files[: len(files) // 2], files[len(files) // 2 :]):
            got, lost = _halving(half, run, key)
            results.extend(got)
            failed.update(lost)
        if not failed:
            raise TransformFailed(f"{key} failed for no file in particular: {reason}") from exc
        return results, failed


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def _plan_node(node: Any) -> PlanNode:
    kind = node.getClass().getSimpleName()
    src_view = kind == "View" and str(node.desc().identifier().table()) == SRC
    return PlanNode(
        name=kind,
        children=tuple(_plan_node(c) for c in _items(node.children())),
        src_view=src_view,
        has_subquery=node.subqueries().size() > 0,
    )


def _holds(node: PlanNode, kinds: set[str]) -> bool:
    return node.name in kinds or any(_holds(child, kinds) for child in node.children)


@dataclass(frozen=True, slots=True)
class _Classes:
    """The JVM classes the plan rewrite calls, looked up once per transform: each step of a dotted
    `jvm.a.b.C` is a py4j round trip (measured: a third of the rewrite's 150 round trips a batch, each
    a wait for the JVM's thread on a loaded machine)."""

    array_list: Any
    converters: Any
    project: Any
    dataset: Any
    inline_cte: Any

    @classmethod
    def of(cls, jvm: Any) -> _Classes:
        spark = jvm.org.apache.spark.sql
        return cls(
            array_list=jvm.java.util.ArrayList,
            converters=jvm.scala.jdk.javaapi.CollectionConverters,
            project=spark.catalyst.plans.logical.Project,
            dataset=spark.classic.Dataset,
            inline_cte=spark.catalyst.optimizer.InlineCTE,
        )


def _carry_lineage(jvm: _Classes, node: Any, carried: Sequence[str]) -> Any:
    """`node` with every projection passing the `carried` columns on from its input, last, in order."""
    children = _items(node.children())
    if children:
        node = node.withNewChildren(_seq(jvm, [_carry_lineage(jvm, c, carried) for c in children]))
    if node.getClass().getSimpleName() == "Project":
        child = _items(node.children())[0]
        inputs = {str(a.name()): a for a in _items(child.output())}
        kept = [e for e in _items(node.projectList()) if str(e.name()) not in carried]
        node = jvm.project(_seq(jvm, [*kept, *(inputs[name] for name in carried if name in inputs)]), child)
    return node


def _items(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


def _seq(jvm: _Classes, items: Sequence[Any]) -> Any:
    found = jvm.array_list()
    for item in items:
        found.add(item)
    return jvm.converters.asScala(found).toSeq()


def _files(rows: pa.Table) -> list[str]:
    return sorted(str(uri) for uri in pc.unique(rows["_source_file"]).to_pylist() if uri is not None)


def rows_without_output(rows: pa.Table, out: pa.Table) -> int:
    """Input rows no output row came from (lineage: file and line)."""
    if "_source_line" not in rows.column_names or "_source_line" not in out.column_names:
        return max(rows.num_rows - out.num_rows, 0)
    return int(pc.sum(pc.invert(pc.is_in(_row_keys(rows), value_set=_row_keys(out)))).as_py() or 0)


def _row_keys(rows: pa.Table) -> pa.Array:
    parts = [rows["_source_file"].cast(pa.string()), rows["_source_line"].cast(pa.string())]
    return pc.binary_join_element_wise(*parts, "\x00").combine_chunks()


def about_the_sql(exc: BaseException) -> bool:
    """Whether Spark refused the SQL itself (a parse or analysis error), not a value while running it."""
    from pyspark.errors import AnalysisException, ParseException

    return isinstance(exc, AnalysisException | ParseException)


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


@contextmanager
def quiet_spark_errors() -> Iterator[None]:
    """PySpark logs the SQL errors it turns into Python exceptions, JVM stack included; ours are caught
    and reported in one line, so that log is silenced while a transform runs."""
    names = ("py4j", "py4j.java_gateway", "pyspark", *PYSPARK_LOGGERS)
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
