"""Pure rules of a maintenance pass: what to keep, when a pass is due, and what a pass reports."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

APP_ID = "s3events.maintenance"  # app transaction: epoch seconds of the last completed pass on the table
# How long a pass may hold a table's compaction lease: longer than any compaction runs, short enough that
# a pass killed while compacting delays the next compaction by hours, not days.
LEASE_SECONDS = 6 * 3600
SMALL_FRACTION = 4  # a file under target size / 4 counts as small (compaction's work still to do)


@dataclass(frozen=True, slots=True)
class MaintenanceOptions:
    target_file_bytes: int = 128 << 20
    vacuum_retention_hours: int = 168
    log_retention_days: int = 30
    checkpoint_interval: int = 100
    dry_run: bool = False

    @property
    def small_file_bytes(self) -> int:
        return self.target_file_bytes // SMALL_FRACTION


@dataclass(frozen=True, slots=True)
class TableToMaintain:
    """One table a pass covers. `feeds` names the ingest targets that read its change feed (only the
    metadata table has any): nothing they still need is cleaned up."""

    label: str  # metadata | quarantine | target:<name> | errors:<name>
    path: str
    feeds: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Keep:
    """What log cleanup and vacuum must keep: everything from `since` on, for `reader`."""

    since: datetime
    reader: str  # e.g. "target orders (checkpoint at metadata version 41)"


def keep_since(needs: dict[str, tuple[datetime | None, str]]) -> Keep | None:
    """The oldest commit time any reader still needs (reader -> (commit time of the first version it has
    not read, or None when it is caught up; description)), or None when none needs anything."""
    pending = [(moment, description) for moment, description in needs.values() if moment is not None]
    if not pending:
        return None
    moment, description = min(pending)
    return Keep(moment, description)


def vacuum_retention_hours(configured: int, *, now: datetime, keep: Keep | None) -> int:
    """Hours vacuum keeps removed files: the configured retention, or longer so that files removed
    after `keep.since` stay (a lagging reader's change feed needs the files those versions added)."""
    if keep is None:
        return configured
    needed = math.ceil((now - keep.since) / timedelta(hours=1)) + 1
    return max(configured, needed)


def log_retention_days(configured: int, *, now: datetime, keep: Keep | None) -> int:
    """Days log cleanup keeps commit files: the configured ones, or enough to keep `keep.since`."""
    if keep is None:
        return configured
    return max(configured, math.ceil((now - keep.since) / timedelta(days=1)) + 1)


COMPACT_CHECK_SECONDS = 30.0  # between full passes, how often a process counts its tables' small files


def due(last_pass: float | None, *, now: float, interval_seconds: float) -> bool:
    return last_pass is None or now - last_pass >= interval_seconds


@dataclass(slots=True)
class TableReport:
    """What one pass did to one table, as `s3events maintain` prints it."""

    label: str
    path: str
    exists: bool = True
    files_before: int = 0
    files_after: int = 0
    small_files_before: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    version_before: int | None = None
    version_after: int | None = None
    compacted_from: int = 0  # small files rewritten
    compacted_into: int = 0  # files they became
    compacted_bytes: int = 0  # bytes of the small files rewritten
    checkpoint: bool = False
    logs_kept_days: int | None = None
    vacuumed: int = 0  # files deleted (dry run: that would be)
    restated: int = 0  # files whose lossy statistics were restated from their data (dry run: would be)
    vacuum_retention_hours: int | None = None
    elapsed_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # warnings worth a person's attention
    error: str | None = None
    dry_run: bool = False  # the figures say what a pass would do
    compaction_only: bool = False  # a compaction between passes (too many small files)

    def line(self) -> str:
        if not self.exists:
            return f"{self.label}: {self.path} does not exist yet; nothing to maintain"
        if self.error:
            return f"{self.label}: {self.path}: maintenance failed: {self.error}"
        if self.compaction_only:
            return (
                f"{self.label}: compaction ({self.small_files_before} small files): files "
                f"{self.files_before}->{self.files_after} (compacted {self.compacted_from} into "
                f"{self.compacted_into}), versions {self.version_before}->{self.version_after}, "
                f"elapsed={self.elapsed_seconds:.2f}s"
            )
        if self.dry_run:
            return (
                f"{self.label} (dry run): files {self.files_before} ({self.small_files_before} small), "
                f"would compact {self.compacted_from}, "
                f"would restate the statistics of {self.restated} files, "
                f"checkpoint={'yes' if self.checkpoint else 'no'}, "
                f"would vacuum {self.vacuumed} (retention {self.vacuum_retention_hours}h), "
                f"version {self.version_before}"
            )
        return (
            f"{self.label}: files {self.files_before}->{self.files_after} "
            f"(compacted {self.compacted_from} into {self.compacted_into}), "
            f"restated the statistics of {self.restated} files, "
            f"bytes {self.bytes_before}->{self.bytes_after}, "
            f"versions {self.version_before}->{self.version_after}, "
            f"checkpoint={'yes' if self.checkpoint else 'no'}, vacuumed={self.vacuumed} "
            f"(retention {self.vacuum_retention_hours}h), elapsed={self.elapsed_seconds:.2f}s"
        )
