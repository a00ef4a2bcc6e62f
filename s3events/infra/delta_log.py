"""The statistics JSON of a table's live files, as the log holds it (delta-rs gives it only parsed).

delta-rs 1.6 parses each file's statistics into the column types, and a bound it cannot represent
becomes null: a DECIMAL(24,6) bound written as `-7.734567890123456e+17` reads back as no bound at all,
though delta-spark reads it (and skips the file by it). Telling which files hold lossy bounds therefore
needs the text: the newest checkpoint at or below the version (its `add.stats` column), then the JSON
commits after it, replayed (an add of a path replaces the earlier one, a remove drops it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from s3events.infra.parquet_files import filesystem_for

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.\d{10}\.\d{10})?\.parquet$")


def live_stats(table_uri: str, storage: Mapping[str, str], version: int) -> dict[str, str | None]:
    """Log path (URI-encoded, as the log and `get_add_actions` name it) -> statistics JSON, of every file
    live at `version`."""
    filesystem, root = filesystem_for(table_uri, storage)
    log = f"{root}/_delta_log"
    names = [info.base_name for info in filesystem.get_file_info(pafs.FileSelector(log))]
    checkpoints = sorted(
        (int(m.group(1)), name)
        for name in names
        if (m := _CHECKPOINT.match(name)) and int(m.group(1)) <= version
    )
    live: dict[str, str | None] = {}
    start = 0
    if checkpoints:
        start = checkpoints[-1][0] + 1
        for checkpointed, name in checkpoints:
            if checkpointed == start - 1:  # every part of the newest checkpoint
                _read_checkpoint(filesystem, f"{log}/{name}", live)
    commits = sorted((int(m.group(1)), name) for name in names if (m := _COMMIT.match(name)))
    for committed, name in commits:
        if start <= committed <= version:
            _replay(filesystem, f"{log}/{name}", live)
    return live


def _read_checkpoint(filesystem: pafs.FileSystem, path: str, live: dict[str, str | None]) -> None:
    with filesystem.open_input_file(path) as source:
        adds = pq.read_table(source, columns=["add"]).column("add")
    for add in adds.to_pylist():
        if add is not None:
            live[add["path"]] = add.get("stats")


def _replay(filesystem: pafs.FileSystem, path: str, live: dict[str, str | None]) -> None:
    with filesystem.open_input_file(path) as source:  # the same GET as a stream; one IAM action for both
        text = source.read().decode("utf-8")
    for line in text.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if "add" in action:
            live[action["add"]["path"]] = action["add"].get("stats")
        elif "remove" in action:
            live.pop(action["remove"]["path"], None)
