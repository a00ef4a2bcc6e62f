"""A transform's SQL as statements, and the row-wise rule on plan shapes (no Spark)."""

from __future__ import annotations

import pytest

from s3events.ingest.files.transform_sql import PlanNode, refusal, statements


def node(name: str, *children: PlanNode, src: bool = False, subquery: bool = False) -> PlanNode:
    return PlanNode(name, tuple(children), src_view=src, has_subquery=subquery)


SRC = node("SubqueryAlias", node("View", node("LocalRelation"), src=True))


def test_a_file_of_statements_splits_on_semicolons_outside_quotes_and_comments():
    text = """
    -- views first; then the query
    CREATE TEMPORARY VIEW clean AS SELECT * FROM <SRC> WHERE note != 'a;b' AND `we;ird` IS NOT NULL;
    /* a block comment; with a semicolon */
    SELECT id, "x;y" AS q, '<SRC>' AS literal FROM clean;
    ;
    """
    assert statements(text) == [
        "-- views first; then the query\n    CREATE TEMPORARY VIEW clean AS SELECT * FROM src "
        "WHERE note != 'a;b' AND `we;ird` IS NOT NULL",
        "/* a block comment; with a semicolon */\n    SELECT id, \"x;y\" AS q, '<SRC>' AS literal FROM clean",
    ]


def test_an_escaped_quote_does_not_end_a_string():
    assert statements(r"SELECT 'it\'s; fine' FROM src; SELECT 2") == [
        r"SELECT 'it\'s; fine' FROM src",
        "SELECT 2",
    ]


def test_comments_alone_are_no_statement():
    assert statements("-- nothing here;\n/* nor; here */") == []


def test_projection_filter_generator_union_and_views_over_src_are_row_wise():
    plan = node(
        "Union",
        node("Project", node("Filter", SRC)),
        node("Project", node("Generate", node("SubqueryAlias", node("View", node("Project", SRC))))),
    )
    assert refusal(plan) is None


@pytest.mark.parametrize(
    ("step", "said"),
    [
        ("Aggregate", "an aggregate"),
        ("Window", "a window function"),
        ("Join", "a join"),
        ("Distinct", "DISTINCT"),
        ("GlobalLimit", "LIMIT"),
        ("Except", "EXCEPT"),
        ("Expand", "GROUPING SETS"),
        ("SomethingNew", "a SomethingNew step"),
    ],
)
def test_a_step_over_the_batch_as_a_whole_is_refused_by_name(step: str, said: str):
    reason = refusal(node("Project", node(step, SRC)))
    assert reason is not None and reason.startswith(said)


def test_rows_not_from_src_are_refused():
    values = node("Union", node("Project", SRC), node("Project", node("LocalRelation")))
    assert "VALUES" in (refusal(values) or "")
    other_view = node("Project", node("View", node("LocalRelation")))  # a temporary view over VALUES
    assert "VALUES" in (refusal(other_view) or "")
    assert "another table" in (refusal(node("Project", node("LogicalRelation"))) or "")


def test_a_subquery_anywhere_is_refused():
    assert "subquery" in (refusal(node("Project", node("Filter", SRC, subquery=True))) or "")
