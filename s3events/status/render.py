"""Showing a `Status`: the JSON document of the package docstring, or an aligned table for a terminal."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from s3events.status.model import Status, TableStatus, TransformStatus


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _table_json(table: TableStatus) -> dict[str, Any]:
    return {
        "path": table.path,
        "exists": table.exists,
        "version": table.version,
        "rows": table.rows,
        "rows_exact": table.rows_exact,
        "last_commit_at": _iso(table.last_commit_at),
        "files": table.files,
        "small_files": table.small_files,
        "last_maintained_at": _iso(table.last_maintained_at),
        "error": table.error,
    }


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def status_document(status: Status) -> dict[str, Any]:
    """The JSON document of the module docstring, as Python values."""
    queue = status.queue
    return {
        "generated_at": _iso(status.generated_at),
        "healthy": status.healthy,
        "max_lag_seconds": status.max_lag_seconds,
        "problems": list(status.problems),
        "queue": None
        if queue is None
        else {"url": queue.url, "visible": queue.visible, "in_flight": queue.in_flight, "error": queue.error},
        "metadata": _table_json(status.metadata),
        "quarantine": None if status.quarantine is None else _table_json(status.quarantine),
        "targets": [
            {
                "name": t.name,
                "checkpoint": None
                if t.checkpoint is None
                else {"version": t.checkpoint.version, "position": t.checkpoint.position},
                "lag_versions": t.lag_versions,
                "lag_seconds": _seconds(t.lag_seconds),
                "oldest_pending_version": t.oldest_pending_version,
                "oldest_pending_commit_at": _iso(t.oldest_pending_commit_at),
                "lagging": t.lagging,
                "table": _table_json(t.table),
                "error_table": _table_json(t.error_table),
                "last_error": None
                if t.last_error is None
                else {
                    "error": t.last_error.error,
                    "file": t.last_error.file,
                    "line": t.last_error.line,
                    "ingested_at": _iso(t.last_error.ingested_at),
                },
                "error": t.error,
                "refused": t.refused,
                "transform": None
                if t.transform is None
                else {
                    "identity": t.transform.identity,
                    "rows_filtered": t.transform.rows_filtered,
                    "version": t.transform.version,
                    "error": t.transform.error,
                },
            }
            for t in status.targets
        ],
    }


def render_json(status: Status) -> str:
    return json.dumps(status_document(status), indent=2, ensure_ascii=False)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.0f}s" if seconds >= 1 or seconds == 0 else f"{seconds:.1f}s"
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s"


def _when(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "-"
    stamp = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{stamp} ({_duration(max(0.0, (now - moment).total_seconds()))} ago)"


def _table_line(label: str, table: TableStatus, now: datetime) -> list[str]:
    if table.error:
        return [label, f"cannot read: {table.error}", table.path]
    if not table.exists:
        return [label, "does not exist yet", table.path]
    rows = f"{table.rows}" if table.rows_exact else f">={table.rows}"
    return [
        label,
        f"version {table.version}  rows {rows}  files {table.files} ({table.small_files} small)  "
        f"last commit {_when(table.last_commit_at, now)}  maintained {_when(table.last_maintained_at, now)}",
        table.path,
    ]


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(max(map(len, rows)))]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def render_text(status: Status) -> str:
    """A compact aligned report for people: the sections, one row per target, then the problems."""
    now = status.generated_at
    verdict = "healthy" if status.healthy else f"UNHEALTHY ({len(status.problems)} problem(s))"
    at = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [f"s3events status at {at}: {verdict}; max lag {_duration(status.max_lag_seconds)}", ""]
    sections: list[list[str]] = []
    if status.queue is None:
        sections.append(["queue", "no queue configured (s3events.source.queue.url)", ""])
    elif status.queue.error:
        sections.append(["queue", f"cannot read: {status.queue.error}", status.queue.url])
    else:
        depth = f"visible {status.queue.visible}  in flight {status.queue.in_flight}"
        sections.append(["queue", depth, status.queue.url])
    sections.append(_table_line("metadata", status.metadata, now))
    if status.quarantine is not None:
        sections.append(_table_line("quarantine", status.quarantine, now))
    lines.extend(_aligned(sections))
    if status.targets:
        rows = [
            ["TARGET", "CHECKPOINT", "LAG VERSIONS", "LAG", "VERSION", "ROWS", "ERROR ROWS", "LAST ERROR"]
        ]
        notes = []
        for t in status.targets:
            checkpoint = "-" if t.checkpoint is None else f"{t.checkpoint.version}:{t.checkpoint.position}"
            last = "-"
            if t.last_error is not None:
                where = t.last_error.file or "?"
                if t.last_error.line is not None:
                    where += f":{t.last_error.line}"
                last = f"{_one_line(t.last_error.error)} ({where})"
            lag = "-" if t.lag_seconds is None and t.lag_versions is None else _duration(t.lag_seconds)
            if t.lagging:
                lag += " !"
            rows.append(
                [
                    t.name,
                    checkpoint,
                    _cell(t.lag_versions),
                    lag,
                    _cell(t.table.version),
                    _cell(t.table.rows),
                    _cell(t.error_table.rows if t.error_table.exists else None),
                    last,
                ]
            )
            for kind, table in (("table", t.table), ("error table", t.error_table)):
                if not table.exists and not table.error:
                    notes.append(f"  {t.name}: {kind} {table.path} does not exist yet")
            if t.transform is not None:
                notes.append(f"  {t.name}: {_transform_note(t.transform)}")
        lines.append("")
        lines.extend(_aligned(rows))
        lines.extend(notes)
    if status.problems:
        lines.append("")
        lines.append("problems:")
        lines.extend(f"  {problem}" for problem in status.problems)
    return "\n".join(lines)


def _transform_note(transform: TransformStatus) -> str:
    if transform.error:
        return f"transform: cannot read the table's history: {transform.error}"
    if transform.identity is None:
        return "transform: no batch committed with it yet"
    return (
        f"transform {transform.identity}: the last batch (version {_cell(transform.version)}) "
        f"filtered {transform.rows_filtered} row(s)"
    )


def _one_line(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
