"""From Spark's optimized plan of a transform to an `ArrowPlan` (`transform_arrow`), or why not.

The plan read is the one Spark runs: the optimizer has replaced `to_date` by its CAST, pushed and
merged filters and projections, and added its own `isnotnull` conditions. Only Project and Filter over
`src` itself, with expressions `transform_arrow` evaluates as Spark does, translate; anything else
(another node, function, type or cast, a non-ANSI mode, a time zone other than UTC) gives the reason
the transform stays on Spark. Reads JVM objects through py4j; imports nothing of Spark's.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa

from s3events.ingest.files.transform_arrow import ArrowPlan, Expr, Step, arrow_type, castable

_SIMPLE_OPS = {
    "EqualTo": "eq",
    "EqualNullSafe": "eqnull",
    "LessThan": "lt",
    "LessThanOrEqual": "le",
    "GreaterThan": "gt",
    "GreaterThanOrEqual": "ge",
    "And": "and",
    "Or": "or",
    "Not": "not",
    "IsNull": "isnull",
    "IsNotNull": "isnotnull",
    "Coalesce": "coalesce",
    "Add": "add",
    "Subtract": "sub",
    "Multiply": "mul",
    "UnaryMinus": "neg",
    "Upper": "upper",
    "Lower": "lower",
    "Concat": "concat",
}
_COMPARABLE = ("tinyint", "smallint", "int", "bigint", "double", "string", "boolean", "date")
_ARITHMETIC = ("tinyint", "smallint", "int", "bigint", "double")
SESSION_ZONE = "UTC"  # the product's spark.sql.session.timeZone (infra/spark.py)


class Untranslatable(Exception):
    """Why a plan stays on Spark."""


def translate(plan: Any, src: pa.Schema) -> ArrowPlan | str:
    """The Arrow plan of Spark's optimized `plan` over rows of `src`, or why there is none."""
    try:
        nodes = []
        node = plan
        while _kind(node) in ("Project", "Filter"):
            nodes.append(node)
            node = _items(node.children())[0]
        if _items(node.children()):
            raise Untranslatable(f"a {_kind(node)} step")
        leaf = _items(node.output())
        if [str(a.name()) for a in leaf] != src.names:
            raise Untranslatable(f"a plan that reads {_kind(node)}, not src")
        types = {_ref(a): f.type for a, f in zip(leaf, src, strict=True)}
        inputs = tuple((f.name, _ref(a), f.type) for a, f in zip(leaf, src, strict=True))
        output = pa.schema([(f.name, f.type) for f in src])
        steps = []
        for step_node in reversed(nodes):
            step = _step(step_node)
            if step.condition is None:
                output = pa.schema([(name, _typed(expr, types)) for name, _, expr in step.outputs])
                types.update({ref: _typed(expr, types) for _, ref, expr in step.outputs})
            steps.append(step)
        return ArrowPlan(inputs, tuple(steps), output)
    except Untranslatable as exc:
        return str(exc)


def _typed(expr: Expr, types: dict[int, pa.DataType]) -> pa.DataType:
    """The Arrow type of `expr`'s values: a column passed on keeps its own."""
    if expr.op == "col":
        return types[expr.ref]
    found = arrow_type(expr.type)
    assert found is not None  # `_expr` checked it
    return found


def _step(node: Any) -> Step:
    if _kind(node) == "Filter":
        condition = _expr(node.condition())
        if condition.type != "boolean":
            raise Untranslatable("a WHERE that is not boolean")
        return Step(condition=condition)
    outputs = []
    for item in _items(node.projectList()):
        kind = _kind(item)
        if kind == "Alias":
            outputs.append((str(item.name()), _ref(item), _expr(item.child())))
        elif kind == "AttributeReference":
            outputs.append((str(item.name()), _ref(item), _expr(item)))
        else:
            raise Untranslatable(f"a projection of {kind}")
    return Step(outputs=tuple(outputs))


def _expr(e: Any) -> Expr:
    kind = _kind(e)
    if kind == "AttributeReference":  # any type: an expression over it checks its own
        return Expr("col", str(e.dataType().simpleString()), ref=_ref(e))
    kind_type = _type(e)
    if kind == "Literal":
        return Expr("lit", kind_type, value=_literal(e.value(), kind_type))
    args = tuple(_expr(c) for c in _items(e.children()))
    if kind == "Cast":
        return _cast(e, kind_type, args)
    op = _SIMPLE_OPS.get(kind)
    if op is None:
        raise Untranslatable(f"{kind} (not among the expressions evaluated in Arrow)")
    types = {a.type for a in args}
    if any(arrow_type(t) is None for t in types) and op not in ("isnull", "isnotnull"):
        raise Untranslatable(f"{kind} of {' and '.join(sorted(types))}")
    if op in ("eq", "eqnull", "lt", "le", "gt", "ge"):
        if len(types) != 1 or not (types <= set(_COMPARABLE) or _decimal(args[0].type)):
            raise Untranslatable(f"{kind} of {' and '.join(sorted(types))}")
    elif op in ("add", "sub", "mul", "neg"):
        if types != {kind_type} or kind_type not in _ARITHMETIC:
            raise Untranslatable(f"{kind} of {kind_type}")
        if kind_type != "double" and _mode(e) != "ANSI":
            raise Untranslatable(f"{kind} without ANSI overflow checks")
    elif op == "coalesce" and types != {kind_type}:
        raise Untranslatable("coalesce of differing types")
    elif op in ("upper", "lower", "concat") and (types != {"string"} or kind_type != "string"):
        raise Untranslatable(f"{kind} of {' and '.join(sorted(types))}")
    return Expr(op, kind_type, args)


def _cast(e: Any, target: str, args: tuple[Expr, ...]) -> Expr:
    source = args[0].type
    if not castable(source, target):
        raise Untranslatable(f"CAST from {source} to {target}")
    if _mode(e) != "ANSI":
        raise Untranslatable("a CAST that is not ANSI (TRY_CAST, or ANSI mode off)")
    if source == "timestamp" and _zone(e) != SESSION_ZONE:
        raise Untranslatable(f"a timestamp's date in time zone {_zone(e)}")
    return Expr("cast", target, args)


def _literal(value: Any, kind: str) -> object:
    if value is None:
        return None
    if kind == "string":
        return str(value.toString())
    if _decimal(kind):
        return Decimal(str(value.toString()))
    if kind in ("boolean", "double", "float", "tinyint", "smallint", "int", "bigint", "date", "timestamp"):
        return value
    raise Untranslatable(f"a literal of {kind}")


def _mode(e: Any) -> str:
    if _kind(e) == "UnaryMinus":
        return "ANSI" if e.failOnError() else "LEGACY"
    return str(e.evalMode().toString())


def _zone(e: Any) -> str:
    zone = e.timeZoneId()
    return str(zone.get()) if zone.isDefined() else ""


def _type(e: Any) -> str:
    kind = str(e.dataType().simpleString())
    if arrow_type(kind) is None:
        raise Untranslatable(f"a value of type {kind}")
    return kind


def _decimal(kind: str) -> bool:
    return kind.startswith("decimal(")


def _ref(e: Any) -> int:
    return int(e.exprId().id())


def _kind(e: Any) -> str:
    return str(e.getClass().getSimpleName())


def _items(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]
