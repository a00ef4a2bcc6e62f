"""A transform's Arrow plan, evaluated without Spark: the rules that make its answers Spark's, and the
answers it refuses to give (tests/integration/test_transform_arrow.py holds them equal to Spark's)."""

from __future__ import annotations

import math
from datetime import date
from decimal import Decimal

import pyarrow as pa
import pytest

from s3events.ingest.files.transform_arrow import ArrowPlan, Expr, NotOurAnswer, Step, arrow_type, evaluate


def _col(ref: int, kind: str) -> Expr:
    return Expr("col", kind, ref=ref)


def _one(expr: Expr, values: list[object], kind: str, source: pa.DataType) -> list[object]:
    """`expr` over a src of one column `x` (attribute 1) holding `values`."""
    wanted = arrow_type(expr.type)
    assert wanted is not None
    plan = ArrowPlan((("x", 1, source),), (Step(outputs=(("y", 2, expr),)),), pa.schema([("y", wanted)]))
    return evaluate(plan, pa.table({"x": pa.array(values, source)}))["y"].to_pylist()


def test_a_double_becomes_a_decimal_rounded_half_up_as_spark_rounds_it():
    cast = Expr("cast", "decimal(10,1)", (_col(1, "double"),))
    got = _one(cast, [1.23, -1.26, 2.04, -0.0, None, 123.45e2], "double", pa.float64())
    assert got == [Decimal("1.2"), Decimal("-1.3"), Decimal("2.0"), Decimal("0.0"), None, Decimal("12345.0")]


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (0.125, "decimal(10,2)"),  # exactly half-way: which side depends on the digits Java prints
        (1.005, "decimal(10,2)"),  # within rounding error of a half
        (math.nan, "decimal(10,2)"),
        (math.inf, "decimal(10,2)"),
        (1e300, "decimal(38,2)"),
        (12345.67, "decimal(5,2)"),  # does not fit: Spark raises (ANSI)
    ],
)
def test_a_double_whose_decimal_could_differ_from_spark_s_is_not_answered(value: float, kind: str):
    with pytest.raises(NotOurAnswer):
        _one(Expr("cast", kind, (_col(1, "double"),)), [1.0, value], "double", pa.float64())


def test_an_iso_date_string_becomes_its_date_and_any_other_form_is_not_answered():
    cast = Expr("cast", "date", (_col(1, "string"),))
    got = _one(
        cast, ["2026-11-22T05:01:02.123Z", "1969-12-31 23:00", "2024-02-29", None], "string", pa.string()
    )
    assert got == [date(2026, 11, 22), date(1969, 12, 31), date(2024, 2, 29), None]
    for other in ["2026-02-30", " 2026-01-01", "2026-1-01", "20261122", "abc"]:
        with pytest.raises(NotOurAnswer):
            _one(cast, [other], "string", pa.string())


def test_doubles_compare_with_spark_s_nan_rules_and_nulls_stay_unknown():
    nan = math.nan
    eq = Expr("eq", "boolean", (_col(1, "double"), Expr("lit", "double", value=nan)))
    assert _one(eq, [nan, 1.0, None], "double", pa.float64()) == [True, False, None]
    below_nan = Expr("lt", "boolean", (_col(1, "double"), Expr("lit", "double", value=nan)))
    assert _one(below_nan, [nan, math.inf, -0.0, None], "double", pa.float64()) == [False, True, True, None]


def test_and_or_are_three_valued():
    x = _col(1, "boolean")
    null = Expr("lit", "boolean", value=None)
    assert _one(Expr("and", "boolean", (x, null)), [False, True], "boolean", pa.bool_()) == [False, None]
    assert _one(Expr("or", "boolean", (x, null)), [False, True], "boolean", pa.bool_()) == [None, True]


def test_an_integer_overflow_is_not_answered():
    add = Expr("add", "int", (_col(1, "int"), Expr("lit", "int", value=1)))
    assert _one(add, [1, None], "int", pa.int32()) == [2, None]
    with pytest.raises(NotOurAnswer):
        _one(add, [2**31 - 1], "int", pa.int32())


def test_rows_that_are_not_the_plan_s_src_are_not_answered_and_a_null_column_is_typed_nulls():
    plan = ArrowPlan((("x", 1, pa.int64()),), (), pa.schema([("x", pa.int64())]))
    assert evaluate(plan, pa.table({"x": pa.nulls(2)}))["x"].type == pa.int64()
    for other in [
        pa.table({"x": pa.array([1], pa.int32())}),
        pa.table({"x": [1], "extra": [2]}),
        pa.table({}),
    ]:
        with pytest.raises(NotOurAnswer):
            evaluate(plan, other)


def test_a_filter_keeps_the_rows_whose_condition_is_true():
    plan = ArrowPlan(
        (("x", 1, pa.int64()),),
        (Step(condition=Expr("gt", "boolean", (_col(1, "bigint"), Expr("lit", "bigint", value=1)))),),
        pa.schema([("x", pa.int64())]),
    )
    assert evaluate(plan, pa.table({"x": [0, 2, None, 3]}))["x"].to_pylist() == [2, 3]


def test_the_case_of_ascii_strings_changes_and_of_any_other_is_not_answered():
    upper = Expr("upper", "string", (_col(1, "string"),))
    assert _one(upper, ["abc-1", None, ""], "string", pa.string()) == ["ABC-1", None, ""]
    with pytest.raises(NotOurAnswer):
        _one(upper, ["straße"], "string", pa.string())  # Spark's Java gives STRASSE


def test_concat_is_null_when_any_part_is():
    concat = Expr("concat", "string", (_col(1, "string"), Expr("lit", "string", value="-x")))
    assert _one(concat, ["a", None, "é"], "string", pa.string()) == ["a-x", None, "é-x"]
