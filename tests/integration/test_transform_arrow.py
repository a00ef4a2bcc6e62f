"""The proof behind a transform's Arrow route: for `src` tables hypothesis draws (nulls, NaN, ±0.0, ±inf,
each integer type's extremes, decimals at their precision's edge, timestamps before 1970 and across a
DST change, dates and near-dates as strings, unicode) and SQL built from the whitelist
(`transform_arrow`), Spark's rows and the Arrow plan's are the same values of the same types, or the
Arrow side declined (no plan, or NotOurAnswer while evaluating). Where Spark raises (an ANSI cast that
fails, an overflow), the Arrow side must not answer: a file's rows would be written where Spark's
route makes an error row."""

from __future__ import annotations

import logging
import math
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from s3events.config import load_settings
from s3events.ingest.files.transform import Transform, TransformSpec, quiet_spark_errors
from s3events.ingest.files.transform_arrow import NotOurAnswer, evaluate
from s3events.ingest.files.transform_arrow_route import arrow_plan
from s3events.ingest.service import SparkRead
from s3events.ingest.target import target_specs

pytestmark = pytest.mark.integration

KEY = "s3events.ingest.target.t.transform.sql"
SRC = pa.schema(
    [
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("i32", pa.int32()),
        ("i64", pa.int64()),
        ("f64", pa.float64()),
        ("dec", pa.decimal128(18, 4)),
        ("s", pa.string()),
        ("b", pa.bool_()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("d", pa.date32()),
    ]
)
_EXTREMES = {
    "i8": [-128, 127, 0, -1, 1, 100],
    "i16": [-(2**15), 2**15 - 1, 0, -1, 7],
    "i32": [-(2**31), 2**31 - 1, 0, -1, 42, 2**20],
    "i64": [-(2**63), 2**63 - 1, 0, -1, 2**53 + 1, 12345, 10**15],
}
_DOUBLES = [
    math.nan, 0.0, -0.0, math.inf, -math.inf, 1e300, -1e300, 5e-324, 0.125, 1.005, 2.675, 123.45, -99.99,
    0.1, 2.0**53, 1e15 + 0.3, 12.5, -7.25,
]  # fmt: skip
_DECIMALS = [
    Decimal("99999999999999.9999"), Decimal("-99999999999999.9999"), Decimal("0.0001"), Decimal("0"),
    Decimal("12.3450"), Decimal("-1.0000"), Decimal("123456.7800"),
]  # fmt: skip
_STRINGS = [
    "2026-11-22T05:01:02.123Z", "2026-03-29 01:30:00", "1969-12-31", "2024-02-29", "2026-02-30",
    " 2026-01-01", "2026-1-1", "0999-01-01", "abc", "", "é", "日本語", "🙂 x", "9999-12-31", "12",
]  # fmt: skip
_TIMES = [
    datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(1900, 1, 1, tzinfo=UTC),
    datetime(2026, 3, 29, 0, 59, 59, tzinfo=UTC),  # an hour before Europe's clocks move on
    datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
    datetime(1970, 1, 1, tzinfo=UTC),
]
_DATES = [date(1969, 12, 31), date(1970, 1, 1), date(2026, 11, 22), date(1, 1, 1)]


def _values(name: str) -> st.SearchStrategy[Any]:
    pool: list[Any] = {
        "f64": _DOUBLES,
        "dec": _DECIMALS,
        "s": _STRINGS,
        "b": [True, False],
        "ts": _TIMES,
        "d": _DATES,
    }.get(name) or _EXTREMES[name]
    more = {
        "f64": st.floats(allow_nan=True, allow_infinity=True, width=64),
        "i32": st.integers(-(2**31), 2**31 - 1),
        "i64": st.integers(-(2**63), 2**63 - 1),
        "s": st.text(max_size=6),
    }.get(name)
    choice = st.sampled_from(pool) if more is None else st.one_of(st.sampled_from(pool), more)
    return st.one_of(st.none(), choice, choice)  # a third of them null


@st.composite
def src_tables(draw: st.DrawFn) -> pa.Table:
    rows = draw(st.integers(1, 8))
    columns = [pa.array([draw(_values(f.name)) for _ in range(rows)], f.type) for f in SRC]
    return pa.Table.from_arrays(columns, schema=SRC)


# -- SQL from the whitelist, typed ----------------------------------------------------------------------

_INTS = ["i8", "i16", "i32", "i64"]
_LITERALS = {
    "int": ["0", "1", "-1", "2147483647", "CAST(NULL AS INT)", "100"],
    "bigint": ["9223372036854775807L", "-5L", "CAST(NULL AS BIGINT)"],
    "double": ["1.5D", "CAST('NaN' AS DOUBLE)", "-0.0D", "CAST(NULL AS DOUBLE)", "1e308D"],
    "string": ["'é'", "''", "'2026-11-22'", "'abc'", "'MiXeD ß'"],
    "boolean": ["TRUE", "FALSE", "CAST(NULL AS BOOLEAN)"],
}


def _integer(draw: st.DrawFn, depth: int) -> str:
    if depth <= 0 or draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from([*_INTS, *_LITERALS["int"], *_LITERALS["bigint"]]))
    op = draw(st.sampled_from(["+", "-", "*", "neg"]))
    if op == "neg":
        return f"negative({_integer(draw, depth - 1)})"
    return f"({_integer(draw, depth - 1)} {op} {_integer(draw, depth - 1)})"


def _double(draw: st.DrawFn, depth: int) -> str:
    if depth <= 0 or draw(st.integers(0, 2)) == 0:
        return draw(
            st.sampled_from(["f64", *_LITERALS["double"], "CAST(i32 AS DOUBLE)", "CAST(i64 AS DOUBLE)"])
        )
    op = draw(st.sampled_from(["+", "-", "*"]))
    return f"({_double(draw, depth - 1)} {op} {_double(draw, depth - 1)})"


def _string(draw: st.DrawFn, depth: int) -> str:
    kind = draw(st.integers(0, 5))
    if kind == 0 or depth <= 0:
        return draw(st.sampled_from(["s", *_LITERALS["string"]]))
    if kind == 1:
        return f"CAST({_integer(draw, depth - 1)} AS STRING)"
    if kind == 2:
        return f"CAST({_boolean(draw, depth - 1)} AS STRING)"
    if kind == 3:
        return f"{draw(st.sampled_from(['upper', 'lower']))}({_string(draw, depth - 1)})"
    if kind == 4:
        return f"concat({_string(draw, depth - 1)}, {_string(draw, depth - 1)})"
    return f"coalesce({_string(draw, depth - 1)}, {_string(draw, depth - 1)})"


def _decimal(draw: st.DrawFn, depth: int) -> str:
    precision = draw(st.sampled_from([5, 10, 18, 20, 38]))
    scale = draw(st.integers(0, min(precision, 6)))
    source = draw(st.sampled_from(["dec", "f64", "i64", "i32", "double", "integer"]))
    inner = {"double": _double(draw, depth - 1), "integer": _integer(draw, depth - 1)}.get(source, source)
    return f"CAST({inner} AS DECIMAL({precision},{scale}))"


def _date(draw: st.DrawFn, depth: int) -> str:
    return draw(st.sampled_from(["to_date(ts)", "CAST(ts AS DATE)", "to_date(s)", "CAST(s AS DATE)", "d"]))


def _boolean(draw: st.DrawFn, depth: int) -> str:
    kind = draw(st.integers(0, 4))
    if depth <= 0 or kind == 0:
        return draw(st.sampled_from(["b", *_LITERALS["boolean"]]))
    if kind == 1:
        maker = draw(st.sampled_from([_integer, _double, _string, _decimal, _date, _boolean]))
        op = draw(st.sampled_from(["=", "<=>", "<", "<=", ">", ">=", "<>"]))
        return f"({maker(draw, depth - 1)} {op} {maker(draw, depth - 1)})"
    if kind == 2:
        op = draw(st.sampled_from(["AND", "OR"]))
        return f"({_boolean(draw, depth - 1)} {op} {_boolean(draw, depth - 1)})"
    if kind == 3:
        return f"(NOT {_boolean(draw, depth - 1)})"
    maker = draw(st.sampled_from([_integer, _double, _string, _date, _boolean]))
    return f"({maker(draw, depth - 1)} IS {draw(st.sampled_from(['', 'NOT ']))}NULL)"


@st.composite
def queries(draw: st.DrawFn) -> str:
    makers = [_integer, _double, _string, _decimal, _date, _boolean]
    picked = draw(st.lists(st.sampled_from(makers), min_size=1, max_size=4))
    columns = ", ".join(f"{make(draw, 2)} AS e{i}" for i, make in enumerate(picked))
    star = draw(st.sampled_from(["", "*, "]))
    where = f" WHERE {_boolean(draw, 2)}" if draw(st.booleans()) else ""
    return f"SELECT {star}{columns} FROM src{where}"


def _comparable(rows: pa.Table) -> list[tuple[Any, ...]]:
    """Rows as tuples whose floats compare by their bits' meaning (NaN equals NaN, -0.0 is not 0.0)."""

    def value(v: Any) -> Any:
        if isinstance(v, float):
            return ("nan",) if math.isnan(v) else (v, math.copysign(1.0, v))
        return v

    return [tuple(value(v) for v in row.values()) for row in rows.to_pylist()]


SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(table=src_tables(), sql=queries())
@example(
    table=pa.Table.from_pylist(
        [{"i64": 3, "f64": 12.34, "s": "2026-11-22T05:01:02.123Z", "b": True, "ts": _TIMES[0]}], schema=SRC
    ),
    sql="SELECT *, CAST(f64 AS DECIMAL(18,2)) AS a, to_date(s) AS dt, to_date(ts) AS d2 FROM src WHERE b",
)
def test_the_arrow_plan_gives_spark_s_rows_or_declines(spark: Any, table: pa.Table, sql: str):
    transform = Transform(spark, TransformSpec(KEY, (sql,)))
    plan = arrow_plan(transform, table.schema)
    try:
        with quiet_spark_errors():
            expected: pa.Table | None = transform.frame_of(transform.session.createDataFrame(table)).toArrow()
    except Exception as exc:
        assert "Analysis" not in type(exc).__name__, f"{sql}: {exc}"  # the generator's SQL analyses
        expected = None
    finally:
        transform.release()
    if plan is None:
        event(f"no Arrow plan: {next(iter(transform.routes.values()))}")
        return
    try:
        got = evaluate(plan, table)
    except NotOurAnswer as exc:
        event(f"declined while evaluating: {exc}" if expected is not None else "Spark raised, Arrow declined")
        return
    event("compared")
    assert expected is not None, f"Spark raised for {sql}, the Arrow plan answered {got.to_pylist()}"
    assert [(f.name, f.type) for f in got.schema] == [(f.name, f.type) for f in expected.schema], sql
    assert _comparable(got) == _comparable(expected), sql


def test_start_up_says_which_route_each_target_s_transform_takes_and_why(
    spark: Any, caplog: Any, tmp_path: Any
):
    caplog.set_level(logging.INFO, logger="s3events.ingest.files.transform_arrow_route")
    targets = {
        "cast": ("SELECT *, CAST(n AS STRING) AS s FROM src WHERE n > 1", ""),
        "length": ("SELECT length(name) AS u FROM src", ""),
        "merged": ("SELECT * FROM src", "mode=merge record.key=n"),
    }
    conf = [f"s3events.ingest.targets={','.join(targets)}"]
    for name, (sql, extra) in targets.items():
        conf += [f"s3events.ingest.target.{name}.{kv}" for kv in (f"path={tmp_path / name}", "format=json")]
        conf += [f"s3events.ingest.target.{name}.schema=n BIGINT, name STRING"]
        conf += [f"s3events.ingest.target.{name}.transform.sql={sql}"]
        conf += [f"s3events.ingest.target.{name}.{kv}" for kv in extra.split()]
    settings = load_settings(None, conf)

    SparkRead(settings, target_specs(settings), spark=spark)

    said = {r.getMessage().split(".")[3]: r.getMessage().split(": ", 1)[1] for r in caplog.records}
    assert said == {
        "cast": "the transform runs in Arrow (every step of its plan is proven equal)",
        "length": "the transform runs on Spark: its plan has Length (not among the expressions evaluated in "
        "Arrow)",
        "merged": "the transform runs on Spark: the target merges (the Arrow route appends only)",
    }
