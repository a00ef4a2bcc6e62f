"""The JSON fast path's exactness rules: a file is parsed by pyarrow only when the rows are exactly what
the line path would give; otherwise it is declined with a reason (and the line path takes it)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from s3events.ingest.files.fast_path import table_schema
from s3events.ingest.files.formats.json_format import fast_path_supports, parse_json_lines
from tests.unit.conftest import file_ref

FILE = file_ref("in/dt=2026-11-22/f.json")
NONE = pa.schema([])


def parse(data: bytes, known: pa.Schema = NONE, declared: bool = False):
    return parse_json_lines(data, FILE, "e1", known=known, declared=declared)


def test_clean_file_gets_lineage_and_line_numbers():
    parsed = parse(b'{"id": 1}\n{"id": 2}\n{"id": 3}')
    assert parsed.reason is None and parsed.table is not None
    rows = parsed.table.to_pylist()
    assert [r["_source_line"] for r in rows] == [1, 2, 3]
    assert {r["_source_file"] for r in rows} == {"s3://b/in/dt=2026-11-22/f.json"}
    assert {r["_source_etag"] for r in rows} == {"e1"}
    assert [r["id"] for r in rows] == [1, 2, 3]


def test_inferred_types_follow_spark_inference():
    parsed = parse(
        b'{"z": 1, "ts": "2026-11-22T10:00:00Z", "day": "2026-11-22", "none": null, "empty": [],'
        b' "s": {"y": 1, "x": "a"}, "mixed": 1}\n{"z": 2, "mixed": 2.5}\n'
    )
    assert parsed.table is not None
    schema = parsed.table.schema
    assert schema.names[4:] == ["day", "empty", "mixed", "none", "s", "ts", "z"]  # sorted, after lineage
    assert schema.field("ts").type == pa.string() and schema.field("day").type == pa.string()
    assert parsed.table["ts"].to_pylist() == ["2026-11-22T10:00:00Z", None]  # the text, not a timestamp
    assert schema.field("empty").type == pa.list_(pa.string())
    assert schema.field("s").type == pa.struct([("x", pa.string()), ("y", pa.int64())])
    assert schema.field("mixed").type == pa.float64()
    assert schema.field("none").type == pa.null()  # typed later, by the table


def test_later_files_of_a_task_reuse_type_corrections_and_drop_those_that_do_not_fit():
    hints: dict[str, pa.DataType] = {}
    first = parse_json_lines(
        b'{"ts": "2026-11-22T10:00:00Z"}\n', FILE, "e", known=NONE, declared=False, hints=hints
    )
    assert first.table is not None and hints == {"ts": pa.string()}
    again = parse_json_lines(
        b'{"ts": "2026-11-23T10:00:00Z"}\n', FILE, "e", known=NONE, declared=False, hints=hints
    )
    assert again.table is not None and again.table["ts"].to_pylist() == ["2026-11-23T10:00:00Z"]
    other = parse_json_lines(b'{"ts": 5}\n', FILE, "e", known=NONE, declared=False, hints=hints)
    assert other.table is not None and other.table.schema.field("ts").type == pa.int64()


def test_a_leading_byte_order_mark_and_crlf_line_ends_are_fine():
    parsed = parse(b'\xef\xbb\xbf{"id": 1}\r\n{"id": 2}\r\n')
    assert parsed.table is not None and parsed.table["id"].to_pylist() == [1, 2]
    assert parsed.table["_source_line"].to_pylist() == [1, 2]


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'{"a": 1}\n\n{"a": 2}\n', "blank lines"),
        (b'{"a": 1}\n  \r\n{"a": 2}\n', "blank lines"),
        (b'\n{"a": 1}\n', "blank lines"),
        (b'{"a": 1} {"a": 2}\n', "records on"),
        (b'{"a": "\xff"}\n', "UTF-8"),
        (b'{"a": 12345678901234567890}\n', "64 bits"),
        (b'{"a": 1.5}\n{"a": 12345678901234567890}\n', "64 bits"),
        (b'{"s": {"a": 12345678901234567890}}\n', "64 bits"),
        (b'{"l": [1.5, 12345678901234567890]}\n', "64 bits"),
        (b'{"a": 1}\n{"a": "x"}\n', "pyarrow"),
        (b"[1, 2]\n", "pyarrow"),
        (b'{"a": 1, "a": 2}\n', "pyarrow"),
        (b'{"a": {}}\n', "would not give"),
        (b'{"a": 1}\n{"a": 2\n', "pyarrow"),
        (b'{"_source_file": "x"}\n', "clash"),
        (b'{"Id": 1, "id": 2}\n', "clash"),
        (b"", "empty"),
    ],
)
def test_anything_the_line_path_would_treat_differently_is_declined(data, why):
    parsed = parse(data)
    assert parsed.table is None
    assert why in (parsed.reason or "")


def test_long_integers_that_fit_in_64_bits_stay_exact():
    parsed = parse(b'{"a": 9223372036854775807, "b": 1234567890123456789}\n')
    assert parsed.table is not None
    assert parsed.table.to_pylist()[0]["a"] == 9223372036854775807


def test_known_columns_keep_their_type_and_a_misfit_is_declined():
    known = pa.schema([("id", pa.int64()), ("note", pa.string())])
    parsed = parse(b'{"id": 1, "extra": true}\n', known)
    assert parsed.table is not None
    assert parsed.table.schema.names[4:] == ["id", "note", "extra"]
    assert parsed.table["note"].to_pylist() == [None]
    assert parse(b'{"id": 1.5}\n', known).table is None
    assert parse(b'{"id": 1, "note": 7}\n', known).table is None


def test_a_declared_schema_ignores_other_fields():
    declared = pa.schema([("id", pa.int64())])
    parsed = parse(b'{"id": 1, "other": "x"}\n', declared, declared=True)
    assert parsed.table is not None and parsed.table.schema.names[4:] == ["id"]


def test_only_types_that_parse_alike_in_pyarrow_and_spark_allow_the_fast_path():
    nested = pa.list_(pa.struct([("c", pa.string())]))
    assert fast_path_supports(pa.schema([("a", pa.int64()), ("b", nested)]))
    assert not fast_path_supports(pa.schema([("t", pa.timestamp("us", tz="UTC"))]))
    assert fast_path_supports(pa.schema([("d", pa.decimal128(10, 2))]))  # for JSON numbers: decimal_strings
    assert not fast_path_supports(pa.schema([("s", pa.struct([("d", pa.decimal128(10, 2))]))]))


LINEAGE = [
    pa.field("_source_file", pa.string()),
    pa.field("_source_etag", pa.string()),
    pa.field("_source_line", pa.int64()),
    pa.field("_event_time", pa.timestamp("us", tz="UTC")),
]
INGESTED = pa.field("_ingested_at", pa.timestamp("us", tz="UTC"))


def testtable_schema_of_a_new_table_orders_columns_as_the_line_path_does():
    written = [
        pa.schema([*LINEAGE, ("b", pa.int64()), ("none", pa.null()), ("dt", pa.string()), INGESTED]),
        pa.schema([*LINEAGE, ("a", pa.string()), ("dt", pa.string()), INGESTED]),
    ]
    schema = table_schema(None, NONE, written, ("dt",))
    assert schema is not None
    assert schema.names == [*(f.name for f in LINEAGE), "a", "b", "none", "dt", "_ingested_at"]
    assert schema.field("none").type == pa.string()  # all-null everywhere: string, like Spark


def testtable_schema_keeps_existing_order_and_appends_new_columns():
    existing = pa.schema([*LINEAGE, ("id", pa.int64()), INGESTED])
    written = [pa.schema([*LINEAGE, ("id", pa.int64()), ("new", pa.float64()), INGESTED])]
    schema = table_schema(existing, pa.schema([("id", pa.int64())]), written, ())
    assert schema is not None and schema.names == [*existing.names, "new"]


def testtable_schema_refuses_types_that_differ_between_tasks():
    written = [
        pa.schema([*LINEAGE, ("x", pa.int64()), INGESTED]),
        pa.schema([*LINEAGE, ("x", pa.float64()), INGESTED]),
    ]
    assert table_schema(None, NONE, written, ()) is None
