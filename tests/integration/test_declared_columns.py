"""Declared column types end to end (capture, ingest, the Delta table): schema.hints pin some columns'
types and a value that does not cast is an error row; schema.infer.types=false keeps inferred columns as
text; schema.file (an Avro .avsc in S3) declares the columns, read at start-up. Each on the fast path and
the line path, which give the same rows."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from s3events.errors import ConfigError
from s3events.ingest.service import build_ingest
from tests.conftest import read_table, run_cli
from tests.integration.test_ingest import capture, jsonl, settings_for, target_conf

pytestmark = pytest.mark.integration

PATHS = pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "line-path"])


def _ingest(stack: Any, spark: Any, conf: dict[str, object]) -> Any:
    report = build_ingest(settings_for(stack, {"t": conf}), spark=spark).run_once()
    assert not report.failed, report.failed
    return report


@PATHS
def test_hinted_columns_take_their_types_and_a_value_that_does_not_cast_is_an_error_row(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path, fast: bool
):
    stack = make_stack()
    rows = [
        {"id": 1, "amount": 2.5, "tags": {"a": "x"}, "note": "n"},
        {"id": 2, "amount": "3.10", "tags": None},
        {"id": 3, "amount": "lots"},
    ]
    s3.put_object(Bucket=stack.bucket, Key="in/a.json", Body=jsonl(rows))
    capture(stack)
    path = str(tmp_path / "t")
    hints = "amount DECIMAL(18,2), tags MAP<STRING,STRING>, seen BIGINT"
    conf = target_conf("t", path, "json", schema__hints=hints, json__fast__path=str(fast).lower())

    _ingest(stack, spark, conf)

    fields = {f.name: f.type for f in pa.schema(DeltaTable(path).schema().to_arrow())}
    assert str(fields["amount"]) == "decimal128(18, 2)" and "seen" not in fields  # no line holds it
    assert {r["id"]: (r["amount"], r["tags"]) for r in read_table(path)} == {
        1: (Decimal("2.50"), [("a", "x")]),
        2: (Decimal("3.10"), None),
    }
    errors = read_table(path + "_errors")
    assert [(e["_source_line"], e["raw"]) for e in errors] == [(3, json.dumps(rows[2]))]


@PATHS
def test_infer_types_false_keeps_every_inferred_column_as_text(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path, fast: bool
):
    stack = make_stack()
    body = b'{"id": 12, "price": 2.50, "ok": true, "at": "2026-11-27", "o": {"x": 1}, "l": [1, "a"]}\n'
    s3.put_object(Bucket=stack.bucket, Key="in/a.json", Body=body + b'{"id": -3, "ok": false}\n')
    s3.put_object(Bucket=stack.bucket, Key="in/b.json", Body=b'{"id": 7, "ok": null, "qty": 4}\n')
    capture(stack)
    path = str(tmp_path / "t")
    conf = target_conf(
        "t",
        path,
        "json",
        schema__infer__types="false",
        schema__hints="qty INT",
        json__fast__path=str(fast).lower(),
    )

    report = _ingest(stack, spark, conf)

    by_id = {r["id"]: r for r in read_table(path)}
    assert by_id["12"]["price"] == "2.5" and by_id["12"]["ok"] == "true" and by_id["12"]["at"] == "2026-11-27"
    assert by_id["12"]["o"] == '{"x":1}' and by_id["12"]["l"] == '[1,"a"]'
    assert by_id["-3"]["ok"] == "false" and by_id["7"]["qty"] == 4
    # b.json holds only strings, integers and booleans: the fast path reads it; a.json has a decimal number
    assert [b.fast_path_files for b in report.batches] == [1 if fast else 0]


def _avsc(s3: Any, bucket: str, schema: dict[str, Any]) -> str:
    s3.put_object(Bucket=bucket, Key="schemas/orders.avsc", Body=json.dumps(schema).encode())
    return f"s3://{bucket}/schemas/orders.avsc"


ORDERS = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {
            "name": "amount",
            "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}],
        },
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}]},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
        {"name": "qty", "type": ["null", "int"]},
    ],
}


@PATHS
def test_an_avro_schema_file_in_s3_declares_the_columns(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path, fast: bool
):
    stack = make_stack()
    rows = [{"id": 1, "amount": "2.5", "day": "2026-11-27", "state": "NEW", "extra": 1}, {"id": 2, "qty": 3}]
    s3.put_object(Bucket=stack.bucket, Key="in/a.json", Body=jsonl(rows))
    capture(stack)
    path = str(tmp_path / "t")
    source = _avsc(s3, stack.bucket, ORDERS)
    conf = target_conf(
        "t", path, "json", schema__file=source, schema__hints="qty BIGINT", json__fast__path=str(fast).lower()
    )

    _ingest(stack, spark, conf)

    fields = {f.name: str(f.type) for f in pa.schema(DeltaTable(path).schema().to_arrow())}
    assert [n for n in fields if not n.startswith("_")] == ["id", "amount", "day", "state", "qty"]
    assert (
        fields["amount"] == "decimal128(10, 2)"
        and fields["day"] == "date32[day]"
        and fields["qty"] == "int64"
    )
    got = {r["id"]: (r["amount"], str(r["day"]), r["state"], r["qty"]) for r in read_table(path)}
    assert got == {1: (Decimal("2.50"), "2026-11-27", "NEW", None), 2: (None, "None", None, 3)}


def test_an_avro_union_other_than_nullable_stops_ingest_at_start_up_naming_the_key_and_field(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path
):
    stack = make_stack()
    bad = {**ORDERS, "fields": [*ORDERS["fields"], {"name": "code", "type": ["int", "string"]}]}
    conf = target_conf("t", str(tmp_path / "t"), "json", schema__file=_avsc(s3, stack.bucket, bad))

    with pytest.raises(ConfigError) as caught:
        build_ingest(settings_for(stack, {"t": conf}), spark=spark)

    assert caught.value.key == "s3events.ingest.target.t.schema.file"
    assert "'code'" in str(caught.value) and "orders.avsc" in str(caught.value)


def test_a_decimal_hint_keeps_files_of_json_numbers_on_the_fast_path(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path
):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="in/a.json", Body=jsonl([{"id": 1, "amount": 2.5}, {"id": 2}]))
    s3.put_object(Bucket=stack.bucket, Key="in/b.json", Body=jsonl([{"id": 3, "amount": "1,000.5"}]))
    capture(stack)
    path = str(tmp_path / "t")

    hints = "amount DECIMAL(18,2), missing INT"
    report = _ingest(stack, spark, target_conf("t", path, "json", schema__hints=hints))

    assert [b.fast_path_files for b in report.batches] == [1]  # b.json's string amount: the line path's
    assert "missing" not in DeltaTable(path).schema().to_arrow().names  # a hint adds no column
    got = {r["id"]: r["amount"] for r in read_table(path)}
    assert got == {1: Decimal("2.50"), 2: None, 3: Decimal("1000.50")}  # Spark drops the ',' of a string


def test_csv_hints_type_the_headers_columns_on_the_fast_path(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path
):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="in/a.csv", Body=b"id,amount,code\n1,2.5,007\n2,,010\n")
    capture(stack)
    path = str(tmp_path / "t")
    conf = target_conf("t", path, "csv", schema__hints="amount DECIMAL(18,2)", schema__infer__types="false")

    report = _ingest(stack, spark, conf)

    assert [b.fast_path_files for b in report.batches] == [1]
    assert sorted((r["id"], r["amount"], r["code"]) for r in read_table(path)) == [
        ("1", Decimal("2.50"), "007"),
        ("2", None, "010"),
    ]


@pytest.mark.process
def test_the_ingest_command_exits_2_naming_the_schema_file_key_and_the_field(
    make_stack: Any, s3: Any, tmp_path: Path
):
    stack = make_stack()
    bad = {**ORDERS, "fields": [*ORDERS["fields"], {"name": "code", "type": ["int", "string"]}]}
    conf = {
        "ingest__targets": "t",
        **target_conf("t", str(tmp_path / "t"), "json", schema__file=_avsc(s3, stack.bucket, bad)),
    }

    result = run_cli(["ingest", "--once", *(arg for kv in stack.conf(**conf) for arg in ("--conf", kv))])

    assert result.returncode == 2, result.stderr
    assert "s3events.ingest.target.t.schema.file" in result.stderr and "'code'" in result.stderr
