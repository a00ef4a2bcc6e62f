"""A target's SQL transform, as text and as a plan shape: the pure rules (no Spark here).

- A `.sql.file` may hold several statements (temporary views, then the query); `statements` splits them
  on `;` outside quotes and comments, and `<SRC>` (Hudi's name for the input) reads as `src`.
- **Row-wise only** (`refusal`): every output row must come from one input row, whatever rows share its
  batch, because batch boundaries move with the batch limits and a replay must write the same rows. So
  a plan may project, filter, call functions and generators (`explode`), union branches and read views,
  all over `src`; an aggregate, a window, a join, DISTINCT, LIMIT, a subquery or another table is
  refused. The rule is checked on Spark's analyzed plan (`transform.py` hands it over as `PlanNode`s),
  never on the SQL text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

SRC = "src"
HUDI_SRC = "<SRC>"

# Analyzed-plan nodes a row-wise transform is made of.
ROW_WISE = frozenset(
    {
        "Project",
        "Filter",
        "Generate",
        "SubqueryAlias",
        "View",
        "Union",
        "WithCTE",
        "CTERelationDef",
        "CTERelationRef",
        "Sort",
        "Repartition",
        "RepartitionByExpression",
        "ResolvedHint",
        "LocalRelation",
        "LogicalRDD",
    }
)
# What a person calls the nodes most often refused.
_CALLED = {
    "Aggregate": "an aggregate (GROUP BY, or an aggregate function such as count or sum)",
    "Window": "a window function (OVER ...)",
    "Join": "a join",
    "Distinct": "DISTINCT (or UNION without ALL)",
    "Deduplicate": "a de-duplication",
    "GlobalLimit": "LIMIT",
    "LocalLimit": "LIMIT",
    "Offset": "OFFSET",
    "Tail": "a tail",
    "Intersect": "INTERSECT",
    "Except": "EXCEPT",
    "Sample": "TABLESAMPLE",
    "Expand": "GROUPING SETS, CUBE or ROLLUP",
    "Pivot": "PIVOT",
    "LogicalRelation": "another table: a transform reads src only",
    "HiveTableRelation": "another table: a transform reads src only",
    "DataSourceV2Relation": "another table: a transform reads src only",
    "OneRowRelation": "a SELECT without FROM src: a transform reads src only",
}


@dataclass(frozen=True, slots=True)
class PlanNode:
    """One node of an analyzed plan: its class name, its children, whether it is the view `src`, and
    whether its expressions hold subqueries."""

    name: str
    children: tuple[PlanNode, ...] = ()
    src_view: bool = False
    has_subquery: bool = False


def statements(text: str) -> list[str]:
    """The statements of `text`, `<SRC>` read as `src`; empty statements dropped."""
    found: list[str] = []
    current: list[str] = []
    for kind, token in _tokens(text):
        if kind == "code" and token == ";":
            found.append("".join(current).strip())
            current = []
        elif kind == "code" and token == HUDI_SRC:
            current.append(SRC)
        else:
            current.append(token)
    found.append("".join(current).strip())
    return [s for s in found if s and not _only_comments(s)]


def refusal(plan: PlanNode) -> str | None:
    """Why `plan` is not row-wise over `src` (the first reason found), or None when it is. What is under
    the view `src` is the service's own reading of the batch, not the user's plan."""
    if plan.src_view:
        return None
    if plan.has_subquery:
        return "a subquery (it reads the batch as a whole)"
    if plan.name not in ROW_WISE:
        return _CALLED.get(plan.name, f"a {plan.name} step (not row-wise)")
    if not plan.children and plan.name in ("LocalRelation", "LogicalRDD"):
        return "rows that do not come from src (a VALUES list): a transform reads src only"
    for child in plan.children:
        reason = refusal(child)
        if reason:
            return reason
    return None


def _only_comments(statement: str) -> bool:
    return all(kind == "comment" or not token.strip() for kind, token in _tokens(statement))


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    """(kind, text) pieces: 'quoted' strings and identifiers, 'comment's, and 'code' (one `;` or one
    `<SRC>` per piece, other code in runs)."""
    i, n = 0, len(text)
    run: list[str] = []
    while i < n:
        end, kind = _special(text, i)
        if kind is None:
            run.append(text[i])
            i += 1
            continue
        if run:
            yield "code", "".join(run)
            run = []
        yield kind, text[i:end]
        i = end
    if run:
        yield "code", "".join(run)


def _special(text: str, i: int) -> tuple[int, str | None]:
    """Where a quoted string, comment, `;` or `<SRC>` starting at `i` ends, and its kind."""
    c = text[i]
    if c in "'\"`":
        j = i + 1
        while j < len(text):
            if text[j] == "\\" and c != "`":
                j += 2
                continue
            if text[j] == c:
                return j + 1, "quoted"
            j += 1
        return len(text), "quoted"
    if text.startswith("--", i):
        end = text.find("\n", i)
        return (len(text) if end < 0 else end), "comment"
    if text.startswith("/*", i):
        end = text.find("*/", i + 2)
        return (len(text) if end < 0 else end + 2), "comment"
    if c == ";":
        return i + 1, "code"
    if text.startswith(HUDI_SRC, i):
        return i + len(HUDI_SRC), "code"
    return i, None
