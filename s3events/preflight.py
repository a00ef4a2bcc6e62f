"""Start-up checks of everything a command uses, before any work (and before Spark starts): the queue,
and each table location it reads or writes. A missing bucket or queue, a denied prefix, an unwritable
directory or a path holding something other than a Delta table ends the run at once, exit 3, with one line
naming the resource and its key, even when there is nothing to do. An unreachable or throttling endpoint
is retried for `s3events.aws.startup.timeout.seconds`, then ends the run the same way.

Cheap on purpose: per S3 location one HeadBucket (per bucket), one or two ListObjectsV2 of at most a few
keys, and for a written location one zero-byte probe PUT and DELETE; per local path a few stat calls. The
tables themselves are opened later, where delta-rs errors go through `infra.delta_errors`.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import botocore.exceptions

from s3events.config import Settings, keys
from s3events.errors import FatalError, TransientError
from s3events.infra import aws

if TYPE_CHECKING:
    from s3events.maintenance.model import TableToMaintain

log = logging.getLogger(__name__)

_NOT_FOUND = {"404", "NoSuchBucket", "NotFound"}
_DENIED = {"403", "AccessDenied", "Forbidden", "AllAccessDisabled"}
_ENDPOINT = "check s3events.aws.endpoint.url, s3events.aws.region and the network"
# The probe lives under a name Delta readers and vacuum ignore (a leading underscore), and is removed.
PROBE_NAME = "_s3events_write_check"
_ENTRIES_LOOKED_AT = 100


@dataclass(frozen=True, slots=True)
class Location:
    """A table a command reads (`writes=False`) or creates and writes, and the key that configures it."""

    table: str  # "metadata table", "target table of 'events'"
    path: str
    key: str
    writes: bool = True

    def cannot(self, verb: str | None = None) -> str:
        verb = verb or ("create or write" if self.writes else "read")
        return f"cannot {verb} the {self.table} at {self.path}"


# ------------------------------------------------------------------------------ what each command uses


def capture_locations(settings: Settings) -> list[Location]:
    return [
        Location("metadata table", settings.require(keys.METADATA_TABLE_PATH), keys.METADATA_TABLE_PATH.name),
        Location(
            "quarantine table", settings.require(keys.QUARANTINE_TABLE_PATH), keys.QUARANTINE_TABLE_PATH.name
        ),
    ]


def ingest_locations(
    settings: Settings, targets: Sequence[str] = (), *, writes: bool = True
) -> list[Location]:
    from s3events.ingest.target import target_specs  # pure; ConfigError for an undeclared --target

    metadata = settings.require(keys.METADATA_TABLE_PATH)
    found = [Location("metadata table", metadata, keys.METADATA_TABLE_PATH.name, writes=False)]
    for spec in target_specs(settings, tuple(targets)):
        found.append(
            Location(
                f"target table of {spec.name!r}", spec.path, keys.TARGET_PATH.concrete(spec.name), writes
            )
        )
        found.append(
            Location(
                f"error table of {spec.name!r}",
                spec.error_table_path,
                keys.TARGET_ERROR_TABLE_PATH.concrete(spec.name),
                writes,
            )
        )
    return found


def backfill_locations(settings: Settings, *, writes: bool = True) -> list[Location]:
    """Backfill writes the metadata table (a dry run reads it); its sources are checked by the backfill."""
    path = settings.require(keys.METADATA_TABLE_PATH)
    return [Location("metadata table", path, keys.METADATA_TABLE_PATH.name, writes)]


def status_locations(settings: Settings) -> list[Location]:
    """Status reads every table: the metadata table, the quarantine table, each target and error table."""
    quarantine = settings.get(keys.QUARANTINE_TABLE_PATH)
    found = [
        Location(
            "metadata table",
            settings.require(keys.METADATA_TABLE_PATH),
            keys.METADATA_TABLE_PATH.name,
            writes=False,
        )
    ]
    if quarantine:
        found.append(Location("quarantine table", quarantine, keys.QUARANTINE_TABLE_PATH.name, writes=False))
    return [*found, *ingest_locations(settings, writes=False)[1:]]


def maintain_locations(tables: Iterable[TableToMaintain]) -> list[Location]:
    """The tables a maintenance pass rewrites (`--table` chose them)."""
    found = []
    for table in tables:
        kind, _, name = table.label.partition(":")
        key = {
            "metadata": keys.METADATA_TABLE_PATH.name,
            "quarantine": keys.QUARANTINE_TABLE_PATH.name,
            "target": keys.TARGET_PATH.concrete(name),
            "errors": keys.TARGET_ERROR_TABLE_PATH.concrete(name),
        }[kind]
        what = {"target": f"target table of {name!r}", "errors": f"error table of {name!r}"}
        found.append(Location(what.get(kind, f"{kind} table"), table.path, key))
    return found


# ---------------------------------------------------------------------------------------- the checks


def check(
    settings: Settings,
    locations: Iterable[Location],
    *,
    queue_url: str | None = None,
    timeout_seconds: float | None = None,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """FatalError for the first resource that cannot be used. Transient failures (an unreachable or
    throttling endpoint) are retried with backoff for `timeout_seconds` (default: the configured
    `s3events.aws.startup.timeout.seconds`), then become a FatalError."""
    listed = list(locations)
    timeout = settings.get(keys.AWS_STARTUP_TIMEOUT_SECONDS) if timeout_seconds is None else timeout_seconds
    retry_at_startup(lambda: _check_once(settings, listed, queue_url), timeout, sleep=sleep, clock=clock)


def retry_at_startup(
    step: Callable[[], object],
    timeout_seconds: float,
    *,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    first_wait: float = 0.5,
    max_wait: float = 10.0,
) -> None:
    """Run `step` until it passes; TransientError is retried with doubling waits until `timeout_seconds`
    have passed, then raised as FatalError (at start-up nothing is in hand: a person should look)."""
    started = clock()
    wait = first_wait
    attempt = 1
    while True:
        try:
            step()
            return
        except TransientError as exc:
            elapsed = clock() - started
            if elapsed + wait > timeout_seconds:
                gave_up = (
                    f" (still failing after {attempt} attempts in {elapsed:.0f}s)" if attempt > 1 else ""
                )
                raise FatalError(f"{exc}{gave_up}") from exc
            log.warning("start-up check failed (attempt %d), retrying in %.1fs: %s", attempt, wait, exc)
            sleep(wait)
            wait = min(max_wait, wait * 2)
            attempt += 1


def _check_once(settings: Settings, locations: Sequence[Location], queue_url: str | None) -> None:
    options = aws.options_from(settings)
    if queue_url:
        check_queue(aws.client(options, "sqs", read_timeout=30.0), queue_url)
    buckets_seen: set[str] = set()
    for location in locations:
        if location.path.startswith("s3://"):
            s3 = aws.client(options, "s3", read_timeout=30.0)
            bucket, _, prefix = location.path[len("s3://") :].partition("/")
            if bucket not in buckets_seen:
                check_bucket(s3, bucket, location)
                buckets_seen.add(bucket)
            check_prefix(s3, bucket, prefix.strip("/"), location)
        else:
            check_local(Path(location.path), location)


def check_queue(sqs: Any, queue_url: str) -> None:
    try:
        aws.call(
            f"cannot read the queue {queue_url}",
            sqs.get_queue_attributes,
            QueueUrl=queue_url,
            AttributeNames=["QueueArn"],
        )
    except FatalError as exc:
        raise FatalError(f"{exc}: check {keys.QUEUE_URL.name} and the credentials' sqs: permissions") from exc
    except TransientError as exc:
        raise TransientError(f"{exc}: {_ENDPOINT}") from exc


def check_bucket(s3: Any, bucket: str, location: Location) -> None:
    try:
        s3.head_bucket(Bucket=bucket)  # botocore retries a dropped connection itself (3 attempts)
    except botocore.exceptions.ClientError as exc:
        code = _code(exc)
        if code in _NOT_FOUND:
            raise FatalError(
                f"{location.cannot()}: the bucket {bucket} does not exist: check the bucket name in "
                f"{location.key} and s3events.aws.region / s3events.aws.endpoint.url"
            ) from exc
        if code in _DENIED:
            # HeadBucket needs s3:ListBucket on the whole bucket; a role limited to the table's prefix may
            # still use the table. The prefix checks that follow decide.
            log.debug("%s: HeadBucket on %s was denied; checking the prefix only", location.path, bucket)
            return
        raise aws.classify(exc, action=f"{location.cannot()}: HeadBucket on {bucket}") from exc
    except (botocore.exceptions.BotoCoreError, OSError) as exc:
        raise _unreachable(location, bucket, exc) from exc


def check_prefix(s3: Any, bucket: str, prefix: str, location: Location) -> None:
    """The prefix may be listed, holds nothing but a Delta table's files, and (when written) takes a PUT."""
    directory = f"{prefix}/" if prefix else ""
    names = _list_names(s3, bucket, directory, location)
    if names:
        _require_table_like(names, location)
    if location.writes:
        _probe_write(s3, bucket, f"{directory}{PROBE_NAME}-{uuid.uuid4().hex}", location)


def _list_names(s3: Any, bucket: str, directory: str, location: Location) -> list[str]:
    """The first entries directly under `directory` (file names and folder names)."""
    with _s3_errors(location, bucket, "list", f"s3:ListBucket on {location.path}"):
        response = s3.list_objects_v2(
            Bucket=bucket, Prefix=directory, Delimiter="/", MaxKeys=_ENTRIES_LOOKED_AT
        )
    files = [item["Key"][len(directory) :] for item in response.get("Contents", [])]
    folders = [item["Prefix"][len(directory) :].rstrip("/") for item in response.get("CommonPrefixes", [])]
    return [name for name in files + folders if name]


def _probe_write(s3: Any, bucket: str, key: str, location: Location) -> None:
    with _s3_errors(location, bucket, "write", f"s3:PutObject on {location.path}/*"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"")
    try:
        s3.delete_object(Bucket=bucket, Key=key)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        # Harmless where it stays: Delta readers and vacuum skip names starting with "_".
        log.warning("could not remove the write probe s3://%s/%s: %s", bucket, key, exc)


@contextmanager
def _s3_errors(location: Location, bucket: str, verb: str, need: str) -> Iterator[None]:
    """One S3 call of a check: access denied names the permission; an unreachable endpoint is transient."""
    try:
        yield
    except botocore.exceptions.ClientError as exc:
        if _code(exc) in _DENIED:
            raise FatalError(
                f"{location.cannot(verb)}: access denied: the credentials need {need} (check the role's "
                f"policy, a bucket policy or KMS key, or {location.key})"
            ) from exc
        raise aws.classify(exc, action=location.cannot(verb)) from exc
    except (botocore.exceptions.BotoCoreError, OSError) as exc:
        raise _unreachable(location, bucket, exc) from exc


def check_local(path: Path, location: Location) -> None:
    """The path is a directory we may use (holding nothing but a Delta table's files), or can be created
    under its nearest existing ancestor."""
    if path.exists():
        doing = location.cannot("write" if location.writes else "read")
        if not path.is_dir():
            raise FatalError(f"{doing}: {path} is a file, not a Delta table directory: check {location.key}")
        _require_access(path, location, doing)
        names = []
        with os.scandir(path) as entries:
            for entry in entries:
                names.append(entry.name)
                if len(names) >= _ENTRIES_LOOKED_AT:
                    break
        _require_table_like(names, location)
        return
    if not location.writes:
        return  # no table yet: nothing to read, and nothing this command would create
    doing = location.cannot("create")
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise FatalError(f"{doing}: {ancestor} is a file, not a directory: check {location.key}")
    _require_access(ancestor, location, doing)


def _require_table_like(names: Sequence[str], location: Location) -> None:
    """A table path must be empty or hold a Delta table. Before the first commit it may also hold the data
    files of a writer killed before committing (Parquet, in partition folders), so those are allowed."""
    if "_delta_log" in names:
        return
    foreign = [name for name in names if not _could_be_table_content(name)]
    if foreign:
        raise FatalError(
            f"{location.cannot()}: it holds {foreign[0]!r} and no _delta_log: it is not a Delta table, and "
            f"a table path must be empty or a Delta table: check {location.key}"
        )


def _could_be_table_content(name: str) -> bool:
    return name.startswith(("_", ".")) or name.endswith(".parquet") or "=" in name


def _require_access(directory: Path, location: Location, doing: str) -> None:
    mode = os.W_OK | os.X_OK if location.writes else os.R_OK | os.X_OK
    if not os.access(directory, mode):
        need = "write" if location.writes else "read"
        raise FatalError(
            f"{doing}: this user may not {need} {directory}: check its permissions or {location.key}"
        )


def _code(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _unreachable(location: Location, bucket: str, exc: BaseException) -> FatalError | TransientError:
    """A botocore error that is not an S3 answer: missing credentials are fatal; a dropped or refused
    connection is transient (retried for a while by `check`, then for a person to fix)."""
    classified = aws.classify(exc, action=location.cannot())
    if isinstance(classified, FatalError):
        return classified
    return TransientError(
        f"{location.cannot()}: cannot reach S3 for bucket {bucket} ({type(exc).__name__}): {_ENDPOINT}"
    )
