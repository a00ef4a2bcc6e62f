"""Cutting objects into records that span lines (multi-line JSON and CSV, XML rows) and typing Avro
schemas: pure functions, no Spark, no servers."""

from __future__ import annotations

import json

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
