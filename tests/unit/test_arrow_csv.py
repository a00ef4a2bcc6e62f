"""The CSV and text fast paths' exactness rules: a file is parsed by pyarrow only when the rows are exactly
what the line path (split lines, Spark's from_csv) would give; otherwise it is declined with a reason."""

from __future__ import annotations

import pyarrow as pa
import pytest

from s3events.ingest.files.formats.csv_fields import CsvOptions, csv_options
from s3events.ingest.files.formats.csv_format import parse_csv
from s3events.ingest.files.formats.text_format import parse_text
from tests.unit.conftest import file_ref

FILE = file_ref("in/f.csv")
NONE = pa.schema([])


def parse(data: bytes, known: pa.Schema = NONE, declared: bool = False, **options: object):
    return parse_csv(data, FILE, "e1", known=known, declared=declared, options=CsvOptions(**options))  # type: ignore[arg-type]


def test_clean_file_is_typed_as_spark_infers_with_line_numbers_after_the_header():
    parsed = parse(b'id,name,amount,ok,note\n1,"Smith, Jane",1.5,true,2026-11-22\n+2,,2,FALSE,hello\n')
    assert parsed.reason is None and parsed.table is not None and parsed.header == "id,name,amount,ok,note"
    schema = parsed.table.schema
    assert [(f.name, f.type) for f in schema][4:] == [
        ("id", pa.int32()),
        ("name", pa.string()),
        ("amount", pa.float64()),
        ("ok", pa.bool_()),
        ("note", pa.string()),  # a date-looking value, but "hello" makes it a string column
    ]
    rows = parsed.table.to_pylist()
    assert [r["_source_line"] for r in rows] == [2, 3]
    assert [(r["id"], r["name"], r["ok"]) for r in rows] == [(1, "Smith, Jane", True), (2, None, False)]


def test_bom_crlf_and_quoted_empty_fields_are_fine():
    parsed = parse(b'\xef\xbb\xbfid,name\r\n007,""\r\n')
    assert parsed.table is not None and parsed.header == "id,name"
    assert parsed.table.select(["id", "name"]).to_pylist() == [{"id": 7, "name": None}]


def test_integers_beyond_32_bits_are_bigint():
    parsed = parse(b"id\n99999999999\n")
    assert parsed.table is not None and parsed.table.schema.field("id").type == pa.int64()


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "empty"),
        (b"id\n", "no data lines"),
        (b"id,name\n1,a\n\n2,b\n", "blank lines"),
        (b"id,name\n1,a\n2\n", "pyarrow"),  # too few fields: malformed in from_csv
        (b'id,name\n1,"q""r"\n', "quotes"),  # Spark keeps the doubled quotes
        (b'id,name\n1,"open\n', "quotes"),  # Spark reads an unterminated quote to the end of the line
        (b'id,name\n1,"a\nb"\n', "quotes"),  # a quoted line end: the line path cuts the line there
        (b'id,name\n1,"a\r\nb"\n', "quotes"),
        (b'id,name\n1,x"y"\n', "quotes"),  # a quote inside an unquoted field
        (b'id,name\n"1"a,b\n', "quotes"),
        (b"id,name\n1,a\\b\n", "escape"),
        (b"id,name\n1,caf\xe9\n", "UTF-8"),
        (b"id,name\n1,a\rb\n", "carriage return"),
        (b"id,day\n1,2026-01-01\n", "inference"),  # Spark infers a date
        (b"id,v\n1,5.\n", "inference"),  # Spark infers a decimal
        (b"id,v\n1,1e5\n", "inference"),
        (b"id,v\n1,NaN\n", "inference"),
        (b"id,v\n1,true\n2,1\n", "inference"),  # Spark widens boolean + integer to string
        (b"id,id\n1,2\n", "clash"),
        (b"id,_source_line\n1,2\n", "clash"),
        (b"id, name\n1,2\n", "padded"),
        (b"id,name\n1,a\nid,name\n", "equals the header"),
    ],
)
def test_anything_the_line_path_would_treat_differently_is_declined(data, why):
    parsed = parse(data)
    assert parsed.table is None and parsed.reason is not None and why in parsed.reason


def test_table_columns_keep_their_type_by_name_and_a_misfit_is_declined():
    known = pa.schema([("id", pa.int64()), ("v", pa.string()), ("dt", pa.string())])
    parsed = parse(b"v,id,new\nx,1,7\n", known)
    assert parsed.table is not None
    assert [(f.name, f.type) for f in parsed.table.schema][4:] == [
        ("v", pa.string()),
        ("id", pa.int64()),
        ("new", pa.int32()),
    ]
    assert "convert" in (parse(b"id,v\n1.5,x\n", known).reason or "")
    assert "case" in (parse(b"ID,v\n1,x\n", known).reason or "")


def test_a_declared_schema_without_header_maps_fields_by_position():
    known = pa.schema([("id", pa.int64()), ("v", pa.string())])
    parsed = parse(b"1;x\n2;y\n", known, declared=True, header=False, delimiter=";")
    assert parsed.table is not None and parsed.header is None
    assert parsed.table.select(["_source_line", "id", "v"]).to_pylist() == [
        {"_source_line": 1, "id": 1, "v": "x"},
        {"_source_line": 2, "id": 2, "v": "y"},
    ]
    assert "fields" in (parse(b"1;x;z\n", known, declared=True, header=False, delimiter=";").reason or "")


@pytest.mark.parametrize("multi_line", [False, True])
def test_a_single_record_without_a_final_line_end_is_read(multi_line: bool) -> None:
    known = pa.schema([("id", pa.int64()), ("v", pa.string())])
    for data in (b'1,"x,y"', b'1,"x,y"\r'):
        parsed = parse(data, known, declared=True, header=False, multi_line=multi_line)
        assert parsed.table is not None, parsed.reason
        assert parsed.table.select(["id", "v"]).to_pylist() == [{"id": 1, "v": "x,y"}]


def test_quoted_fields_on_single_lines_take_the_fast_path() -> None:
    parsed = parse(b'id,name,note\r\n"1","Smith, Jane",""\r\n2,"x",y\r\n"3",z,"w"')
    assert parsed.table is not None, parsed.reason
    assert parsed.table.select(["id", "name", "note"]).to_pylist() == [
        {"id": 1, "name": "Smith, Jane", "note": None},
        {"id": 2, "name": "x", "note": "y"},
        {"id": 3, "name": "z", "note": "w"},
    ]


def test_a_header_whose_quoted_field_holds_the_delimiter_names_its_columns() -> None:
    parsed = parse(b'id,"a,b"\n1,2\n')  # two columns, not three
    assert parsed.table is not None
    assert parsed.table.select(["id", "a,b"]).to_pylist() == [{"id": 1, "a,b": 2}]


def test_reader_options_map_to_the_fast_path_or_send_the_target_to_the_line_path():
    assert csv_options({}) == CsvOptions()
    assert csv_options({"header": "false", "sep": ";", "quote": "'"}) == CsvOptions(False, ";", "'", "\\")
    assert csv_options({"nullValue": "NA"}) is None  # not reproduced: every file takes the line path
    assert csv_options({"sep": "ab"}) is None
    assert csv_options({"sep": ";", "delimiter": ","}) is None


def test_text_lines_are_split_lines_and_a_bad_line_is_an_error_row_beside_the_others():
    parsed = parse_text(b"\xef\xbb\xbfone\r\n\ntwo", FILE, "e1")
    assert parsed.table is not None
    assert parsed.table.select(["_source_line", "value"]).to_pylist() == [
        {"_source_line": 1, "value": "one"},
        {"_source_line": 2, "value": ""},
        {"_source_line": 3, "value": "two"},
    ]
    bad = parse_text(b"a\n\xff\nb\n", FILE, "e1")
    assert bad.table is not None and bad.table.column("value").to_pylist() == ["a", "b"]
    assert [(e["_source_line"], e["raw"], e["error"]) for t in bad.errors for e in t.to_pylist()] == [
        (2, "\ufffd", "line is not valid UTF-8 (invalid start byte at byte 0)")
    ]
    empty = parse_text(b"", FILE, "e1")
    assert empty.table is not None and empty.table.num_rows == 0 and not empty.errors


@pytest.mark.parametrize(
    ("data", "repeated"),
    [
        (b"id,name\n1,a\nid,name\n2,b\n", True),
        (b"id,name\r\n1,a\r\nid,name\r\n", True),
        (b"id,name\n1,a\nid,name", True),  # the last line, without its newline
        (b"id,name\n1,a\nid,name\r", True),
        (b"id,name\nid,names\n1,a\n", False),  # a line that only starts like the header
        (b"id,name\nid,name2\nid,name,x\n", False),
        (b'id,name\n1,a\n"id",name\n', True),  # the header's fields quoted: Spark keeps it, declining is safe
        (b"id,,name\n1,,a\nid,,name\n", True),  # an empty header field matches an empty (null) field
        (b"id,,name\n1,,a\nid,x,name\n", False),
    ],
)
def test_a_data_line_equal_to_the_header_is_found_wherever_it_is(data: bytes, repeated: bool) -> None:
    parsed = parse(data)
    assert ("equals the header" in (parsed.reason or "")) is repeated
