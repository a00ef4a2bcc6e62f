"""Wiring: which tables a pass covers, what the metadata table must keep for lagging targets, and the
pass itself (`run_maintenance`, also `s3events maintain`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from s3events.config import Settings, keys
from s3events.errors import ConfigError
from s3events.infra import aws, table_info
from s3events.infra.delta_errors import log_side_failure
from s3events.ingest.feed import MetadataFeed
from s3events.ingest.progress import first_unread, stored_position
from s3events.ingest.target import target_specs
from s3events.maintenance.model import (
    COMPACT_CHECK_SECONDS,
    Keep,
    MaintenanceOptions,
    TableReport,
    TableToMaintain,
    due,
    keep_since,
)
from s3events.maintenance.table import compact_if_crowded, handle_for, last_pass, maintain

log = logging.getLogger(__name__)

TABLE_CHOICES = "metadata | quarantine | target:NAME | all"


def options_from(settings: Settings, *, dry_run: bool = False) -> MaintenanceOptions:
    return MaintenanceOptions(
        target_file_bytes=settings.get(keys.MAINTENANCE_TARGET_FILE_BYTES),
        vacuum_retention_hours=settings.get(keys.MAINTENANCE_VACUUM_RETENTION_HOURS),
        log_retention_days=settings.get(keys.MAINTENANCE_LOG_RETENTION_DAYS),
        checkpoint_interval=settings.get(keys.MAINTENANCE_CHECKPOINT_INTERVAL),
        dry_run=dry_run,
    )


def capture_tables(settings: Settings) -> list[TableToMaintain]:
    """The tables capture writes: the metadata table (read by every target) and the quarantine table."""
    tables = [
        TableToMaintain(
            "metadata",
            settings.require(keys.METADATA_TABLE_PATH),
            feeds=tuple(spec.name for spec in target_specs(settings)),
        )
    ]
    quarantine = settings.get(keys.QUARANTINE_TABLE_PATH)
    if quarantine:
        tables.append(TableToMaintain("quarantine", quarantine))
    return tables


def ingest_tables(settings: Settings, targets: Sequence[str] = ()) -> list[TableToMaintain]:
    """The tables ingest writes: each target and its error table."""
    tables = []
    for spec in target_specs(settings, tuple(targets)):
        tables.append(TableToMaintain(f"target:{spec.name}", spec.path))
        tables.append(TableToMaintain(f"errors:{spec.name}", spec.error_table_path))
    return tables


def select_tables(settings: Settings, which: str) -> list[TableToMaintain]:
    """`--table` of `s3events maintain`: metadata | quarantine | target:NAME (and its error table) | all."""
    everything = [*capture_tables(settings), *ingest_tables(settings)]
    if which == "all":
        return everything
    if which in ("metadata", "quarantine"):
        chosen = [t for t in everything if t.label == which]
        if not chosen:
            raise ConfigError("--table", f"{which}: no {which} table is configured")
        return chosen
    if which.startswith("target:"):
        name = which.removeprefix("target:")
        if name not in settings.targets:
            declared = ", ".join(settings.targets) or "none"
            raise ConfigError("--table", f"{which!r}: no target {name!r} is declared; declared: {declared}")
        return ingest_tables(settings, [name])
    raise ConfigError("--table", f"{which!r} is not a table; expected {TABLE_CHOICES}")


def metadata_keep(settings: Settings, storage: aws.StorageOptions, table: TableToMaintain) -> Keep | None:
    """What the metadata table must keep: the change feed from the oldest version holding an entry a
    target has not ingested (versions that route nothing to a target count as read by it).

    A target whose position cannot be read raises: the pass fails, and nothing is cleaned up on a guess.
    """
    resolved = aws.resolve(storage)
    feed = MetadataFeed(table.path, storage_options=storage)
    latest = feed.latest_version()
    if latest is None:
        return None
    specs = [spec for spec in target_specs(settings) if spec.name in table.feeds]
    stored = {spec.name: stored_position(spec, resolved) for spec in specs}
    start_latest = settings.get(keys.INGEST_MISSING_CHECKPOINT_STRATEGY) == "latest"
    unread = first_unread(specs, stored, feed, latest, start_latest=start_latest)
    oldest = min((v for v in unread.values() if v is not None), default=None)
    times = table_info.commit_times(table.path, resolved, since=oldest) if oldest is not None else {}
    needs: dict[str, tuple[datetime | None, str]] = {}
    for name, version in unread.items():
        moments = [moment for v, moment in times.items() if version is not None and v >= version]
        needs[name] = (
            min(moments) if moments else None,
            f"target {name} (next metadata version to ingest: {version})",
        )
    return keep_since(needs)


def run_maintenance(
    settings: Settings,
    tables: Sequence[TableToMaintain],
    *,
    dry_run: bool = False,
    now: datetime | None = None,
) -> list[TableReport]:
    """One pass over `tables`. A table whose pass fails is reported with its error; the others go on."""
    storage = aws.FreshStorageOptions(aws.options_from(settings))
    options = options_from(settings, dry_run=dry_run)
    reports = []
    for table in tables:
        moment = now or datetime.now(UTC)
        try:
            keep = metadata_keep(settings, storage, table) if table.feeds else None
            report = maintain(table, storage, options, now=moment, keep=keep)
        except Exception as exc:  # one table's failure does not stop the others
            log.exception("maintenance of %s (%s) failed", table.label, table.path)
            report = TableReport(table.label, table.path, error=f"{type(exc).__name__}: {exc}")
        for note in report.notes:
            log.info("%s: %s", table.label, note)
        log.info("maintenance: %s", report.line())
        reports.append(report)
    return reports


class PeriodicMaintenance:
    """Maintenance of a process's own tables between its cycles, in its own thread (so it never races its
    own commits), in `--continuous` runs:

    - a full pass at most every `s3events.maintenance.interval.seconds`. The time of each table's last
      pass lives in the table (app transaction), so restarts and other processes share one schedule; a
      table never maintained is due one interval after the process started;
    - in between, about every `COMPACT_CHECK_SECONDS`, compaction alone of a table holding
      `s3events.maintenance.compact.small.files` small files: one commit adds a file, and every file is
      one more for each MERGE and read to open, so without it commit cost climbs all hour long.
    """

    def __init__(
        self,
        settings: Settings,
        tables: Sequence[TableToMaintain],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._tables = list(tables)
        self._interval = settings.get(keys.MAINTENANCE_INTERVAL_SECONDS)
        self._small_files = settings.get(keys.MAINTENANCE_COMPACT_SMALL_FILES)
        self._options = options_from(settings)
        self._clock = clock
        self._storage = aws.FreshStorageOptions(aws.options_from(settings))
        # kept across the compaction checks: a check reads the commits since the last one, not the
        # checkpoint (delta.TableHandle reopens a handle every 15 minutes)
        self._handles = {t.path: handle_for(t.path, self._storage) for t in self._tables}
        # A table never maintained counts from the process start: a new table needs no pass yet.
        self._started = clock()
        self._next_check = self._started + self._interval
        self._next_compact_check = self._started + COMPACT_CHECK_SECONDS

    @classmethod
    def from_settings(
        cls, settings: Settings, tables: Sequence[TableToMaintain]
    ) -> PeriodicMaintenance | None:
        return cls(settings, tables) if settings.get(keys.MAINTENANCE_ENABLED) else None

    def run_if_due(self) -> list[TableReport]:
        """A full pass over the tables whose last pass is an interval old, else compaction of the tables
        crowded with small files, when their checks are due. Never raises: a failure is logged and tried
        again at the next check."""
        now = self._clock()
        if now >= self._next_check:
            self._next_check = now + self._interval
            self._next_compact_check = now + COMPACT_CHECK_SECONDS
            return self._guarded(lambda: self._full_passes(now), self._interval)
        if now >= self._next_compact_check:
            self._next_compact_check = now + COMPACT_CHECK_SECONDS
            return self._guarded(lambda: self._compactions(now), COMPACT_CHECK_SECONDS)
        return []

    def _full_passes(self, now: float) -> list[TableReport]:
        stale = [
            t
            for t in self._tables
            if due(
                last_pass(t.path, self._storage) or self._started, now=now, interval_seconds=self._interval
            )
        ]
        return run_maintenance(self._settings, stale, now=datetime.fromtimestamp(now, UTC)) if stale else []

    def _compactions(self, now: float) -> list[TableReport]:
        reports = []
        for table in self._tables:
            report = compact_if_crowded(
                table,
                self._storage,
                self._options,
                small_files=self._small_files,
                now=datetime.fromtimestamp(now, UTC),
                handle=self._handles[table.path],
            )
            if report is not None:
                log.info("maintenance: %s", report.line())
                reports.append(report)
        return reports

    @staticmethod
    def _guarded(step: Callable[[], list[TableReport]], retry_in: float) -> list[TableReport]:
        try:
            return step()
        except Exception as exc:
            log_side_failure(log, "maintenance failed; the process goes on", retry_in, exc)
            return []
