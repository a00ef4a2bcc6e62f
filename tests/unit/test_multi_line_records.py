"""Cutting objects into records that span lines (multi-line JSON and CSV, XML rows) and typing Avro
schemas: pure functions, no Spark, no servers."""

from __future__ import annotations

import json
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from s3events.ingest.files.formats import avro_format, records, xml_format
from s3events.ingest.files.lines import CorruptData


def _split(fmt: str, data: bytes, **options: str) -> list[tuple[int, str]]:
    split = records.splitter(fmt, options)
    assert split is not None
    return list(split(data))


def test_a_top_level_array_gives_each_element_its_index_and_its_text_unchanged():
    data = b'\xef\xbb\xbf [\n {"id": 1, "x": 1.10},\n\n {"id": 2}, 5 ]\n'
    assert _split("json", data, multiLine="true") == [(0, '{"id": 1, "x": 1.10}'), (1, '{"id": 2}'), (2, "5")]


def test_one_pretty_printed_document_is_record_zero_and_an_empty_array_or_file_has_none():
    assert _split("json", b'{\n  "a": [1,\n 2]\n}\n', multiLine="TRUE") == [(0, '{\n  "a": [1,\n 2]\n}')]
    assert _split("json", b"[ ]", multiLine="true") == []
    assert _split("json", b" \n", multiLine="true") == []


@pytest.mark.parametrize(
    "data",
    [b'[{"id": 1}, {"id": 2', b'[{"id": 1} {"id": 2}]', b'{"a": 1} {"b": 2}', b'[{"a": 1}] x'],
    ids=["cut short", "no comma", "two documents", "text after the array"],
)
def test_json_that_does_not_parse_whole_is_one_reason_for_the_file(data):
    with pytest.raises(CorruptData, match="not valid JSON"):
        _split("json", data, multiLine="true")


def test_a_quoted_newline_stays_inside_its_csv_record_numbered_by_its_first_line():
    data = b'id,note\r\n1,"a\r\nb"\r\n2,"say \\"hi\\"\nthere"\n3,"x ""y"" z"\n'
    assert _split("csv", data, multiLine="true") == [
        (1, "id,note"),
        (2, '1,"a\nb"'),
        (4, '2,"say \\"hi\\"\nthere"'),
        (6, '3,"x ""y"" z"'),
    ]


def test_without_multi_line_a_record_is_a_line_and_the_option_is_not_passed_to_spark():
    assert records.splitter("json", {"mode": "PERMISSIVE"}) is None
    assert records.line_options("csv", {"multiLine": "true", "sep": ";"}) == {"sep": ";"}
    assert records.line_options("xml", {"rowTag": "r", "mode": "PERMISSIVE"}) == {"mode": "PERMISSIVE"}


def test_xml_rows_take_spark_shapes_attributes_values_arrays_and_types():
    data = (
        b'<?xml version="1.0"?><c xmlns:p="urn:p"><r id="1"><p:name>A</p:name><n>007</n><f> 1.5 </f>'
        b'<b>TRUE</b><e/><t k="v">txt</t><t>u</t></r><r id="2"><t>w</t><r>inner</r></r></c>'
    )
    rows = [(i, json.loads(r)) for i, r in _split("xml", data, rowTag="r")]
    assert rows == [
        (
            0,
            {
                "_id": 1,
                "name": "A",
                "n": 7,
                "f": 1.5,
                "b": True,
                "e": None,
                "t": [{"_k": "v", "_VALUE": "txt"}, {"_VALUE": "u"}],
            },
        ),
        (1, {"_id": 2, "t": [{"_VALUE": "w"}], "r": "inner"}),
    ]


def test_xml_options_rename_the_attribute_prefix_and_value_tag():
    data = b'<rows><row a="x">v<c/></row></rows>'
    split = records.splitter("xml", {"rowTag": "row", "attributePrefix": "@", "valueTag": "#text"})
    assert split is not None
    assert [json.loads(r) for _, r in split(data)] == [{"@a": "x", "c": None, "#text": "v"}]


@pytest.mark.parametrize(
    "data, reason",
    [
        (b'<!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><r><x>&b;</x></r>', "entity"),
        (b'<!DOCTYPE r [<!ENTITY e SYSTEM "file:///etc/passwd">]><r><x>&e;</x></r>', "entity"),
        (b"<r><x>open</r>", "not well-formed XML"),
    ],
    ids=["billion laughs", "external entity", "mismatched tag"],
)
def test_hostile_or_broken_xml_is_refused_without_expanding_anything(data, reason):
    with pytest.raises(CorruptData, match=reason):
        _split("xml", data, rowTag="x")


def test_avro_types_keep_logical_types_and_follow_spark_avro_for_unions():
    schema = fastavro.parse_schema(
        {
            "type": "record",
            "name": "R",
            "fields": [
                {
                    "name": "d",
                    "type": {
                        "type": "fixed",
                        "name": "F",
                        "size": 8,
                        "logicalType": "decimal",
                        "precision": 18,
                        "scale": 4,
                    },
                },
                {"name": "n", "type": ["null", "int", "long"]},
                {"name": "t", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
                {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
                {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
                {"name": "again", "type": "F"},
            ],
        }
    )
    built = avro_format.arrow_type(schema)
    assert [avro_format.spark_form(f.type) for f in built] == [
        pa.decimal128(18, 4),
        pa.int64(),
        pa.timestamp("us"),
        pa.int32(),
        pa.string(),
        pa.decimal128(18, 4),
    ]


@pytest.mark.parametrize(
    "field_type, reason",
    [
        (["int", "string"], "union"),
        ({"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 0}, "38 digits"),
    ],
)
def test_avro_types_spark_has_none_for_are_named(field_type, reason):
    schema = {"type": "record", "name": "R", "fields": [{"name": "x", "type": field_type}]}
    with pytest.raises(avro_format.UnsupportedAvro, match=reason):
        avro_format.arrow_type(fastavro.parse_schema(schema))


def test_xml_options_default_to_spark_names():
    assert xml_format.XmlOptions.of({"ROWTAG": "r"}) == xml_format.XmlOptions("r", "_", "_VALUE", True)


def _ref() -> Any:
    from datetime import UTC, datetime

    from s3events.ingest.model import FileRef

    return FileRef("b", "k.avro", "e", None, 1, datetime(2026, 1, 1, tzinfo=UTC), "id", "created", 1)


def test_avro_and_orc_fast_parsers_give_lineage_then_typed_columns_and_decline_broken_files():
    import io
    from decimal import Decimal

    import pyarrow.orc as orc

    from s3events.ingest.files.formats import orc_format
    from s3events.ingest.files.formats.base import FileDeclined

    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "id", "type": "long"},
            {
                "name": "amount",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            },
        ],
    }
    sink = io.BytesIO()
    fastavro.writer(
        sink, fastavro.parse_schema(schema), [{"id": n, "amount": Decimal("1.50")} for n in range(3)]
    )
    parser = avro_format.fast_parser(None, declared=None, existing=pa.schema([("id", pa.int32())]))  # type: ignore[arg-type]
    parsed = parser.parse(sink.getvalue(), _ref(), "e", {})
    assert parsed.parts is not None
    [part] = list(parsed.parts)
    assert part.column_names[:4] == ["_source_file", "_source_etag", "_source_line", "_event_time"]
    assert part.column("_source_line").to_pylist() == [0, 1, 2]
    assert part.schema.field("id").type == pa.int32() and part.schema.field("amount").type == pa.decimal128(
        9, 2
    )
    assert parser.parse(b"Obj\x01 not avro", _ref(), "e", {}).reason.startswith("not a readable Avro file")
    cut = avro_format.fast_parser(
        None, declared=None, existing=None
    ).parse(  # type: ignore[arg-type]
        sink.getvalue()[:-20], _ref(), "e", {}
    )
    with pytest.raises(FileDeclined, match="corrupt Avro data"):
        list(cut.parts or [])
    sink = io.BytesIO()
    orc.write_table(pa.table({"id": [1, 2]}), sink)
    orc_parser = orc_format.fast_parser(None, declared=None, existing=None)  # type: ignore[arg-type]
    [part] = list(orc_parser.parse(sink.getvalue(), _ref(), "e", {}).parts or [])
    assert part.column("id").to_pylist() == [1, 2]
    assert orc_parser.parse(sink.getvalue()[:-9], _ref(), "e", {}).reason.startswith("not a readable ORC")
