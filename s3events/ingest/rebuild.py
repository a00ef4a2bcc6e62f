"""`s3events ingest --target NAME --rebuild --yes`: replace targets from the metadata table's snapshot.

Each named target's error table and then its target table are deleted; ingest then runs as usual, and a
target without a checkpoint bootstraps from the metadata table's snapshot at its latest version, whatever
the log or vacuum retention left of the change feed.

Order: the error table first, because it holds a copy of the checkpoint (a replay skips error rows it
already holds) and the origin of `strategy=latest`: a new target's bootstrap must not find them. Within a
table, the log before the data files, so a deletion cut short leaves either a table s3events refuses to
read (a log with versions missing: run the rebuild again) or no table and unreferenced data files (no
reader sees them; maintenance's vacuum removes them). Run it with ingest stopped for those targets.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from pathlib import Path

from s3events.config import Settings, keys
from s3events.errors import ConfigError, FatalError
from s3events.infra import aws
from s3events.ingest.target import target_specs

log = logging.getLogger(__name__)

DELETE_BATCH = 1000  # keys per DeleteObjects request (its limit)


def rebuild_targets(
    settings: Settings, names: Sequence[str], *, confirmed: bool, checkpoint: int | None = None
) -> list[str]:
    """Delete the tables of the targets `names` (their error tables first) so that ingest rebuilds them
    from the snapshot; returns the paths deleted. ConfigError unless targets are named and `confirmed`."""
    if not names:
        raise ConfigError("--rebuild", "name the targets to rebuild with --target NAME (repeatable)")
    if checkpoint is not None:
        raise ConfigError("--rebuild", "rebuilds from the snapshot; it takes no --checkpoint")
    if settings.get(keys.INGEST_MISSING_CHECKPOINT_STRATEGY) != "earliest":
        raise ConfigError(
            "--rebuild",
            "a rebuilt target starts from the metadata table's snapshot: it needs "
            "s3events.ingest.missing.checkpoint.strategy=earliest",
        )
    specs = target_specs(settings, tuple(names))
    paths = [path for spec in specs for path in (spec.error_table_path, spec.path)]
    if not confirmed:
        raise ConfigError(
            "--rebuild",
            "deletes the tables " + ", ".join(paths) + " and rebuilds them from the metadata table's "
            "snapshot; add --yes to confirm (stop any other ingest of these targets first)",
        )
    options = aws.options_from(settings)
    for path in paths:
        removed = delete_table(path, options)
        log.warning("rebuild: deleted %s (%d files)", path, removed)
    return paths


def delete_table(path: str, options: aws.AwsOptions) -> int:
    """Delete every file of the table at `path` (none: 0), its log first; the number of files deleted."""
    if not path.startswith("s3://"):
        root = Path(path)
        if not root.exists():
            return 0
        count = sum(1 for f in root.rglob("*") if f.is_file())
        shutil.rmtree(root / "_delta_log", ignore_errors=True)
        shutil.rmtree(root)
        return count
    bucket, _, prefix = path.removeprefix("s3://").partition("/")
    prefix = prefix.rstrip("/") + "/"
    client = aws.client(options, "s3")
    try:
        keys_found = [
            item["Key"]
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for item in page.get("Contents", [])
        ]
    except client.exceptions.ClientError as exc:
        raise aws.classify(exc, action=f"listing the table {path} to rebuild it") from exc
    log_first = sorted(keys_found, key=lambda k: not k.startswith(prefix + "_delta_log/"))
    for start in range(0, len(log_first), DELETE_BATCH):
        chunk = log_first[start : start + DELETE_BATCH]
        answer = client.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
        )
        if answer.get("Errors"):
            first = answer["Errors"][0]
            raise FatalError(
                f"cannot delete {first.get('Key')} of {path}: {first.get('Code')} "
                f"{first.get('Message', '')}; run the rebuild again once the cause is fixed"
            )
    return len(keys_found)
