"""Wiring: settings → the metadata feed, each target's tables and the Spark reader → the `Ingest` cycle;
and the --once / --continuous runs."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from s3events.catalog.service import CatalogSync, build_sync
from s3events.config import Settings, keys
from s3events.infra import aws
from s3events.ingest.cycle import Ingest, IngestCycle, Target
from s3events.ingest.error_table import ErrorTable
from s3events.ingest.feed import MetadataFeed
from s3events.ingest.model import Batch
from s3events.ingest.ports import Feed, ReadBatch, ReadResult
from s3events.ingest.schema_file import with_schema_file
from s3events.ingest.target import TargetSpec, target_specs
from s3events.ingest.target_table import TargetTable
from s3events.runloop import StopFlag, run_loop

if TYPE_CHECKING:
    from s3events.catalog.metrics import CatalogMetrics
    from s3events.ingest.metrics import IngestObserved
    from s3events.ingest.notify.announce import Announcers

log = logging.getLogger(__name__)


def transforms_of(specs: Sequence[TargetSpec], options: aws.AwsOptions) -> dict[str, Any]:
    """Target name -> its TransformSpec, for the targets with one (their SQL read now: ConfigError)."""
    from s3events.ingest.files.transform import transform_spec

    found = {}
    for spec in specs:
        names = (
            keys.TARGET_TRANSFORM_SQL.concrete(spec.name),
            keys.TARGET_TRANSFORM_SQL_FILE.concrete(spec.name),
        )
        loaded = transform_spec(
            sql=spec.transform_sql, sql_file=spec.transform_sql_file, keys=names, aws_options=options
        )
        if loaded is not None:
            found[spec.name] = loaded
    return found


def declared_arrow_schema(spec: TargetSpec) -> pa.Schema:
    """`src`'s schema for a target whose `schema` key declares what its files hold: lineage, then it (and
    the rescued column, when the target has one)."""
    from s3events.ingest.files.line_parse import arrow_schema, declared_schema
    from s3events.ingest.files.lineage import INGESTED_AT, LINEAGE_FIELDS, TIMESTAMP

    declared = declared_schema(spec)
    assert declared is not None
    data = [f for f in arrow_schema(declared) if f.name != spec.rescued_column]
    rescued = [pa.field(spec.rescued_column, pa.string())] if spec.rescued_column else []
    return pa.schema([*LINEAGE_FIELDS, *data, *rescued, pa.field(INGESTED_AT, TIMESTAMP)])


class SparkRead:
    """Step 2 on Spark. The session starts at the first batch: a run that finds nothing never starts it."""

    def __init__(self, settings: Settings, specs: Sequence[TargetSpec] = (), *, spark: Any = None) -> None:
        self._aws = aws.options_from(settings)
        self._spark = spark
        self._master = settings.get(keys.SPARK_MASTER)  # None: spark-submit's --master decides
        self._transforms = transforms_of(specs, self._aws)  # the SQL read (and refused) at start-up
        self._checked: dict[str, Any] = {}  # target name -> its Transform, built at its first use
        for spec in specs:
            if spec.name in self._transforms and spec.schema_ddl:  # src known: analysed before any batch
                self._transform(spec).check(declared_arrow_schema(spec))
                from s3events.ingest.files.transform_arrow_route import announce

                announce(self._transform(spec), spec, declared_arrow_schema(spec))  # which route, and why

    @property
    def spark(self) -> Any:
        if self._spark is None:
            from s3events.infra.spark import get_spark

            self._spark = get_spark(master=self._master, app_name="s3events-ingest")
        return self._spark

    def _transform(self, spec: TargetSpec) -> Any:
        from s3events.ingest.files.scratch import remove_left
        from s3events.ingest.files.transform import Transform

        if spec.name not in self._checked:
            field = spec.delete.field if spec.delete is not None else None
            marker = (keys.TARGET_DELETE_FIELD.concrete(spec.name), field) if field else None
            self._checked[spec.name] = Transform(self.spark, self._transforms[spec.name], marker=marker)
            remove_left(spec.path, self._aws)  # scratch folders of a run killed mid-batch
        return self._checked[spec.name]

    def __call__(self, batch: Batch, spec: TargetSpec, *, existing_schema: pa.Schema | None) -> ReadResult:
        from s3events.infra.spark import jvm_gone
        from s3events.ingest.files.dispatch import run_batch
        from s3events.ingest.files.transform_path import run_transformed

        try:
            if spec.name in self._transforms:
                return run_transformed(
                    self.spark,
                    batch,
                    spec,
                    self._transform(spec),
                    existing_schema=existing_schema,
                    aws=self._aws,
                    ingested_at=datetime.now(UTC),
                )
            return run_batch(
                self.spark,
                batch,
                spec,
                existing_schema=existing_schema,
                aws=self._aws,
                ingested_at=datetime.now(UTC),
            )
        except Exception as exc:
            # An executor's credentials refused, judged there (aws.judged_on_executor): the run loop's to
            # act on, like the driver's own; or the JVM died.
            translated = aws.rejected_on_executor(exc) or jvm_gone(exc)
            if translated is None:
                raise
            raise translated from exc


@dataclass(frozen=True, slots=True)
class IngestPorts:
    """The real ports of the cycle, from settings (`build_ingest` uses them as they are)."""

    feed: Feed
    targets: list[Target]
    read: ReadBatch


def ingest_ports(settings: Settings, *, targets: tuple[str, ...] = (), spark: Any = None) -> IngestPorts:
    options = aws.options_from(settings)
    storage = aws.FreshStorageOptions(options)  # renewed while running
    specs = [with_schema_file(spec, options) for spec in target_specs(settings, targets)]  # read now
    return IngestPorts(
        feed=MetadataFeed(
            settings.require(keys.METADATA_TABLE_PATH), storage_options=storage, aws_options=options
        ),
        targets=[
            Target(
                spec,
                TargetTable(spec.path, spec.app_id, storage_options=storage),
                ErrorTable(spec.error_table_path, spec.app_id, storage_options=storage),
            )
            for spec in specs
        ],
        read=SparkRead(settings, specs, spark=spark),
    )


def build_ingest(
    settings: Settings,
    *,
    targets: tuple[str, ...] = (),
    start_at: int | None = None,
    spark: Any = None,
    ports: IngestPorts | None = None,
) -> Ingest:
    """The ingest cycle for the configured targets (all, or those named), reading with Spark."""
    ports = ports or ingest_ports(settings, targets=targets, spark=spark)
    return Ingest(
        ports.feed,
        ports.targets,
        read=ports.read,
        strategy=settings.get(keys.INGEST_MISSING_CHECKPOINT_STRATEGY),
        start_at=start_at,
    )


@dataclass(slots=True)
class IngestTotals:
    cycles: int = 0
    batches: int = 0
    rows: int = 0
    errors: int = 0
    filtered: int = 0  # input rows the targets' transforms removed
    failed: dict[str, str] = field(default_factory=dict)  # targets whose latest cycle failed: why

    def add(self, result: IngestCycle) -> None:
        self.batches += len(result.batches)
        self.rows += sum(b.rows for b in result.batches)
        self.errors += sum(b.errors for b in result.batches)
        self.filtered += sum(b.filtered for b in result.batches)
        # A target a later cycle ran without failing has recovered, with or without a batch to commit:
        # a commit whose answer was lost fails its cycle, and the next finds nothing left to do.
        for name in result.progress.keys() - result.failed.keys():
            self.failed.pop(name, None)
        self.failed.update(result.failed)

    def summary(self) -> str:
        failed = ",".join(sorted(self.failed)) or "none"
        return (
            f"cycles={self.cycles} batches={self.batches} rows={self.rows} error_rows={self.errors} "
            f"failed_targets={failed}"
        )


def _step(
    ingest: Ingest,
    totals: IngestTotals,
    *,
    notify: Announcers,
    metrics: IngestObserved | None,
    catalog: CatalogSync | None,
    housekeeping: Callable[[], object] | None,
) -> IngestCycle:
    """One cycle, then what follows its commits; notify and catalog failures are logged and counted,
    never raised. Housekeeping runs here, in this thread: it never races this process's own commits."""
    result = ingest.run_once()
    if notify:
        notify.announce()
    if metrics is not None:
        metrics.ingest.record(result, now=time.time())
    totals.add(result)
    if catalog is not None:
        catalog.after_cycle(b.target for b in result.batches if b.version is not None)
    if housekeeping is not None:
        housekeeping()
    return result


def run_ingest(
    settings: Settings,
    *,
    once: bool,
    targets: tuple[str, ...] = (),
    start_at: int | None = None,
    min_interval_seconds: float | None = None,
    stop: StopFlag | None = None,
    spark: Any = None,
    housekeeping: Callable[[], object] | None = None,
    metrics: IngestObserved | None = None,
    catalog_metrics: CatalogMetrics | None = None,
) -> IngestTotals:
    """Ingest cycles until caught up with what was there at start (`once`) or a stop signal;
    `housekeeping` runs between cycles in this thread (the CLI passes table maintenance in --continuous
    runs). Each cycle's result is recorded into `metrics`, when given."""
    from s3events.ingest.notify.announce import announcers

    stop = stop or StopFlag()
    ports = ingest_ports(settings, targets=targets, spark=spark)
    ingest = build_ingest(settings, start_at=start_at, ports=ports)
    # Catalog entries read (one at another location stops here, before any commit); synced after cycles.
    catalog = build_sync(settings, ingest.target_names, observer=catalog_metrics)
    notify = announcers(settings, ports.targets, metrics.ingest.notify if metrics is not None else None)
    interval = (
        min_interval_seconds
        if min_interval_seconds is not None
        else settings.get(keys.INGEST_MIN_SYNC_INTERVAL_SECONDS)
    )
    if once:
        ingest.freeze_at_latest()  # every change present at start, no more
    totals = IngestTotals()
    check_every = settings.get(keys.INGEST_CHANGE_CHECK_INTERVAL_SECONDS)

    def wait_for_work(seconds: float) -> bool:  # idle: start the next cycle right after capture's commit
        return ingest.wait_for_changes(seconds, pause=stop.wait, every=check_every)

    if metrics is not None:
        metrics.ingest.declare(ingest.target_names)

    step = partial(
        _step, ingest, totals, notify=notify, metrics=metrics, catalog=catalog, housekeeping=housekeeping
    )
    totals.cycles = run_loop(
        step,
        once=once,
        is_idle=lambda r: r.idle,
        stop=stop,
        min_interval_seconds=interval,
        wait_for_work=wait_for_work,
        renew_credentials=aws.renew_credentials,  # rotated keys: the chain again, once, at once
    )
    log.info("ingest finished: %s", totals.summary())
    return totals
