"""What our writer (parquet_files + delta_commit) puts in a table, read back by delta-spark: statistics of
every column type we write, partition values and paths, app transactions, history and time travel."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from s3events.infra import aws
from s3events.infra.delta_commit import commit_files
from s3events.infra.parquet_files import write_data_file, write_partitioned
from tests.interop.delta_read import (
    Probe,
    assert_filters_agree,
    assert_same_rows,
    files_read,
    history,
    transactions,
)

pytestmark = [pytest.mark.integration, pytest.mark.interop]

LOCAL = aws.AwsOptions(region="us-east-1")

TYPES = pa.schema(
    [
        ("id", pa.int64()),
        ("s", pa.string()),
        ("l", pa.int64()),
        ("d", pa.float64()),
        ("b", pa.bool_()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),  # TIMESTAMP_NTZ (a schema DDL may ask for it): a table feature
        ("dt", pa.date32()),
        ("dec", pa.decimal128(10, 2)),
        ("wide", pa.decimal128(38, 6)),
        ("st", pa.struct([("x", pa.int64()), ("y", pa.string())])),
        ("arr", pa.list_(pa.int64())),
        ("gone", pa.string()),  # all null in some files: nullCount must say so
    ]
)


def ts(day: int, micros: int) -> datetime:
    return datetime(2026, 3, day, 12, 0, 0, micros, tzinfo=UTC)


def ntz(day: int, micros: int) -> datetime:
    return datetime(2026, 4, day, 0, 0, 0, micros)


LONG_A = "a" * 31 + "é" + "tail beyond the 32-character prefix"
LONG_M = "m" * 30 + "🙂🙂" + "and more"  # a prefix ending in a character outside the BMP
# Three files with disjoint ranges in every column that has bounds, and nulls in some of them.
FILES: list[dict[str, list[Any]]] = [
    {
        "id": [0, 1, 2, 3],
        "s": ["apple", LONG_A, "b", None],
        "l": [-5000, -10, 0, None],
        "d": [-2.5, -0.125, 0.0, None],
        "b": [True, True, None, True],
        "ts": [ts(1, 1), ts(1, 999_999), ts(2, 500), None],
        "ntz": [None, ntz(1, 1500), ntz(1, 1), ntz(2, 0)],
        "dt": [date(2026, 1, 1), date(2026, 1, 5), None, date(2026, 1, 9)],
        "dec": [Decimal("-10.50"), Decimal("0.01"), Decimal("3.33"), None],
        "wide": [Decimal("1.000001"), None, Decimal("2.5"), Decimal("3")],
        "st": [{"x": 1, "y": "p"}, {"x": None, "y": "q"}, None, {"x": 3, "y": None}],
        "arr": [[1, 2], [], None, [3]],
        "gone": [None, None, None, None],
    },
    {
        "id": [10, 11, 12, 13],
        "s": ["kiwi", LONG_M, "mango", None],
        "l": [100, 150, 200, None],
        "d": [10.5, 11.25, 12.0, None],
        "b": [False, False, None, False],
        "ts": [ts(10, 123_456), ts(10, 123_457), ts(11, 0), None],
        "ntz": [ntz(10, 0), None, ntz(10, 999), ntz(12, 123_456)],
        "dt": [date(2026, 2, 1), date(2026, 2, 10), date(2026, 2, 20), None],
        "dec": [Decimal("100.00"), Decimal("150.25"), Decimal("199.99"), None],
        "wide": [Decimal("10"), Decimal("11.123456"), None, None],
        "st": [{"x": 10, "y": "r"}, None, {"x": 12, "y": "s"}, {"x": None, "y": None}],
        "arr": [[10], None, [11, None], []],
        "gone": ["here", None, "there", None],
    },
    {
        "id": [20, 21, 22, 23],
        "s": ["watermelon", "x", "zz", None],
        "l": [9_000_000_000_000, 9_000_000_000_001, 9_000_000_000_002, None],
        "d": [1e10, 1e10 + 0.5, 2e10, None],
        "b": [None, None, None, None],
        "ts": [ts(20, 0), ts(25, 1), ts(28, 999_000), None],
        "ntz": [ntz(20, 1), ntz(21, 0), None, None],
        "dt": [date(2026, 12, 1), date(2026, 12, 24), date(2026, 12, 31), None],
        "dec": [Decimal("1000.00"), Decimal("99999999.99"), Decimal("5000.50"), None],
        "wide": [None, None, Decimal("99999999999999999999999999999999.999999"), None],
        "st": [None, None, None, None],
        "arr": [None, [20, 21], [None], None],
        "gone": [None, None, None, None],
    },
]


def sql_literal(column: str, value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime) and value.tzinfo is None:
        return f"TIMESTAMP_NTZ '{value:%Y-%m-%d %H:%M:%S.%f}'"
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value.astimezone(UTC):%Y-%m-%d %H:%M:%S.%f}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, Decimal):
        t = TYPES.field(column).type
        return f"CAST('{value}' AS DECIMAL({t.precision}, {t.scale}))"
    return repr(value)


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
}


def compare(column: str, op: str, value: Any) -> Probe:
    def matches(row: dict[str, Any]) -> bool:
        return row[column] is not None and _OPS[op](row[column], value)

    return Probe(f"`{column}` {op} {sql_literal(column, value)}", matches)


def probes_for(column: str, absent: list[Any]) -> list[Probe]:
    """Equal to the min, the max, a value of the middle file and absent values; the edges (<= min,
    >= max). delta-spark keeps a file only if its statistics admit the value: a wrong bound loses rows."""
    present = sorted({v for f in FILES for v in f[column] if v is not None})
    low, high, middle = present[0], present[-1], present[len(present) // 2]
    return [
        *(compare(column, "=", v) for v in (low, high, middle, *absent)),
        compare(column, "<=", low),
        compare(column, ">=", high),
    ]


def write_typed_table(path: str) -> None:
    written = []
    for data in FILES:
        f = write_data_file(
            [pa.RecordBatch.from_pydict(data, schema=TYPES)], table_uri=path, schema=TYPES, options=LOCAL
        )
        assert f is not None
        written.append(f)
    commit_files(path, written, schema=TYPES, partition_by=[], storage_options={}, transactions={})


def test_filters_on_every_column_type_return_what_delta_rs_returns(delta_spark, tmp_path: Path):
    path = str(tmp_path / "typed")
    write_typed_table(path)
    assert_same_rows(delta_spark, path)

    probes = [
        *probes_for("s", ["n", "a" * 31 + "é", "m" * 30 + "🙂🙂"]),
        *probes_for("l", [50, 9_000_000_000_003]),
        *probes_for("d", [5.0]),
        *probes_for("ts", [ts(10, 123_455), ts(28, 999_001)]),
        *probes_for("ntz", [ntz(1, 1000), ntz(10, 1000)]),
        *probes_for("dt", [date(2026, 1, 20)]),
        *probes_for("dec", [Decimal("50.00")]),
        Probe("wide = 2.5", lambda r: r["wide"] == Decimal("2.5")),
        Probe("b = true", lambda r: r["b"] is True),
        Probe("b IS NULL", lambda r: r["b"] is None),
        Probe("gone IS NOT NULL", lambda r: r["gone"] is not None),
        Probe("gone = 'here'", lambda r: r["gone"] == "here"),
        Probe("st.x = 10", lambda r: r["st"] is not None and r["st"]["x"] == 10),
        Probe("st IS NULL", lambda r: r["st"] is None),
        Probe("array_contains(arr, 20)", lambda r: r["arr"] is not None and 20 in r["arr"]),
    ]
    assert_filters_agree(delta_spark, path, probes)

    # The statistics are used, not ignored: a value of one file reads that file only, an absent one none.
    assert files_read(delta_spark, path, "l = 150") == 1
    assert files_read(delta_spark, path, "ts > TIMESTAMP '2026-03-12 00:00:00'") == 1
    assert files_read(delta_spark, path, "s = 'n'") == 0
    assert files_read(delta_spark, path, "gone IS NOT NULL") == 1


def test_partition_values_with_special_characters_and_of_every_type_read_back(delta_spark, tmp_path: Path):
    path = str(tmp_path / "partitioned")
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("p", pa.string()),
            ("n", pa.int64()),
            ("flag", pa.bool_()),
            ("day", pa.date32()),
            ("at", pa.timestamp("us", tz="UTC")),
        ]
    )
    specials = ["a b", "ünï/日本", "x=y", "100%", "%2F", "a+b:c#d?e", "  ", "", None, "s/l/ash", "'quote\""]
    table = pa.table(
        {
            "id": list(range(len(specials))),
            "p": specials,
            "n": [i % 3 for i in range(len(specials))],
            "flag": [i % 2 == 0 for i in range(len(specials))],
            "day": [date(2026, 11, 1 + i % 2) for i in range(len(specials))],
            "at": [ts(1 + i % 2, 250_000 * (i % 2)) for i in range(len(specials))],
        },
        schema=schema,
    )
    partition_by = ("p", "n", "flag", "day", "at")
    files = write_partitioned(table, table_uri=path, schema=schema, options=LOCAL, partition_by=partition_by)
    commit_files(path, files, schema=schema, partition_by=partition_by, storage_options={}, transactions={})

    rows = assert_same_rows(delta_spark, path)
    assert sorted(r["id"] for r in rows) == list(range(len(specials)))
    probes = [
        *(compare("p", "=", v) for v in specials if v),
        Probe("p IS NULL", lambda r: r["p"] is None),  # '' is null: Delta has no empty partition value
        Probe("flag", lambda r: r["flag"]),
        Probe("n = 2", lambda r: r["n"] == 2),
        Probe("day = DATE '2026-11-02'", lambda r: r["day"] == date(2026, 11, 2)),
        Probe("at = TIMESTAMP '2026-03-02 12:00:00.25'", lambda r: r["at"] == ts(2, 250_000)),
    ]
    assert_filters_agree(delta_spark, path, probes)
    # As the protocol serializes them (and delta-rs does): other readers parse these strictly.
    logged = {
        json.dumps(a["add"]["partitionValues"], sort_keys=True)
        for a in map(json.loads, (Path(path) / "_delta_log" / f"{0:020}.json").read_text().splitlines())
        if "add" in a
    }
    assert (
        json.dumps(
            {"at": "2026-03-01 12:00:00.000000", "day": "2026-11-01", "flag": "true", "n": "0", "p": "a b"},
            sort_keys=True,
        )
        in logged
    )


def test_app_transactions_history_and_time_travel_are_delta_spark_s_too(delta_spark, tmp_path: Path):
    path = str(tmp_path / "versions")
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    for version, ids in enumerate([range(0, 3), range(3, 5), range(5, 9)]):
        batch = pa.RecordBatch.from_pydict({"id": list(ids), "v": [f"v{version}"] * len(ids)}, schema=schema)
        written = write_data_file([batch], table_uri=path, schema=schema, options=LOCAL)
        assert written is not None
        committed = commit_files(
            path,
            [written],
            schema=schema,
            partition_by=[],
            storage_options={},
            transactions={"s3events.ingest/t": 10 + version, "s3events.ingest/t/position": version},
        )
        assert committed == version

    assert transactions(delta_spark, path) == {"s3events.ingest/t": 12, "s3events.ingest/t/position": 2}
    ours = DeltaTable(path).history()
    assert history(delta_spark, path) == sorted((int(h["version"]), h["operation"]) for h in ours)
    rows = assert_same_rows(delta_spark, path, version=1)  # time travel to a version we committed
    assert {r["v"] for r in rows} == {"v0", "v1"}
    assert len(assert_same_rows(delta_spark, path)) == 9
