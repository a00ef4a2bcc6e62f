"""Declaring a target's columns: schema.hints (Spark DDL with nested types), schema.file (an Avro .avsc
or a DDL file) and schema.infer.types; mistakes fail at start-up naming the key and the field, and the
fast path's parsers type new columns as the line path does."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from s3events.config import load_settings
from s3events.config.avro_schema import avro_columns
from s3events.config.ddl_schema import DdlError, ddl_text, parse_columns
from s3events.errors import ConfigError
from s3events.ingest.files.formats import csv_types
from s3events.ingest.files.formats.csv_format import parse_csv
from s3events.ingest.files.formats.csv_types import NewColumns
from s3events.ingest.files.formats.json_format import parse_json_lines
from s3events.ingest.files.formats.json_typing import as_strings, without_absent
from s3events.ingest.schema_file import schema_text
from s3events.ingest.target import target_specs
from tests.unit.conftest import file_ref

TARGET = """\
s3events.source.queue.url=http://127.0.0.1:5000/123456789012/q
s3events.metadata.table.path=s3://bucket/tables/metadata
s3events.ingest.targets=orders
s3events.ingest.target.orders.path=s3://bucket/tables/orders
s3events.ingest.target.orders.format=json
"""
FILE_KEY = "s3events.ingest.target.orders.schema.file"


def settings_of(tmp_path: Path, *overrides: str):
    path = tmp_path / "t.properties"
    path.write_text(TARGET, encoding="utf-8")
    settings = load_settings(path, overrides, env={})
    settings.validate_for("ingest")
    return settings


# -- schema.hints --------------------------------------------------------------------------------------


def test_hints_take_nested_spark_types_in_canonical_ddl():
    columns = parse_columns(
        "amount DECIMAL(18,2), tags MAP<STRING,STRING>, `odd name` ARRAY<VARCHAR(8)>, "
        "s STRUCT<a: INT, b BIGINT>, ts timestamp_ntz, n numeric"
    )
    assert dict(columns) == {
        "amount": "decimal(18,2)",
        "tags": "map<string,string>",
        "odd name": "array<string>",
        "s": "struct<`a`:int,`b`:bigint>",
        "ts": "timestamp_ntz",
        "n": "decimal(10,0)",
    }
    assert ddl_text(columns).startswith("`amount` decimal(18,2), `tags` map<string,string>")


@pytest.mark.parametrize(
    ("text", "column", "why"),
    [
        ("amount DECIMAL(18,2), tags MAP<STRING>", "tags", "expected ,"),
        ("a INT, b FOO", "b", "FOO is not a Spark SQL type"),
        ("a DECIMAL(40,2)", "a", "DECIMAL(40,2)"),
        ("a INT, A STRING", "A", "named twice"),
        ("a ARRAY<INT", "a", "expected >"),
    ],
)
def test_a_bad_hint_names_its_column(text: str, column: str, why: str):
    with pytest.raises(DdlError) as caught:
        parse_columns(text)
    assert caught.value.column == column and why in str(caught.value)


def test_invalid_hints_fail_at_start_up_naming_the_key_and_the_field(tmp_path: Path):
    with pytest.raises(ConfigError) as caught:
        settings_of(tmp_path, "s3events.ingest.target.orders.schema.hints=amount DECIMAL(18,2), tags MAPP")
    assert caught.value.key == "s3events.ingest.target.orders.schema.hints"
    assert "'tags'" in str(caught.value) and "MAPP" in str(caught.value)


def test_hints_and_infer_types_reach_the_target_spec(tmp_path: Path):
    settings = settings_of(
        tmp_path,
        "s3events.ingest.target.orders.schema.hints=amount DECIMAL(18,2)",
        "s3events.ingest.target.orders.schema.infer.types=false",
    )
    (spec,) = target_specs(settings)
    assert dict(spec.schema_hints or {}) == {"amount": "decimal(18,2)"} and spec.infer_types is False


@pytest.mark.parametrize(
    "setting",
    ["schema.hints=amount DECIMAL(18,2)", "schema.infer.types=false"],
)
def test_hints_and_infer_types_need_a_format_that_infers(tmp_path: Path, setting: str):
    with pytest.raises(ConfigError) as caught:
        settings_of(
            tmp_path,
            "s3events.ingest.target.orders.format=parquet",
            f"s3events.ingest.target.orders.{setting}",
        )
    assert caught.value.key == f"s3events.ingest.target.orders.{setting.split('=')[0]}"
    assert "json, csv" in str(caught.value)


def test_a_hint_for_a_lineage_column_fails_at_start_up(tmp_path: Path):
    with pytest.raises(ConfigError) as caught:
        settings_of(tmp_path, "s3events.ingest.target.orders.schema.hints=_source_line STRING")
    assert caught.value.key == "s3events.ingest.target.orders.schema.hints" and "'_source_line'" in str(
        caught.value
    )


def test_schema_and_schema_file_are_not_both_set(tmp_path: Path):
    with pytest.raises(ConfigError) as caught:
        settings_of(tmp_path, "s3events.ingest.target.orders.schema=id BIGINT", f"{FILE_KEY}=s3://b/o.avsc")
    assert caught.value.key == FILE_KEY and "not both" in str(caught.value)


# -- schema.file: Avro ---------------------------------------------------------------------------------

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {
            "name": "amount",
            "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 18, "scale": 2}],
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
        {"name": "digest", "type": {"type": "fixed", "name": "Md5", "size": 16}},
        {"name": "tags", "type": {"type": "map", "values": "string"}},
        {
            "name": "ship",
            "type": {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]},
        },
        {"name": "bill", "type": ["shop.Address", "null"]},
        {"name": "lines", "type": {"type": "array", "items": "double"}},
        {"name": "paid", "type": ["null", "boolean"]},
        {"name": "ratio", "type": "float"},
    ],
}


def test_avro_record_fields_map_to_spark_types_as_spark_avro_reads_them():
    assert dict(avro_columns(json.dumps(ORDER))) == {
        "id": "bigint",
        "amount": "decimal(18,2)",
        "day": "date",
        "at": "timestamp",
        "local": "timestamp_ntz",
        "ref": "string",
        "state": "string",
        "digest": "binary",
        "tags": "map<string,string>",
        "ship": "struct<`city`:string>",
        "bill": "struct<`city`:string>",
        "lines": "array<double>",
        "paid": "boolean",
        "ratio": "float",
    }


@pytest.mark.parametrize(
    ("field", "where", "why"),
    [
        ({"name": "v", "type": ["int", "string"]}, "v", 'is not ["null", T]'),
        ({"name": "v", "type": ["null", "int", "string"]}, "v", 'is not ["null", T]'),
        (
            {
                "name": "v",
                "type": {"type": "record", "name": "R", "fields": [{"name": "w", "type": ["int", "long"]}]},
            },
            "v.w",
            "union",
        ),
        ({"name": "v", "type": "Nope"}, "v", "not an Avro type"),
        ({"name": "v", "type": {"type": "bytes", "logicalType": "decimal", "precision": 50}}, "v", "1..38"),
        ({"name": "v", "type": ["null", "Order"]}, "v", "refers to itself"),
    ],
)
def test_an_avro_field_spark_cannot_hold_is_named(field: dict, where: str, why: str):
    schema = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, field]}
    with pytest.raises(DdlError) as caught:
        avro_columns(json.dumps(schema))
    assert caught.value.column == where and why in str(caught.value)


def test_schema_file_is_avro_by_extension_or_content_else_ddl():
    avro = json.dumps(ORDER)
    assert schema_text("s3://b/orders.avsc", avro, FILE_KEY).startswith("`id` bigint, `amount` decimal(18,2)")
    assert schema_text("/etc/orders.json", avro, FILE_KEY).startswith("`id` bigint")
    ddl = "-- the orders feed\nid BIGINT,\namount DECIMAL(18,2) -- in EUR\n"
    assert schema_text("/etc/orders.ddl", ddl, FILE_KEY) == "`id` bigint, `amount` decimal(18,2)"


@pytest.mark.parametrize(
    ("source", "text", "names"),
    [
        (
            "o.avsc",
            '{"type": "record", "name": "O", "fields": [{"name": "x", "type": ["int", "string"]}]}',
            "'x'",
        ),
        ("o.avsc", '{"type": "record", "name": "O",', "invalid JSON"),
        ("o.avsc", '{"type": "array", "items": "int"}', "one record"),
        ("o.ddl", "id BIGINT, amount MONEY", "'amount'"),
    ],
)
def test_a_bad_schema_file_is_a_config_error_naming_the_key_the_file_and_the_field(
    source: str, text: str, names: str
):
    with pytest.raises(ConfigError) as caught:
        schema_text(source, text, FILE_KEY)
    assert caught.value.key == FILE_KEY and source in str(caught.value) and names in str(caught.value)


# -- the fast path's typing of new columns ---------------------------------------------------------------

FILE = file_ref("in/f.json")


def test_infer_types_false_keeps_json_strings_integers_and_booleans_as_written():
    parsed = parse_json_lines(
        b'{"a": 12, "b": true, "c": "2.50", "d": null}\n{"a": -3}\n',
        FILE,
        "e",
        known=pa.schema([]),
        declared=False,
    )
    strings = as_strings(parsed, pa.schema([]))
    assert strings.table is not None
    rows = strings.table.select(["a", "b", "c"]).to_pylist()
    assert rows == [{"a": "12", "b": "true", "c": "2.50"}, {"a": "-3", "b": None, "c": None}]


@pytest.mark.parametrize("line", [b'{"a": 2.50}', b'{"a": {"x": 1}}', b'{"a": [1]}'])
def test_infer_types_false_leaves_other_numbers_and_nested_values_to_the_line_path(line: bytes):
    parsed = parse_json_lines(line + b"\n", FILE, "e", known=pa.schema([]), declared=False)
    strings = as_strings(parsed, pa.schema([]))
    assert strings.table is None and "schema.infer.types=false" in (strings.reason or "")


def test_infer_types_false_keeps_the_tables_columns_typed():
    known = pa.schema([pa.field("a", pa.int64())])
    parsed = parse_json_lines(b'{"a": 1, "b": 2}\n', FILE, "e", known=known, declared=False)
    strings = as_strings(parsed, known)
    assert strings.table is not None
    assert strings.table.schema.field("a").type == pa.int64() and strings.table["b"].to_pylist() == ["2"]


CSV = b"id,amount,flag\n1,2.50,true\n2,3,false\n"


def test_csv_hints_type_the_headers_columns_and_the_rest_is_inferred_or_text():
    hinted = parse_csv(
        CSV, FILE, "e", known=pa.schema([]), declared=False, new=NewColumns({"id": pa.int64()})
    )
    assert hinted.table is not None
    assert [hinted.table.schema.field(n).type for n in ("id", "amount", "flag")] == [
        pa.int64(),
        pa.float64(),
        pa.bool_(),
    ]
    text = parse_csv(
        CSV, FILE, "e", known=pa.schema([]), declared=False, new=NewColumns({"id": pa.int64()}, strings=True)
    )
    assert text.table is not None
    assert text.table.select(["id", "amount", "flag"]).to_pylist()[0] == {
        "id": 1,
        "amount": "2.50",
        "flag": "true",
    }


def test_a_csv_value_that_misses_its_hint_sends_the_file_to_the_line_path():
    none = pa.schema([])
    parsed = parse_csv(CSV, FILE, "e", known=none, declared=False, new=NewColumns({"flag": pa.int32()}))
    assert parsed.table is None and "hinted" in (parsed.reason or "")
    rounded = CSV.replace(b"2.50", b"2.555")  # from_csv rounds it half up: the line path's to give
    decimal = NewColumns({"amount": pa.decimal128(18, 2)})
    assert parse_csv(rounded, FILE, "e", known=none, declared=False, new=decimal).table is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            ["2.50", "+1", ".5", "5.", "1e2", "-0", None],
            ["2.50", "1.00", "0.50", "5.00", "100.00", "0.00", None],
        ),
        (["1,000"], None),  # Spark drops the ',' before BigDecimal reads it
        ([" 2"], None),
        (["2.555"], None),
        (["12345678901234567"], None),  # beyond DECIMAL(18,2)
        (["NaN"], None),
    ],
)
def test_csv_decimal_values_convert_as_from_csv_reads_them_or_not_at_all(text, expected):
    converted = csv_types.convert(pa.chunked_array([pa.array(text, pa.string())]), pa.decimal128(18, 2))
    got = None if converted is None else [None if v is None else str(v) for v in converted.to_pylist()]
    assert got == expected


DECIMAL = pa.schema([pa.field("amount", pa.decimal128(18, 2))])


def test_a_decimal_column_takes_the_fast_path_for_json_numbers():
    parsed = parse_json_lines(
        b'{"amount": 2.5}\n{"amount": 1E2, "n": 1}\n{"amount": null}\n',
        FILE,
        "e",
        known=DECIMAL,
        declared=False,
    )
    assert parsed.table is not None
    assert [str(v) for v in parsed.table["amount"].to_pylist()] == ["2.50", "100.00", "None"]


@pytest.mark.parametrize(
    "line",
    [
        b'{"amount": "2.5"}',  # Spark parses a string (',' dropped) by its own rules
        b'{"amount" :  "1,000"}',
        b'{"\\u0061mount": 1}',  # an escaped name may spell the column
        b'{"amount": 2.555}',  # from_json rounds it; pyarrow refuses: the line path decides
        b'{"amount": 12345678901234567890}',
    ],
)
def test_a_decimal_value_the_fast_path_cannot_match_sends_the_file_to_the_line_path(line: bytes):
    parsed = parse_json_lines(line + b"\n", FILE, "e", known=DECIMAL, declared=False)
    assert parsed.table is None and parsed.reason


HINTED = pa.schema([pa.field("n", pa.int64())])


@pytest.mark.parametrize(
    ("body", "kept"),
    [
        (b'{"id": 1}\n', "dropped"),  # no line holds it: no column, as Spark's inference gives none
        (b'{"id": 1, "n": 4}\n{"id": 2}\n', "kept"),
        (b'{"id": 1, "n": null}\n', "declined"),  # Spark infers a column of nulls: the line path's
        (b'{"id": 1, "o": {"n": 1}}\n', "declined"),  # nested: not top-level, told apart by the line path
    ],
)
def test_a_hinted_json_column_is_kept_only_where_a_line_holds_it(body: bytes, kept: str):
    parsed = without_absent(
        parse_json_lines(body, FILE, "e", known=HINTED, declared=False), HINTED.names, body
    )
    if kept == "declined":
        assert parsed.table is None and "hinted" in (parsed.reason or "")
    else:
        assert parsed.table is not None and ("n" in parsed.table.column_names) == (kept == "kept")
