"""Scratch folders of transformed batches, `<target>/_s3events_staging/src-<id>/`: the rows of a batch the
fast path could not take whole, read by the normal paths for the transform (`transform_path`). Never
committed, so invisible to Delta readers; the batch removes its own. A run killed mid-batch leaves its
folder: the next run removes folders older than the staging directory's leftover age (a live batch's,
another process's, are minutes old) when it meets the target's transform first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from datetime import UTC, datetime

import pyarrow.fs as pafs

from s3events.infra import aws
from s3events.infra.parquet_files import STAGING_DIR, STAGING_LEFTOVER_AGE, filesystem_for

log = logging.getLogger(__name__)

PREFIX = "src-"


def new_scratch(table_uri: str) -> str:
    """A fresh scratch folder's URI under the target's staging directory."""
    return f"{table_uri.rstrip('/')}/{STAGING_DIR}/{PREFIX}{uuid.uuid4().hex}"


def remove_left(table_uri: str, options: aws.AwsOptions, *, now: datetime | None = None) -> int:
    """Remove the files of scratch folders older than STAGING_LEFTOVER_AGE (best effort: what is left is
    removed by a later run); returns how many were removed."""
    storage = aws.delta_storage_options(options) if table_uri.startswith("s3://") else {}
    filesystem, root = filesystem_for(table_uri, storage)
    staging = f"{root}/{STAGING_DIR}"
    cutoff = (now or datetime.now(UTC)) - STAGING_LEFTOVER_AGE
    try:
        found = filesystem.get_file_info(pafs.FileSelector(staging, allow_not_found=True, recursive=True))
    except Exception as exc:  # e.g. no ListBucket: the folders stay, invisible to readers
        log.warning("cannot list %s for scratch folders a stopped run left: %s", staging, exc)
        return 0
    folders = {
        info.path
        for info in found
        if info.type == pafs.FileType.Directory and _in_scratch(info.path, staging)
    }
    old = [
        info.path
        for info in found
        if info.type == pafs.FileType.File
        and _in_scratch(info.path, staging)
        and info.mtime is not None
        and info.mtime.astimezone(UTC) < cutoff
    ]
    for path in old:
        with contextlib.suppress(Exception):
            filesystem.delete_file(path)
    if isinstance(filesystem, pafs.LocalFileSystem):  # object stores have no folders to remove
        for folder in sorted(folders, reverse=True):  # deepest first; one still holding files stays
            with contextlib.suppress(OSError):
                os.rmdir(folder)
    if old:
        log.info("removed %d files of scratch folders a stopped run left under %s", len(old), staging)
    return len(old)


def _in_scratch(path: str, staging: str) -> bool:
    return path.startswith(f"{staging}/{PREFIX}")
