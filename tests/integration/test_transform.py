"""A target's SQL transform on the shared local Spark: refused before anything is written when it is not
row-wise or Spark refuses it, lineage carried through any projection, rows filtered counted, a file of
bad data isolated as an error row while the rest of the batch is transformed."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from s3events.errors import ConfigError
from s3events.infra import aws
from s3events.ingest.files.transform import Transform, TransformFailed, TransformSpec, transform_spec
from s3events.ingest.files.transform_sql import statements

pytestmark = pytest.mark.integration

TS = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema(
    [
        ("_source_file", pa.string()),
        ("_source_etag", pa.string()),
        ("_source_line", pa.int64()),
        ("_event_time", TS),
        ("id", pa.int64()),
        ("amount", pa.string()),
        ("tags", pa.list_(pa.string())),
        ("ts", TS),
        ("_ingested_at", TS),
    ]
)
WHEN = datetime(2026, 11, 26, 12, tzinfo=UTC)


def batch(*files: tuple[str, list[tuple[int, str, list[str] | None]]]) -> pa.Table:
    rows = []
    for uri, records in files:
        for line, (ident, amount, tags) in enumerate(records, start=1):
            rows.append(
                {
                    "_source_file": uri,
                    "_source_etag": "e",
                    "_source_line": line,
                    "_event_time": WHEN,
                    "id": ident,
                    "amount": amount,
                    "tags": tags,
                    "ts": WHEN,
                    "_ingested_at": WHEN,
                }
            )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


GOOD = ("s3://b/good.json", [(1, "1.50", ["a", "b"]), (2, "2.25", []), (None, "3", None)])
ALSO_GOOD = ("s3://b/also.json", [(4, "4", ["c"])])
BAD = ("s3://b/bad.json", [(5, "5", None), (6, "not a number", None)])


def transform(spark: Any, *sql: str) -> Transform:
    return Transform(
        spark, TransformSpec("s3events.ingest.target.t.transform.sql", tuple(statements(";".join(sql))))
    )


def test_a_projection_keeps_the_lineage_the_service_carries(spark: Any):
    t = transform(spark, "SELECT id, CAST(amount AS DECIMAL(18,2)) AS amount_d, to_date(ts) AS dt FROM src")

    out = t.apply(batch(GOOD)).rows

    assert out.column_names == [
        "id", "amount_d", "dt", "_source_file", "_source_etag", "_source_line", "_event_time", "_ingested_at"
    ]  # fmt: skip
    assert out["_source_line"].to_pylist() == [1, 2, 3]
    assert out["_source_file"].to_pylist() == ["s3://b/good.json"] * 3
    assert t.check(SCHEMA).names == out.column_names


def test_rows_a_where_removes_are_counted_and_an_explode_keeps_each_row_s_lineage(spark: Any):
    t = transform(spark, "SELECT id, explode(tags) AS tag FROM <SRC> WHERE id IS NOT NULL")

    result = t.apply(batch(GOOD, ALSO_GOOD))

    got = sorted(zip(result.rows["tag"].to_pylist(), result.rows["_source_line"].to_pylist(), strict=True))
    assert got == [("a", 1), ("b", 1), ("c", 1)]
    assert result.filtered == 2  # id 2 exploded to nothing, and the null id
    assert result.errors == []


def test_statements_of_a_file_temporary_views_then_the_query(spark: Any):
    t = transform(
        spark,
        "CREATE OR REPLACE TEMPORARY VIEW clean AS SELECT *, upper(amount) AS a FROM src WHERE id > 1",
        "WITH big AS (SELECT * FROM clean) SELECT id, a FROM big UNION ALL SELECT id + 100, a FROM big",
    )

    out = t.apply(batch(GOOD, ALSO_GOOD)).rows

    assert sorted(out["id"].to_pylist()) == [2, 4, 102, 104]
    assert out.column_names[-5:] == [
        "_source_file",
        "_source_etag",
        "_source_line",
        "_event_time",
        "_ingested_at",
    ]


def test_a_file_whose_value_fails_a_cast_becomes_one_error_row_and_the_others_land(spark: Any):
    t = transform(spark, "SELECT id, CAST(amount AS DECIMAL(18,2)) AS amount_d FROM src")

    result = t.apply(batch(GOOD, BAD, ALSO_GOOD))

    assert [uri for uri, _ in result.errors] == ["s3://b/bad.json"]
    assert "CAST_INVALID_INPUT" in result.errors[0][1] and "\n" not in result.errors[0][1]
    assert sorted(result.rows["_source_file"].unique().to_pylist()) == [
        "s3://b/also.json",
        "s3://b/good.json",
    ]
    assert result.rows.num_rows == 4


def test_a_transform_failing_for_every_file_fails_the_target(spark: Any):
    t = transform(spark, "SELECT CAST(amount AS INT) + 0 AS n FROM src WHERE amount LIKE 'not%' OR id = 5")
    bad_too = ("s3://b/bad2.json", [(7, "not either", None)])

    with pytest.raises(TransformFailed, match="every file"):
        t.apply(batch(BAD, bad_too))


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("SELECT count(*) FROM src", "an aggregate"),
        ("SELECT id, row_number() OVER (ORDER BY id) FROM src", "a window function"),
        ("SELECT a.id FROM src a JOIN src b ON a.id = b.id", "a join"),
        ("SELECT DISTINCT id FROM src", "DISTINCT"),
        ("SELECT * FROM src ORDER BY id LIMIT 10", "LIMIT"),
        ("SELECT id FROM src WHERE id > (SELECT avg(id) FROM src)", "a subquery"),
        ("SELECT id FROM src UNION ALL SELECT 1", "a SELECT without FROM src"),
    ],
)
def test_a_transform_over_the_batch_as_a_whole_is_refused_at_start_up(spark: Any, sql: str, said: str):
    with pytest.raises(ConfigError) as refused:
        transform(spark, sql).check(SCHEMA)

    message = str(refused.value)
    assert message.startswith("s3events.ingest.target.t.transform.sql: a transform must be row-wise")
    assert said in message and "\n" not in message


@pytest.mark.parametrize(
    ("sql", "said"),
    [("SELEC id FROM src", "PARSE_SYNTAX_ERROR"), ("SELECT no_such_column FROM src", "UNRESOLVED_COLUMN")],
)
def test_sql_spark_refuses_is_one_line_naming_the_key(spark: Any, sql: str, said: str, capfd: Any):
    with pytest.raises(ConfigError) as refused:
        transform(spark, sql).check(SCHEMA)

    message = str(refused.value)
    assert message.startswith("s3events.ingest.target.t.transform.sql: ") and said in message
    assert "\n" not in message
    assert "at org.apache.spark" not in capfd.readouterr().err  # no JVM stack logged


DELETE_FIELD = ("s3events.ingest.target.t.delete.field", "amount")


@pytest.mark.parametrize("sql", ["SELECT id FROM src", "SELECT id, amount AS amount_text FROM src"])
def test_a_transform_dropping_the_delete_field_its_rows_hold_is_refused_naming_the_key(spark: Any, sql: str):
    t = Transform(spark, TransformSpec("s3events.ingest.target.t.transform.sql", (sql,)), marker=DELETE_FIELD)

    with pytest.raises(ConfigError) as refused:
        t.check(SCHEMA)

    message = str(refused.value)
    assert message.startswith("s3events.ingest.target.t.transform.sql: the transform drops amount")
    assert "s3events.ingest.target.t.delete.field" in message and "\n" not in message


def test_a_transform_keeping_the_delete_field_or_over_rows_without_it_is_accepted(spark: Any):
    keeps = Transform(
        spark, TransformSpec("k", ("SELECT *, id * 2 AS twice FROM src WHERE id > 0",)), marker=DELETE_FIELD
    )
    assert "amount" in keeps.check(SCHEMA).names
    without = Transform(spark, TransformSpec("k", ("SELECT id FROM src",)), marker=DELETE_FIELD)
    assert "amount" not in without.check(pa.schema([f for f in SCHEMA if f.name != "amount"])).names


KEYS = ("s3events.ingest.target.t.transform.sql", "s3events.ingest.target.t.transform.sql.file")
LOCAL = aws.AwsOptions(region="us-east-1")


def test_the_sql_comes_from_one_key_or_the_other_never_both(tmp_path: Path):
    sql_file = tmp_path / "orders.sql"
    sql_file.write_text("CREATE TEMPORARY VIEW v AS SELECT * FROM src;\nSELECT id FROM v;\n")

    spec = transform_spec(sql=None, sql_file=str(sql_file), keys=KEYS, aws_options=LOCAL)
    assert spec is not None
    assert spec.statements == ("CREATE TEMPORARY VIEW v AS SELECT * FROM src", "SELECT id FROM v")
    assert spec.key == "s3events.ingest.target.t.transform.sql.file"

    with pytest.raises(ConfigError, match=r"transform\.sql or .*transform\.sql\.file, not both"):
        transform_spec(sql="SELECT * FROM src", sql_file=str(sql_file), keys=KEYS, aws_options=LOCAL)
    with pytest.raises(ConfigError, match="cannot read"):
        transform_spec(sql=None, sql_file=str(tmp_path / "nope.sql"), keys=KEYS, aws_options=LOCAL)
    with pytest.raises(ConfigError, match="holds no SQL statement"):
        transform_spec(sql=" -- nothing;", sql_file=None, keys=KEYS, aws_options=LOCAL)
    assert transform_spec(sql=None, sql_file=None, keys=KEYS, aws_options=LOCAL) is None


def test_a_sql_file_on_s3_is_read_through_the_credential_chain(aws_options: aws.AwsOptions, s3: Any):
    s3.create_bucket(Bucket="sqls")
    s3.put_object(Bucket="sqls", Key="orders.sql", Body=b"SELECT id FROM <SRC> WHERE id > 0;")

    spec = transform_spec(sql=None, sql_file="s3://sqls/orders.sql", keys=KEYS, aws_options=aws_options)

    assert spec is not None and spec.statements == ("SELECT id FROM src WHERE id > 0",)
