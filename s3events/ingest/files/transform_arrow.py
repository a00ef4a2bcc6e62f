"""A transform's Arrow plan: the subset of Spark SQL proven to give Spark's rows, evaluated with
`pyarrow.compute` where the fast path's parsed rows already are (no JVM). Pure: no Spark here.

Spark SQL stays the specification. `transform_arrow_plan` translates Spark's optimized plan of a
transform into an `ArrowPlan` only when every node and expression is on the whitelist below; anything
else keeps the transform on Spark. Each rule here is held equal to Spark's by a differential test
(tests/integration/test_transform_arrow.py); where an answer could differ, evaluating raises
`NotOurAnswer` and the batch goes to Spark, which owns every decision about bad values (an ANSI
error, an overflow). So this module never makes an error row.

Whitelist: column references, literals, `=`, `<=>`, `<`, `<=`, `>`, `>=` (doubles with Spark's NaN
rules: NaN equals NaN and sorts above every number), AND/OR/NOT (three-valued), IS [NOT] NULL,
`coalesce`, `upper`/`lower` of ASCII strings, `concat`, + - * and unary minus on integers (ANSI: an
overflow is not our answer) and doubles, and ANSI casts: integer widening, integer to double,
integers and booleans to string, integers and decimals to DECIMAL (a value that does not fit is not
our answer), double to DECIMAL (HALF_UP; a value within rounding error of a half is not our answer),
TIMESTAMP to DATE in UTC, and a string `yyyy-mm-dd[T…| …]` to DATE (`to_date`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Value: TypeAlias = Any  # a pyarrow Array, ChunkedArray or Scalar

_INTEGERS = {"tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64()}
_SIMPLE = {
    **_INTEGERS,
    "boolean": pa.bool_(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
_ISO_DATE = r"^[1-9][0-9]{3}-[0-9]{2}-[0-9]{2}([T ]|$)"  # the date part Spark reads; what follows is ignored
_FLOATING = ("double",)
OPS = frozenset(
    {"col", "lit", "cast", "and", "or", "not", "isnull", "isnotnull", "coalesce", "neg", "add", "sub", "mul"}
    | {"upper", "lower", "concat"}
    | {"eq", "eqnull", "lt", "le", "gt", "ge"}
)


class NotOurAnswer(Exception):
    """Evaluating in Arrow could differ from Spark here (or Spark raises): the batch goes to Spark."""


def arrow_type(spark_type: str) -> pa.DataType | None:
    """The Arrow type of a Spark type (its `simpleString`), as Spark hands it to Arrow; None: not ours."""
    found = _DECIMAL.fullmatch(spark_type)
    if found:
        precision, scale = int(found[1]), int(found[2])
        return pa.decimal128(precision, scale) if precision <= 38 else None
    return _SIMPLE.get(spark_type)


@dataclass(frozen=True, slots=True)
class Expr:
    op: str  # one of OPS
    type: str  # the Spark type of its value (`simpleString`)
    args: tuple[Expr, ...] = ()
    ref: int = 0  # col: the attribute's id
    value: object = None  # lit: the value (None: NULL)


@dataclass(frozen=True, slots=True)
class Step:
    """A Filter (`condition`) or a Project (`outputs`: name, attribute id, expression)."""

    condition: Expr | None = None
    outputs: tuple[tuple[str, int, Expr], ...] = ()


@dataclass(frozen=True, slots=True)
class ArrowPlan:
    inputs: tuple[tuple[str, int, pa.DataType], ...]  # src's columns: name, attribute id, type, in order
    steps: tuple[Step, ...]  # bottom-up
    output: pa.Schema  # the rows the plan gives: a column passed on keeps src's type


def evaluate(plan: ArrowPlan, table: pa.Table) -> pa.Table:
    """The plan's rows for the rows of `table` (src's columns, any order; a null-typed column is a
    column of nulls). NotOurAnswer when `table` is not the src the plan was analysed for, or when an
    answer could differ from Spark's."""
    try:
        return _evaluate(plan, table)
    except NotOurAnswer:
        raise
    except (pa.ArrowException, ValueError, TypeError, ArithmeticError) as exc:
        raise NotOurAnswer(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc


def _evaluate(plan: ArrowPlan, table: pa.Table) -> pa.Table:
    names = [name for name, _, _ in plan.inputs]
    if sorted(table.column_names) != sorted(names):
        raise NotOurAnswer(f"src has columns {sorted(table.column_names)}, the plan {sorted(names)}")
    env: dict[int, pa.ChunkedArray] = {}
    for name, ref, wanted in plan.inputs:
        column = table[name]
        if pa.types.is_null(column.type):
            column = pa.chunked_array([pa.nulls(len(column), wanted)])
        if column.type != wanted:
            raise NotOurAnswer(f"column {name} is {column.type}, the plan's src has {wanted}")
        env[ref] = column
    rows = table.num_rows
    out: list[tuple[str, int]] = [(name, ref) for name, ref, _ in plan.inputs]
    for step in plan.steps:
        if step.condition is not None:
            mask = _array(_eval(step.condition, env), rows)
            kept = pa.table({str(ref): column for ref, column in env.items()}).filter(mask)
            env = {int(name): kept[name] for name in kept.column_names}
            rows = kept.num_rows
        else:
            env = {ref: _array(_eval(expr, env), rows) for _, ref, expr in step.outputs}
            out = [(name, ref) for name, ref, _ in step.outputs]
    schema = plan.output
    columns = [env[ref] for _, ref in out]
    for f, column in zip(schema, columns, strict=True):
        if column.type != f.type:
            raise NotOurAnswer(f"{f.name} came out as {column.type}, Spark's is {f.type}")
    return pa.Table.from_arrays(columns, schema=schema)


def _arrow(kind: str) -> pa.DataType:
    found = arrow_type(kind)
    if found is None:
        raise NotOurAnswer(f"no Arrow type for {kind}")
    return found


def _array(value: Value, rows: int) -> pa.ChunkedArray:
    if isinstance(value, pa.Scalar):
        return pa.chunked_array([pa.repeat(value, rows)], value.type)
    return value if isinstance(value, pa.ChunkedArray) else pa.chunked_array([value])


def _eval(expr: Expr, env: dict[int, pa.ChunkedArray]) -> Value:
    if expr.op == "col":
        return env[expr.ref]
    if expr.op == "lit":
        return pa.scalar(expr.value, _arrow(expr.type))
    args = [_eval(a, env) for a in expr.args]
    if expr.op == "cast":
        return _cast(args[0], expr.args[0].type, expr.type)
    if expr.op in _COMPARE:
        floating = expr.args[0].type in _FLOATING
        return _COMPARE[expr.op](args[0], args[1], floating)
    return _FUNCTIONS[expr.op](expr, args)


def _arith(checked: str, plain: str) -> Callable[[Expr, list[Value]], Value]:
    def run(expr: Expr, args: list[Value]) -> Value:
        if expr.type in _INTEGERS:
            return pc.call_function(checked, args)  # raises on overflow, as ANSI Spark does
        if expr.type in _FLOATING:
            return pc.call_function(plain, args)
        raise NotOurAnswer(f"{expr.op} on {expr.type}")

    return run


_FUNCTIONS: dict[str, Callable[[Expr, list[Value]], Value]] = {
    "and": lambda _, a: pc.and_kleene(a[0], a[1]),
    "or": lambda _, a: pc.or_kleene(a[0], a[1]),
    "not": lambda _, a: pc.invert(a[0]),
    "isnull": lambda _, a: pc.is_null(a[0], nan_is_null=False),
    "isnotnull": lambda _, a: pc.is_valid(a[0]),
    "coalesce": lambda _, a: pc.coalesce(*a),
    "neg": lambda e, a: _arith("negate_checked", "negate")(e, a),
    "add": _arith("add_checked", "add"),
    "sub": _arith("subtract_checked", "subtract"),
    "mul": _arith("multiply_checked", "multiply"),
    "upper": lambda _, a: _ascii_only(a[0], pc.ascii_upper),
    "lower": lambda _, a: _ascii_only(a[0], pc.ascii_lower),
    "concat": lambda _, a: pc.binary_join_element_wise(*a, "", null_handling="emit_null"),
}


def _ascii_only(value: Value, run: Callable[[Value], Value]) -> Value:
    """Spark changes the case of a non-ASCII string by Java's rules (`ß` becomes `SS`): not ours."""
    if not pc.all(pc.fill_null(pc.string_is_ascii(value), True)).as_py():
        raise NotOurAnswer("the case of a non-ASCII string")
    return run(value)


def _nan(value: Value) -> Value:
    return pc.is_nan(value)


def _eq(a: Value, b: Value, floating: bool) -> Value:
    if not floating:
        return pc.equal(a, b)
    # Spark: NaN = NaN. `or_` (not Kleene) keeps a null operand's result null.
    return pc.or_(pc.equal(a, b), pc.and_(_nan(a), _nan(b)))


def _lt(a: Value, b: Value, floating: bool) -> Value:
    if not floating:
        return pc.less(a, b)
    return pc.or_(pc.less(a, b), pc.and_(pc.invert(_nan(a)), _nan(b)))  # NaN above every number


def _le(a: Value, b: Value, floating: bool) -> Value:
    return pc.or_(_lt(a, b, floating), _eq(a, b, floating))


def _eq_null_safe(a: Value, b: Value, floating: bool) -> Value:
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    return pc.if_else(pc.or_(pc.is_null(a), pc.is_null(b)), both_null, _eq(a, b, floating))


_COMPARE: dict[str, Callable[[Value, Value, bool], Value]] = {
    "eq": _eq,
    "eqnull": _eq_null_safe,
    "lt": _lt,
    "le": _le,
    "gt": lambda a, b, f: _lt(b, a, f),
    "ge": lambda a, b, f: _le(b, a, f),
}


# -- casts ----------------------------------------------------------------------------------------------


def castable(source: str, target: str) -> bool:
    """Whether a CAST from `source` to `target` (Spark types) is on the whitelist."""
    if source == target:
        return True
    if target.startswith("decimal"):
        return source in _INTEGERS or source == "double" or source.startswith("decimal")
    if target in _INTEGERS:
        return source in _INTEGERS and _INTEGER_RANK[source] <= _INTEGER_RANK[target]
    if target == "double":
        return source in _INTEGERS
    if target == "string":
        return source in _INTEGERS or source == "boolean"
    if target == "date":
        return source in ("timestamp", "string")
    return False


_INTEGER_RANK = {"tinyint": 0, "smallint": 1, "int": 2, "bigint": 3}


def _cast(value: Value, source: str, target: str) -> Value:
    if not castable(source, target):
        raise NotOurAnswer(f"CAST from {source} to {target}")
    wanted = _arrow(target)
    if source == target:
        return value
    if isinstance(value, pa.Scalar):  # a literal the optimizer did not fold: as a one-row column
        return _cast(pa.array([value.as_py()], value.type), source, target)[0]
    if source == "double" and target.startswith("decimal"):
        return _map_chunks(value, lambda a: _double_to_decimal(a, wanted))
    if source == "string" and target == "date":
        return _map_chunks(value, _string_to_date)
    if source in _INTEGERS and target.startswith("decimal"):  # Arrow wants room for any integer first
        value = pc.cast(value, pa.decimal128(38, wanted.scale))
    # Arrow's safe casts raise where a value does not fit (an integer into DECIMAL(p,s), a long into a
    # double it cannot hold exactly, a decimal whose scale would drop digits Spark rounds): not ours.
    return pc.cast(value, wanted, safe=True)


def _map_chunks(value: Value, run: Callable[[pa.Array], pa.Array]) -> pa.ChunkedArray:
    chunks = value.chunks if isinstance(value, pa.ChunkedArray) else [value]
    return pa.chunked_array([run(c) for c in chunks])


def _double_to_decimal(values: pa.Array, wanted: pa.Decimal128Type) -> pa.Array:
    """Spark's CAST(double AS DECIMAL(p,s)): the double's decimal digits rounded HALF_UP (away from
    zero) to s places. Every decimal string that reads back as the double lies within half an ulp of
    it; when no half-way point lies that close, every such string rounds alike, so the double itself
    decides. Values that near a half-way point, or too large to hold as exact integers, are not ours."""
    scale, precision = wanted.scale, wanted.precision
    if scale > 18:
        raise NotOurAnswer(f"DECIMAL scale {scale}")
    valid = pc.is_valid(values).to_numpy(zero_copy_only=False)
    x = pc.fill_null(values, 0.0).to_numpy(zero_copy_only=False)
    if not np.isfinite(x).all():
        raise NotOurAnswer("NaN or an infinity to DECIMAL")
    scaled = np.abs(x) * (10.0**scale)
    if (scaled >= 2.0**52).any():
        raise NotOurAnswer("a double too large to round exactly")
    whole = np.floor(scaled)
    fraction = scaled - whole
    if (np.abs(fraction - 0.5) <= 4 * np.spacing(scaled)).any():
        raise NotOurAnswer("a double within rounding error of a half")
    unscaled = (whole + (fraction > 0.5)).astype(np.int64) * np.where(x < 0, -1, 1)
    if precision <= 18 and (np.abs(unscaled) >= 10**precision).any():
        raise NotOurAnswer(f"a value beyond DECIMAL({precision},{scale})")
    words = np.empty(len(x) * 2, dtype=np.int64)
    words[0::2] = unscaled  # little-endian 128-bit two's complement: low word, then the sign
    words[1::2] = np.where(unscaled < 0, -1, 0)
    mask = None if valid.all() else pa.array(valid).buffers()[1]
    return pa.Array.from_buffers(wanted, len(x), [mask, pa.py_buffer(words.tobytes())])


def _string_to_date(values: pa.Array) -> pa.Array:
    """Spark's CAST(string AS DATE) for `yyyy-mm-dd`, alone or followed by `T` or a space and anything
    (which Spark ignores); any other form (Spark's trimming, one-digit fields, a sign) is not ours, nor
    a day the calendar lacks (Arrow's cast of the ten characters raises)."""
    matched = pc.match_substring_regex(values, _ISO_DATE)
    if not pc.all(pc.fill_null(matched, True)).as_py():
        raise NotOurAnswer("a string not of the form yyyy-mm-dd to DATE")
    return pc.cast(pc.utf8_slice_codeunits(values, 0, 10), pa.date32())
