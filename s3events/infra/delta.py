"""delta-rs helpers shared by every table we own: open-or-create, schema versions, conflict retries."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from s3events.errors import CommitConflict, FatalError
from s3events.infra.delta_errors import recognised, translate

log = logging.getLogger(__name__)

T = TypeVar("T")

SCHEMA_VERSION_PROPERTY = "s3events.schema.version"

# What every commit of ours runs after it: a checkpoint every `delta.checkpointInterval` commits (so an
# open lists the log from the last checkpoint, not from version 0), but no expired-log cleanup. delta-rs
# cleans expired logs after every commit by default (`delta.enableExpiredLogCleanup`), and that lists the
# whole `_delta_log` each time (measured against moto: one un-offset LIST per commit, its keys growing
# with the log): maintenance cleans the log on its own schedule instead (maintenance/table.py).
AFTER_COMMIT = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)
TABLE_KIND_PROPERTY = "s3events.table.kind"


def text_field(name: str) -> pc.Expression:
    """A string column for a pyarrow dataset filter over a Delta table. delta-rs writes `string_view` in the
    files it rewrites (MERGE updates), and a filter comparing such a file's column with a plain string
    literal fails ("no kernel matching input types (string, string_view)"): compare as string."""
    return pc.field(name).cast(pa.string())


def table_properties(kind: str, schema_version: int, *, change_data_feed: bool = True) -> dict[str, str]:
    """The properties every table we create carries: what it is, its schema version, the change feed."""
    properties = {SCHEMA_VERSION_PROPERTY: str(schema_version), TABLE_KIND_PROPERTY: kind}
    if change_data_feed:
        properties["delta.enableChangeDataFeed"] = "true"
    return properties


def is_s3(path: str) -> bool:
    return path.startswith("s3://")


def open_table(path: str, storage_options: Mapping[str, str], *, kind: str = "Delta") -> DeltaTable | None:
    """The table at `path`, or None when there is none yet. Any other failure (missing bucket, access
    denied, unreachable endpoint) becomes a one-line FatalError or TransientError naming the path."""
    try:
        return DeltaTable(path, storage_options=dict(storage_options) if is_s3(path) else None)
    except TableNotFoundError:
        return None
    except (OSError, DeltaError) as exc:
        raise translate(exc, action=f"cannot open the {kind} table", path=path) from exc


# A kept handle is opened afresh at least this often: a bound on whatever a months-old handle could
# drift into, at the price of one log read per table every 15 minutes.
REOPEN_SECONDS = 900.0


class TableHandle:
    """One table's DeltaTable kept across uses. Opening reads the log from its last checkpoint (for a
    table of many data files a large Parquet file, on S3 several requests); `latest` opens it once and
    then brings it up to date with `update_incremental`, which reads only the commits since. Opened
    again when the storage options change (a handle keeps the credentials it was opened with), after a
    failed update, after `forget`, and every REOPEN_SECONDS. With `schema_version`, a table opened is
    checked to be an s3events table of at most that version (FatalError otherwise). One thread's:
    delta-rs table objects are not shared between threads."""

    def __init__(
        self,
        path: str,
        storage_options: Callable[[], Mapping[str, str]],
        *,
        kind: str = "Delta",
        schema_version: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.kind = kind
        self._schema_version = schema_version
        self._options = storage_options  # called at every use: refreshed credentials are picked up
        self._clock = clock
        self._table: DeltaTable | None = None
        self._opened_with: dict[str, str] | None = None
        self._opened_at = 0.0
        self._known: dict[str, Any] = {}  # what `known` read of the kept table at version `_known_at`
        self._known_at: int | None = None

    def storage_options(self) -> dict[str, str]:
        return dict(self._options())

    def latest(self) -> DeltaTable | None:
        """The table at its latest version, or None when there is none yet."""
        options = self.storage_options()
        table = self._table
        if (
            table is not None
            and options == self._opened_with
            and self._clock() - self._opened_at < REOPEN_SECONDS
        ):
            try:
                table.update_incremental()
                return table
            except (OSError, DeltaError) as exc:  # opening afresh says whether it is an outage
                log.debug("%s: update of the kept table handle failed (%s); opening it again", self.path, exc)
        return self._adopt(open_table(self.path, options, kind=self.kind), options)

    def latest_or_create(self, schema: pa.Schema, *, schema_version: int, **create: Any) -> DeltaTable:
        """`latest`, creating the table on first use, as `open_or_create` does (with its checks)."""
        table = self.latest()
        if table is None:
            options = self.storage_options()
            table = open_or_create(
                self.path,
                schema,
                kind=self.kind,
                schema_version=schema_version,
                storage_options=options,
                **create,
            )
            self._adopt(table, options)
        else:
            check_schema_version(table, path=self.path, kind=self.kind, supported=schema_version)
        return table

    def known(self, table: DeltaTable, key: str, read: Callable[[], T]) -> T:
        """`read()` of `table`, kept while the kept table stays at the version it was read at. A version's
        state never changes (its log entry is written once), and delta-rs reads the log again for some
        values (an app transaction's version): a batch that reads its checkpoint for its position, its
        guard and its commit's check reads the log once. Read afresh for any other table object."""
        if table is not self._table:
            return read()
        version = table.version()
        if version != self._known_at:
            self._known, self._known_at = {}, version
        if key not in self._known:
            self._known[key] = read()
        return self._known[key]

    def loaded_at(self, version: int) -> DeltaTable | None:
        """The kept table as it stands, if that is `version` (not brought up to date): a reader of that
        version need not open the table again, reading its log from the last checkpoint."""
        table = self._table
        return table if table is not None and table.version() == version else None

    def forget(self) -> None:
        """Open afresh at the next use."""
        self._table = None
        self._known, self._known_at = {}, None

    def _adopt(self, table: DeltaTable | None, options: dict[str, str]) -> DeltaTable | None:
        if table is not None and self._schema_version is not None:
            check_schema_version(table, path=self.path, kind=self.kind, supported=self._schema_version)
        self._table, self._opened_with, self._opened_at = table, options, self._clock()
        self._known, self._known_at = {}, None
        return table


def open_or_create(
    path: str,
    schema: pa.Schema,
    *,
    kind: str,
    schema_version: int,
    storage_options: Mapping[str, str],
    change_data_feed: bool = True,
    partition_by: list[str] | None = None,
) -> DeltaTable:
    """Open the table, creating it on first use; refuse a table written by a newer schema version."""
    table = open_table(path, storage_options, kind=kind)
    if table is None:
        configuration = table_properties(kind, schema_version, change_data_feed=change_data_feed)
        try:
            table = DeltaTable.create(
                path,
                schema,
                mode="error",
                partition_by=partition_by or None,
                configuration=configuration,
                storage_options=dict(storage_options) if is_s3(path) else None,
                raise_if_key_not_exists=False,  # our own s3events.* table properties
                # Version 0 or nothing: a retried create would land as a second CREATE at version 1.
                commit_properties=CommitProperties(max_commit_retries=0),
            )
            log.info("created %s table %s (schema version %d)", kind, path, schema_version)
        except (CommitFailedError, DeltaError) as exc:
            # Another writer created it first; theirs is as good as ours.
            table = open_table(path, storage_options, kind=kind)
            if table is None:
                raise translate(exc, action=f"cannot create the {kind} table", path=path) from exc
        except OSError as exc:
            raise translate(exc, action=f"cannot create the {kind} table", path=path) from exc
    check_schema_version(table, path=path, kind=kind, supported=schema_version)
    return table


def check_schema_version(table: DeltaTable, *, path: str, kind: str, supported: int) -> None:
    found = table.metadata().configuration.get(SCHEMA_VERSION_PROPERTY)
    if found is None:
        raise FatalError(
            f"{path} is a Delta table but not an s3events {kind} table (no {SCHEMA_VERSION_PROPERTY})"
        )
    if int(found) > supported:
        raise FatalError(
            f"{path} has {kind} schema version {found}; this s3events understands up to {supported}: "
            "upgrade s3events"
        )


def retry_conflicts(attempts: int) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Retry a read-modify-commit step when another writer won the race; the step re-reads state itself."""
    return retry(
        retry=retry_if_exception_type(CommitConflict),
        wait=wait_exponential_jitter(multiplier=0.05, max=5.0, jitter=0.2),
        stop=stop_after_attempt(attempts),
        reraise=True,
        before_sleep=lambda state: log.info(
            "commit conflict with another writer (attempt %d/%d); retrying on fresh state",
            state.attempt_number,
            attempts,
        ),
    )


def as_conflict(exc: CommitFailedError) -> CommitConflict:
    return CommitConflict(f"commit conflict: {exc}")


@contextmanager
def committing(path: str, *, kind: str = "Delta") -> Iterator[None]:
    """The one mapping of delta-rs errors around a commit: a lost race becomes a CommitConflict (retried on
    fresh state); a storage error becomes fatal or transient, in one line (`delta_errors.translate`)."""
    try:
        yield
    except CommitFailedError as exc:
        raise as_conflict(exc) from exc
    except OSError as exc:
        raise translate(exc, action=f"cannot commit to the {kind} table", path=path) from exc
    except DeltaError as exc:  # e.g. a MERGE whose data file the file system refused
        known = recognised(exc, action=f"cannot commit to the {kind} table", path=path)
        if known is None:
            raise  # not seen before: its traceback helps whoever looks
        raise known from exc
