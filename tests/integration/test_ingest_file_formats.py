"""Whole-file formats and records that span lines, ingested against moto_server, local Spark and real
delta-rs tables: Avro, ORC, XML, binary, multi-line JSON and CSV. Each batch holds a broken file of its
format beside good ones: the broken file is one error row with its reason, the good ones land."""

from __future__ import annotations

import gzip
import io
import json
from datetime import UTC, date, datetime
from decimal import Decimal

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pytest

from s3events.errors import ConfigError
from s3events.ingest.service import run_ingest
from tests.conftest import read_table
from tests.integration.test_ingest import capture, settings_for, target_conf

pytestmark = pytest.mark.integration

AVRO_SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}]},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}


def avro_bytes(schema: dict, rows: list[dict], codec: str = "deflate") -> bytes:
    sink = io.BytesIO()
    fastavro.writer(sink, fastavro.parse_schema(schema), rows, codec=codec)
    return sink.getvalue()


def orc_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    orc.write_table(table, sink)
    return sink.getvalue()


def _order(n: int) -> dict:
    return {
        "id": n,
        "amount": Decimal(f"{n}.25"),
        "day": date(2026, 1, n) if n % 2 else None,
        "at": datetime(2026, 1, 1, 12, n, tzinfo=UTC),
        "tags": ["a"] * n,
    }


def test_avro_and_orc_files_land_with_logical_types_and_a_broken_file_is_one_error_row(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    put = lambda key, body: s3.put_object(Bucket=stack.bucket, Key=key, Body=body)  # noqa: E731
    put("avro/a.avro", avro_bytes(AVRO_SCHEMA, [_order(1), _order(2)]))
    wider = {**AVRO_SCHEMA, "fields": [*AVRO_SCHEMA["fields"], {"name": "note", "type": ["null", "string"]}]}
    put("avro/b.avro.gz", gzip.compress(avro_bytes(wider, [{**_order(3), "note": "n"}], codec="null")))
    good = avro_bytes(AVRO_SCHEMA, [_order(n) for n in range(1, 5)])
    put("avro/lying.avro", good[:-40])  # the header promises a block the file does not hold
    table = pa.table(
        {
            "id": pa.array([10, 11], pa.int64()),
            "price": pa.array([Decimal("1.50"), Decimal("2.25")], pa.decimal128(9, 2)),
            "day": pa.array([date(2026, 2, 1), date(2026, 2, 2)], pa.date32()),
        }
    )
    put("orc/a.orc", orc_bytes(table))
    put("orc/cut.orc", orc_bytes(table)[:-30])
    capture(stack)
    a, o = str(tmp_path / "a"), str(tmp_path / "o")
    settings = settings_for(
        stack,
        {
            "a": target_conf("a", a, "avro", key__prefix="avro/"),
            "o": target_conf("o", o, "orc", key__prefix="orc/"),
        },
    )

    run_ingest(settings, once=True, spark=spark)

    rows = sorted(read_table(a), key=lambda r: r["id"])
    assert [(r["id"], r["amount"], r["day"], r["note"], r["_source_line"]) for r in rows] == [
        (1, Decimal("1.25"), date(2026, 1, 1), None, 0),
        (2, Decimal("2.25"), None, None, 1),
        (3, Decimal("3.25"), date(2026, 1, 3), "n", 0),
    ]
    assert rows[0]["at"] == datetime(2026, 1, 1, 12, 1, tzinfo=UTC) and rows[1]["tags"] == ["a", "a"]
    errors = read_table(a + "_errors")
    assert [e["_source_file"] for e in errors] == [f"s3://{stack.bucket}/avro/lying.avro"]
    assert "Avro" in errors[0]["error"]
    rows = sorted(read_table(o), key=lambda r: r["id"])
    assert [(r["id"], r["price"], r["day"], r["_source_line"]) for r in rows] == [
        (10, Decimal("1.50"), date(2026, 2, 1), 0),
        (11, Decimal("2.25"), date(2026, 2, 2), 1),
    ]
    errors = read_table(o + "_errors")
    assert [e["_source_file"] for e in errors] == [f"s3://{stack.bucket}/orc/cut.orc"]
    assert "ORC" in errors[0]["error"]


def test_multi_line_json_and_csv_keep_records_whole_and_a_broken_document_is_one_error_row(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    put = lambda key, body: s3.put_object(Bucket=stack.bucket, Key=key, Body=body)  # noqa: E731
    put("j/array.json", json.dumps([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], indent=2).encode())
    put("j/doc.json.gz", gzip.compress(json.dumps({"id": 3, "v": {"deep": [1, 2]}}, indent=4).encode()))
    put("j/cut.json", b'[\n  {"id": 4},\n  {"id": 5')
    put("c/quoted.csv", b'id,note\n1,"first\nsecond"\n2,plain\n3,"a ""q"", b"\n')
    capture(stack)
    j, c = str(tmp_path / "j"), str(tmp_path / "c")
    settings = settings_for(
        stack,
        {
            "j": target_conf("j", j, "json", key__prefix="j/", reader__options="multiLine=true"),
            "c": target_conf("c", c, "csv", key__prefix="c/", reader__options='multiLine=true,escape="'),
        },
    )

    run_ingest(settings, once=True, spark=spark)

    rows = sorted(read_table(j), key=lambda r: r["id"])
    assert [(r["id"], r["_source_line"]) for r in rows] == [(1, 0), (2, 1), (3, 0)]
    assert rows[0]["v"] == "a" and rows[2]["v"] == '{"deep":[1,2]}'  # a string column: Spark's inference
    errors = read_table(j + "_errors")
    assert [e["_source_file"] for e in errors] == [f"s3://{stack.bucket}/j/cut.json"]
    assert errors[0]["error"].startswith("not valid JSON")
    rows = sorted(read_table(c), key=lambda r: r["id"])
    assert [(r["id"], r["note"], r["_source_line"]) for r in rows] == [
        (1, "first\nsecond", 2),
        (2, "plain", 4),
        (3, 'a "q", b', 5),
    ]


def test_xml_rows_follow_spark_shapes_and_binary_objects_land_whole_or_as_error_rows(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    put = lambda key, body: s3.put_object(Bucket=stack.bucket, Key=key, Body=body)  # noqa: E731
    put(
        "x/books.xml",
        b'<?xml version="1.0"?>\n<catalog><book id="7"><title lang="en">Dune</title><price>9.5</price>'
        b'<tag>a</tag><tag>b</tag></book>\n<book id="8"><title>Emma</title><price>4</price></book>'
        b"</catalog>",
    )
    put("x/bad.xml", b"<catalog><book id='9'><title>open</book></catalog>")
    put("b/small.pdf", b"%PDF-1.7 \x00\x01")
    put("b/large.bin", b"x" * 2048)
    capture(stack)
    x, b = str(tmp_path / "x"), str(tmp_path / "b")
    settings = settings_for(
        stack,
        {
            "x": target_conf("x", x, "xml", key__prefix="x/", reader__options="rowTag=book"),
            "b": target_conf("b", b, "binary", key__prefix="b/", binary__max__bytes=1024),
        },
    )

    run_ingest(settings, once=True, spark=spark)

    rows = sorted(read_table(x), key=lambda r: r["_id"])
    assert [(r["_id"], r["price"], r["_source_line"]) for r in rows] == [(7, 9.5, 0), (8, 4.0, 1)]
    assert rows[0]["title"] == {"_VALUE": "Dune", "_lang": "en"} and rows[0]["tag"] == ["a", "b"]
    assert rows[1]["title"] == {"_VALUE": "Emma", "_lang": None} and rows[1]["tag"] is None
    errors = read_table(x + "_errors")
    assert [e["_source_file"] for e in errors] == [f"s3://{stack.bucket}/x/bad.xml"]
    assert errors[0]["error"].startswith("not well-formed XML")
    rows = read_table(b)
    assert [(r["content"], r["size"], r["_source_file"]) for r in rows] == [
        (b"%PDF-1.7 \x00\x01", 11, f"s3://{stack.bucket}/b/small.pdf")
    ]
    errors = read_table(b + "_errors")
    assert [e["_source_file"] for e in errors] == [f"s3://{stack.bucket}/b/large.bin"]
    assert "over binary.max.bytes (1024)" in errors[0]["error"]


def test_xml_target_without_row_tag_fails_at_start_naming_the_key(make_stack, tmp_path):
    stack = make_stack()
    with pytest.raises(ConfigError, match=r"reader\.options.*rowTag"):
        settings_for(stack, {"x": target_conf("x", str(tmp_path / "x"), "xml")})
