"""Reads a local Delta table's new commits as they land: for each object, the first commit that held
it and when that commit became visible (the modification time of its `_delta_log/<version>.json`:
delta-rs publishes a local commit by moving a finished file into place), so the times do not depend
on when the table is read."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import unquote

import pyarrow.parquet as pq


@dataclass
class Seen:
    visible: float  # epoch seconds: the commit's log file mtime
    stamp: float | None  # captured_at (metadata) or _ingested_at (target), epoch seconds
    version: int  # the commit that first held the object


@dataclass
class TableWatch:
    """Reads a local Delta table's new commits: for each object, the first commit holding it."""

    path: Path
    columns: tuple[str, ...]  # ("bucket", "key", "captured_at") or ("_source_file", "_ingested_at")
    next_version: int = 0
    seen: dict[str, Seen] = field(default_factory=dict)

    def refresh(self) -> None:
        log_dir = self.path / "_delta_log"
        while True:
            entry = log_dir / f"{self.next_version:020d}.json"
            try:
                visible = entry.stat().st_mtime
                lines = entry.read_text().splitlines()
            except FileNotFoundError:
                return
            for line in lines:
                action = json.loads(line)
                add = action.get("add")
                if add is not None and add.get("dataChange", True):
                    self._read_file(self.path / unquote(add["path"]), visible, self.next_version)
            self.next_version += 1

    def _read_file(self, file: Path, visible: float, version: int) -> None:
        try:
            table = pq.read_table(file, columns=list(self.columns))
        except (FileNotFoundError, KeyError):  # vacuumed meanwhile, or a file without the columns
            return
        for row in table.to_pylist():
            if "key" in row:
                uri, stamp = f"s3://{row['bucket']}/{row['key']}", row["captured_at"]
            else:
                uri, stamp = row["_source_file"], row["_ingested_at"]
            if uri not in self.seen:
                self.seen[uri] = Seen(visible, _epoch(stamp), version)


def _epoch(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None
