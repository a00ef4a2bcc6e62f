"""The driver commits the Parquet files that executors wrote (parquet_files.WrittenFile) in one Delta commit.

The commit also records the caller's app transactions (Delta `txn` actions: app id -> version), which
is how a target table carries its own ingest checkpoint: data and checkpoint move together or not at all.

delta-rs behaviour this module is built on (deltalake 1.6, measured):
- `create_table_with_add_actions` creates a table and adds files (and txns) in the single commit 0,
  but rejects every configuration key delta-kernel does not know (e.g. our own `s3events.*` table
  properties: "Error parsing property"). With such keys the table is created empty first
  (`DeltaTable.create(..., raise_if_key_not_exists=False)`) and the files go in a second commit.
- `create_write_transaction(mode="append", schema=wider)` does NOT change the table schema: the files
  are added, the table schema stays as it was, and the new columns are invisible to readers. New
  nullable columns are therefore added first with `DeltaTable.alter.add_columns` (its own commit, a
  metadata-only change that is harmless if the data commit then fails), and the data commit follows.
- Neither call returns the version it wrote, and a DeltaTable object is not refreshed by
  `create_write_transaction`; delta-rs may also rebase a commit over concurrent ones. The new version
  is found by a unique `s3events.commitId` written into the commit's commitInfo.
- delta-rs accepts an app-transaction version lower than the stored one. Checking that a checkpoint
  does not go backwards is the caller's job (`transaction_versions` reads the stored ones).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping, Sequence

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Field, Transaction
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

from s3events.errors import CommitConflict, FatalError
from s3events.infra.delta import AFTER_COMMIT, TableHandle, committing, is_s3, open_table
from s3events.infra.delta_errors import translate
from s3events.infra.parquet_files import WrittenFile

log = logging.getLogger(__name__)

COMMIT_ID_KEY = "s3events.commitId"


def commit_files(
    table_uri: str,
    files: Sequence[WrittenFile],
    *,
    schema: pa.Schema,
    partition_by: Sequence[str],
    storage_options: Mapping[str, str],
    transactions: Mapping[str, int],
    configuration: Mapping[str, str] | None = None,
    custom_metadata: Mapping[str, str] | None = None,
    expected_transactions: Mapping[str, int | None] | None = None,
    handle: TableHandle | None = None,
    based_on: int | None = None,
) -> int:
    """Add `files` and record `transactions` in one commit; create the table when absent. Returns the
    version that holds the files (an empty `files` still commits, so the transactions move on).

    `schema` is the full table schema including partition columns; `configuration` is only used when
    the table is created. New nullable top-level columns in `schema` are added to an existing table
    (schema evolution, see the module docstring); a changed column type, a new non-nullable column or
    different partition columns raise FatalError. A concurrent conflicting commit raises CommitConflict
    (retry on fresh state: re-read `transaction_versions` first).

    `expected_transactions` (app id -> version, None = absent) are checked in the very snapshot the
    commit is based on: a writer that committed after the caller looked raises CommitConflict here,
    and one that commits after this snapshot makes delta-rs refuse ours (same app id). So two
    processes that both believe they own a batch cannot both commit it.

    `handle` is the caller's kept table handle (same path), updated here instead of opening the table.
    `based_on` is the version the caller decided on (e.g. that the table holds none of the rows' keys):
    CommitConflict unless the table is still at it, and the commit is made as exactly the next version,
    never rebased over a concurrent one. It needs an existing table that already has every column.
    """
    actions = _add_actions(files, partition_by)
    commit_id = str(uuid.uuid4())
    properties = _properties(commit_id, custom_metadata, transactions, based_on=based_on)
    options = dict(storage_options) if is_s3(table_uri) else None
    handle = handle or TableHandle(table_uri, lambda: storage_options)
    with committing(table_uri):
        table = handle.latest()
        check_transactions(table, table_uri, expected_transactions, handle=handle)
        _check_based_on(table, table_uri, based_on)
        if table is None:
            config = dict(configuration or {})
            if _create(table_uri, schema, actions, partition_by, config, options, properties):
                return 0
            if (table := handle.latest()) is None:
                raise FatalError(f"cannot create the Delta table at {table_uri}")
        _check_partitioning(table, table_uri, partition_by)
        _add_new_columns(table, table_uri, schema)
        table.create_write_transaction(
            list[AddAction | RemoveAction](actions),
            mode="append",
            schema=table.schema(),
            partition_by=list(partition_by) or None,
            commit_properties=properties,
            post_commithook_properties=AFTER_COMMIT,
        )
    return _version_of(handle, commit_id)


def _properties(
    commit_id: str,
    custom_metadata: Mapping[str, str] | None,
    transactions: Mapping[str, int],
    *,
    based_on: int | None,
) -> CommitProperties:
    """The commit's info (our id, to find its version) and app transactions; no rebase when `based_on`."""
    return CommitProperties(
        custom_metadata={**(custom_metadata or {}), COMMIT_ID_KEY: commit_id},
        app_transactions=[Transaction(app_id, version) for app_id, version in transactions.items()],
        max_commit_retries=None if based_on is None else 0,
    )


def _check_based_on(table: DeltaTable | None, table_uri: str, based_on: int | None) -> None:
    if based_on is not None and (table is None or table.version() != based_on):
        raise CommitConflict(
            f"{table_uri}: the table moved past version {based_on} while this batch was checked "
            "against it: another writer committed meanwhile; batch abandoned"
        )


def _add_actions(files: Sequence[WrittenFile], partition_by: Sequence[str]) -> list[AddAction]:
    for f in files:
        if set(f.partition_values) != set(partition_by):
            raise ValueError(
                f"{f.path}: partition values {dict(f.partition_values)} do not match {partition_by}"
            )
    return [
        AddAction(f.path, f.size, dict(f.partition_values), f.modification_time, True, f.stats) for f in files
    ]


def _create(
    table_uri: str,
    schema: pa.Schema,
    actions: list[AddAction],
    partition_by: Sequence[str],
    configuration: dict[str, str],
    options: dict[str, str] | None,
    properties: CommitProperties,
) -> bool:
    """Create the table: with the files in version 0 (True) when delta-kernel knows every property, else
    empty (False: the files go in the next commit)."""
    if all(key.startswith("delta.") for key in configuration):
        return _create_with_files(
            table_uri, schema, actions, partition_by, configuration, options, properties
        )
    _create_empty(table_uri, schema, partition_by, configuration, options)
    return False


def check_transactions(
    table: DeltaTable | None,
    table_uri: str,
    expected: Mapping[str, int | None] | None,
    *,
    handle: TableHandle | None = None,
) -> None:
    """CommitConflict unless `table`'s snapshot holds exactly the `expected` app transaction versions
    (read once per version of `handle`'s kept table, when `table` is it)."""
    for app_id, version in (expected or {}).items():
        current = _transaction_version(table, table_uri, app_id, handle) if table is not None else None
        if current != version:
            raise CommitConflict(
                f"{table_uri}: app transaction {app_id} is at {current}, not {version} as when this "
                "batch started: another writer committed to this table meanwhile; batch abandoned"
            )


def transaction_versions(
    table_uri: str, app_ids: Sequence[str], storage_options: Mapping[str, str]
) -> dict[str, int | None]:
    """The stored app-transaction version per app id; None for unknown ids or when there is no table."""
    return _versions(open_table(table_uri, storage_options), table_uri, app_ids)


def stored_transactions(handle: TableHandle, app_ids: Sequence[str]) -> dict[str, int | None]:
    """`transaction_versions` on a kept table handle's latest version (updated, not opened again; each
    app id's version read once per table version)."""
    return _versions(handle.latest(), handle.path, app_ids, handle)


def _versions(
    table: DeltaTable | None, table_uri: str, app_ids: Sequence[str], handle: TableHandle | None = None
) -> dict[str, int | None]:
    return {
        app_id: _transaction_version(table, table_uri, app_id, handle) if table else None
        for app_id in app_ids
    }


def _transaction_version(
    table: DeltaTable, table_uri: str, app_id: str, handle: TableHandle | None = None
) -> int | None:
    """`table.transaction_version(app_id)`, its storage errors in one line naming the table: delta-rs
    reads the log again for it (it is not in the loaded snapshot: see docs/architecture.md, "Reading a
    table's state"), so an outage shows here too. Kept by `handle` per table version."""
    if handle is not None:
        return handle.known(table, f"txn:{app_id}", lambda: _transaction_version(table, table_uri, app_id))
    try:
        return table.transaction_version(app_id)
    except (OSError, DeltaError) as exc:
        action = "cannot read the app transactions of the Delta table"
        raise translate(exc, action=action, path=table_uri) from exc


def _create_with_files(
    table_uri: str,
    schema: pa.Schema,
    actions: list[AddAction],
    partition_by: Sequence[str],
    configuration: dict[str, str],
    options: dict[str, str] | None,
    properties: CommitProperties,
) -> bool:
    """Version 0 with the files and transactions; False when another writer created the table first."""
    try:
        create_table_with_add_actions(
            table_uri,
            DeltaSchema.from_arrow(schema),
            actions,
            mode="error",
            partition_by=list(partition_by) or None,
            configuration=configuration or None,
            storage_options=options,
            commit_properties=properties,
        )
    except (CommitFailedError, DeltaError) as exc:
        if "already exists" not in str(exc) and not isinstance(exc, CommitFailedError):
            raise translate(exc, action="cannot create the Delta table", path=table_uri) from exc
        log.info("%s was created by another writer meanwhile; appending instead", table_uri)
        return False
    except OSError as exc:
        raise translate(exc, action="cannot create the Delta table", path=table_uri) from exc
    return True


def _create_empty(
    table_uri: str,
    schema: pa.Schema,
    partition_by: Sequence[str],
    configuration: dict[str, str],
    options: dict[str, str] | None,
) -> None:
    try:
        DeltaTable.create(
            table_uri,
            schema,
            mode="error",
            partition_by=list(partition_by) or None,
            configuration=configuration or None,
            storage_options=options,
            raise_if_key_not_exists=False,  # our own s3events.* table properties
            commit_properties=CommitProperties(max_commit_retries=0),
        )
    except (CommitFailedError, DeltaError) as exc:
        if open_table(table_uri, options or {}) is None:
            raise translate(exc, action="cannot create the Delta table", path=table_uri) from exc
        log.info("%s was created by another writer meanwhile; using it", table_uri)
    except OSError as exc:
        raise translate(exc, action="cannot create the Delta table", path=table_uri) from exc


def _check_partitioning(table: DeltaTable, table_uri: str, partition_by: Sequence[str]) -> None:
    existing = list(table.metadata().partition_columns)
    if existing != list(partition_by):
        raise FatalError(
            f"{table_uri} is partitioned by {existing}, but the files are by {list(partition_by)}"
        )


def _add_new_columns(table: DeltaTable, table_uri: str, schema: pa.Schema) -> None:
    """Add the nullable top-level columns of `schema` that the table lacks (one ALTER commit)."""
    current = {f.name: f for f in table.schema().fields}
    wanted = DeltaSchema.from_arrow(schema).fields
    new: list[Field] = []
    for f in wanted:
        have = current.get(f.name)
        if have is None:
            if not f.nullable:
                raise FatalError(f"{table_uri}: new column {f.name!r} must be nullable to be added")
            new.append(f)
        elif _type_json(have) != _type_json(f):
            raise FatalError(
                f"{table_uri}: column {f.name!r} is {_type_json(have)} in the table "
                f"but {_type_json(f)} in the new files"
            )
    if new:
        log.info("%s: adding column(s) %s", table_uri, ", ".join(f.name for f in new))
        table.alter.add_columns(new)


def _type_json(f: Field) -> str:
    return json.dumps(json.loads(f.to_json())["type"], sort_keys=True)


def _version_of(handle: TableHandle, commit_id: str) -> int:
    """The version whose commitInfo carries `commit_id`, searching back from the latest."""
    table_uri = handle.path
    limit = 8
    for _ in range(50):
        table = handle.latest()
        if table is None:
            raise FatalError(f"{table_uri} disappeared right after a commit")
        latest = table.version()
        try:
            history = table.history(limit)
        except (OSError, DeltaError) as exc:  # the commit stands; only reading its version back failed
            action = "committed, but cannot read back the version of the table"
            raise translate(exc, action=action, path=table_uri) from exc
        expected = min(limit, latest + 1)
        # history() lists commits up to the newest in the log but numbers them from the version the
        # table object loaded: if a writer committed in between, there are extra entries. Look again.
        if len(history) > expected:
            continue
        for offset, info in enumerate(history):
            if info.get(COMMIT_ID_KEY) == commit_id:
                return latest - offset
        if len(history) < expected or limit > latest:  # the whole (retained) log was searched
            break
        limit *= 4
    raise FatalError(f"{table_uri}: cannot find commit {commit_id} in the table history")
