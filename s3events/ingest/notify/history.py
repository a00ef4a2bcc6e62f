"""A target table's commitInfo by version, read from its log's commit files: a bounded window of the
oldest versions not announced yet (delta-rs `history` gives only the newest ones)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from s3events.infra.parquet_files import filesystem_for

log = logging.getLogger(__name__)


def commit_infos(
    table_uri: str, storage: Mapping[str, str], *, first: int, last: int
) -> tuple[list[dict[str, Any]], list[int]]:
    """The commitInfo (with its "version") of versions `first`..`last`, and the versions whose commit
    file the log no longer holds (log cleanup: those cannot be announced any more)."""
    filesystem, root = filesystem_for(table_uri, storage)
    found, gone = [], []
    for version in range(first, last + 1):
        path = f"{root}/_delta_log/{version:020d}.json"
        try:
            with filesystem.open_input_stream(path) as stream:
                text = stream.read().decode("utf-8")
        except FileNotFoundError:
            gone.append(version)
            continue
        info = _commit_info(text)
        if info is not None:
            found.append({**info, "version": version})
    return found, gone


def _commit_info(text: str) -> dict[str, Any] | None:
    for line in text.splitlines():
        if '"commitInfo"' not in line:
            continue
        action = json.loads(line)
        info = action.get("commitInfo")
        if isinstance(info, dict):
            return info
    return None
