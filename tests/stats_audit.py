"""Every statistic a Delta table's log (and its checkpoint) holds, checked against the data of its file.

Read straight from `_delta_log` (the JSON commits, and the newest checkpoint's Parquet), never through
delta-rs's parsed view: a bound is judged as a reader that trusts statistics would read it. The rules:
- numRecords is the file's row count; a nullCount, where present, is the column's (a struct field's:
  nulls of the field or of its struct);
- a min / max, where present, is a bound: min <= every value <= max, in the order readers compare
  (strings by code point, timestamps as instants, a timestamp max cut to the millisecond as the protocol
  says). Decimals are exact (the bound equals the file's min / max) and present only up to 15 digits;
  floats have none when the column holds NaN; lists, maps and binary have none.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


@dataclass(frozen=True)
class LoggedAdd:
    path: str  # as the log holds it (URI-encoded)
    partition_values: dict[str, str | None]
    stats: dict[str, Any] | None  # the JSON stats, numbers kept as written (Decimal)
    stats_parsed: dict[str, Any] | None  # a checkpoint's typed stats, when it has them
    where: str  # "log" or "checkpoint"


def _parse_stats(text: str | None) -> dict[str, Any] | None:
    return None if text is None else json.loads(text, parse_float=Decimal)


def _version(name: str) -> int:
    return int(os.path.basename(name).split(".")[0])


def log_adds(table: str) -> list[LoggedAdd]:
    """The live add actions, replayed from every JSON commit."""
    live: dict[str, LoggedAdd] = {}
    for name in sorted(glob.glob(f"{table}/_delta_log/*.json"), key=_version):
        _replay(name, live)
    return list(live.values())


def checkpoint_adds(table: str) -> list[LoggedAdd]:
    """The live add actions as a reader starting from the newest checkpoint sees them."""
    checkpoints = sorted(glob.glob(f"{table}/_delta_log/*.checkpoint.parquet"), key=_version)
    assert checkpoints, f"{table} has no checkpoint"
    newest = checkpoints[-1]
    live: dict[str, LoggedAdd] = {}
    actions = pq.read_table(newest)
    for row in actions.column("add").to_pylist():
        if row:
            live[row["path"]] = LoggedAdd(
                row["path"],
                dict(row["partitionValues"] or []),
                _parse_stats(row.get("stats")),
                row.get("stats_parsed"),
                "checkpoint",
            )
    for name in sorted(glob.glob(f"{table}/_delta_log/*.json"), key=_version):
        if _version(name) > _version(newest):
            _replay(name, live)
    return list(live.values())


def _replay(name: str, live: dict[str, LoggedAdd]) -> None:
    with open(name, encoding="utf-8") as lines:
        for line in lines:
            action = json.loads(line)
            if "add" in action:
                add = action["add"]
                live[add["path"]] = LoggedAdd(
                    add["path"], add["partitionValues"], _parse_stats(add.get("stats")), None, "log"
                )
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)


def audit(table: str) -> list[str]:
    """Every statistic of the log and of the newest checkpoint (when there is one) that is not exact or a
    true bound of its file's data; [] when all are."""
    adds = log_adds(table)
    if glob.glob(f"{table}/_delta_log/*.checkpoint.parquet"):
        adds += checkpoint_adds(table)
    problems: list[str] = []
    for add in adds:
        data = _plain(pq.read_table(os.path.join(table, unquote(add.path))))
        for label, stats in (("stats", add.stats), ("stats_parsed", add.stats_parsed)):
            if stats is not None:
                where = f"{add.where} {label} of {add.path}"
                problems.extend(f"{where}: {p}" for p in _check_file(stats, data, parsed=label != "stats"))
    return problems


def _plain(data: pa.Table) -> pa.Table:
    """View types (delta-rs's MERGE writes string_view) as their plain kin, which compute handles."""
    return data.cast(pa.schema([pa.field(f.name, _plain_type(f.type)) for f in data.schema]))


def _plain_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_plain_type(t.key_type), _plain_type(t.item_type))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(_plain_type(t.value_type))
    return t


def bounded_columns(table: str) -> set[str]:
    """The top-level columns some live file of the log holds a min and max for."""
    return {name for add in log_adds(table) for name in ((add.stats or {}).get("minValues") or {})}


def _check_file(stats: dict[str, Any], data: pa.Table, *, parsed: bool) -> Iterator[str]:
    if stats.get("numRecords") is not None and int(stats["numRecords"]) != data.num_rows:
        yield f"numRecords {stats['numRecords']} but the file holds {data.num_rows} rows"
    for f in data.schema:
        column = data[f.name]
        yield from _check_nulls(f.name, (stats.get("nullCount") or {}).get(f.name), column)
        low = (stats.get("minValues") or {}).get(f.name)
        high = (stats.get("maxValues") or {}).get(f.name)
        yield from _check_bounds(f.name, f.type, low, high, column, parsed=parsed)


def _check_nulls(name: str, count: Any, column: pa.ChunkedArray) -> Iterator[str]:
    if count is None:
        return
    if pa.types.is_struct(column.type):
        if not isinstance(count, dict):
            yield f"{name}: nullCount {count!r} for a struct"
            return
        for field, child in zip(column.type, column.flatten(), strict=True):
            yield from _check_nulls(f"{name}.{field.name}", count.get(field.name), child)
    elif int(count) != column.null_count:
        yield f"{name}: nullCount {count} but {column.null_count} nulls"


def _check_bounds(
    name: str, t: pa.DataType, low: Any, high: Any, column: pa.ChunkedArray, *, parsed: bool
) -> Iterator[str]:
    if low is None and high is None:
        return
    if pa.types.is_struct(t):
        for field, child in zip(t, column.flatten(), strict=True):
            yield from _check_bounds(
                f"{name}.{field.name}",
                field.type,
                (low or {}).get(field.name),
                (high or {}).get(field.name),
                child,
                parsed=parsed,
            )
        return
    if pa.types.is_nested(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        yield f"{name}: bounds {low!r}..{high!r} on a {t} column"
        return
    values = column.drop_null()
    if len(values) == 0:
        return
    if pa.types.is_floating(t) and pc.any(pc.is_nan(values)).as_py():
        yield f"{name}: bounds {low!r}..{high!r} on a column holding NaN"
        return
    actual_low, actual_high = (v.as_py() for v in pc.min_max(values).values())
    if low is None or high is None:
        yield f"{name}: only one of min {low!r} and max {high!r}"
        return
    if pa.types.is_decimal(t):
        if t.precision > 15:
            yield f"{name}: bounds {low!r}..{high!r} on a DECIMAL({t.precision},{t.scale}) column"
        elif Decimal(str(low)) != actual_low or Decimal(str(high)) != actual_high:
            yield f"{name}: decimal bounds {low}..{high}, not the file's {actual_low}..{actual_high}"
        return
    lo, hi = _reader_value(t, low), _reader_value(t, high)
    if pa.types.is_timestamp(t):
        actual_low, actual_high = _instant(actual_low), _millisecond(_instant(actual_high))
        lo, hi = _instant(lo), _instant(hi)
    if not lo <= actual_low:
        yield f"{name}: min {low!r} above the file's min {actual_low!r}"
    if not hi >= actual_high:
        yield f"{name}: max {high!r} below the file's max {actual_high!r}"


def _reader_value(t: pa.DataType, value: Any) -> Any:
    """A JSON (or checkpoint-typed) bound as a reader of a `t` column takes it."""
    if isinstance(value, datetime | date) or not isinstance(value, str | Decimal | int | float | bool):
        return value
    if pa.types.is_floating(t):
        return float(value)
    if pa.types.is_timestamp(t):
        text = str(value).replace(" ", "T")
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return moment
    if pa.types.is_date(t):
        return date.fromisoformat(str(value))
    return value


def _instant(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _millisecond(value: datetime) -> datetime:
    """A max as the protocol lets it be written: cut to the millisecond (readers add 1 ms back)."""
    return value - timedelta(microseconds=value.microsecond % 1000)
