"""Which path reads a whole object never shows in the target: hypothesis writes Avro, ORC, binary and XML
objects (columns that come and go and widen between files, logical types, nulls, gzip, no rows, cut
short, not the format at all, over binary.max.bytes; XML attributes, repeated and nested elements,
values of every inferred type, entity declarations) and one batch of them read with the fast path
(`dispatch.run_batch`: the task takes what it can give exactly as Spark would, the Spark path the rest)
and with the Spark path alone (`line_path.run_line_path`, what a batch without a fast parser takes)
must give the same schema, rows and error rows.

Multi-line JSON (`reader.options=multiLine=true`: a document or a top-level array) is compared the same
way, with `json.fast.path` on and off, and so is multi-line CSV (quoted newlines, quoted quotes, a
record cut short at the end of the file, CRLF, a header with a quoted newline; `csv.fast.path` on and
off). tests/unit/test_multi_line_records.py and test_csv_multi_line.py cover the cutting."""

from __future__ import annotations

import io
import itertools
import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import from_arrow_schema

from s3events.config import load_settings
from s3events.infra import aws
from s3events.ingest.files.dispatch import run_batch
from s3events.ingest.files.line_parse import arrow_schema
from s3events.ingest.files.line_path import run_line_path
from s3events.ingest.files.lineage import INGESTED_AT as INGESTED_AT_COLUMN
from s3events.ingest.files.lineage import LINEAGE_FIELDS, TIMESTAMP
from s3events.ingest.model import Batch, Checkpoint
from s3events.ingest.target import TargetSpec, target_specs
from tests.integration.test_dispatch import (
    _CSV_FIELD,
    _NAMES,
    _SETTINGS,
    INGESTED_AT,
    _bucket,
    _encode,
    _errors,
    _json_value,
    _put,
    _rows,
)
from tests.integration.test_dispatch import _both_paths as json_both_paths

pytestmark = pytest.mark.integration

_RUNS = itertools.count()
_BINARY_MAX = 600  # binary.max.bytes: some drawn objects are over it

# -- Avro: a pool of fields, each file draws some of them, in its own order ---------------------------

_DECIMAL = {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}
_AVRO_FIELDS: dict[str, list[tuple[Any, st.SearchStrategy[Any]]]] = {
    # name -> the types a file may give it (widening between files: int/long, float/double), with values
    "id": [("long", st.integers(-(2**63), 2**63 - 1)), ("int", st.integers(-(2**31), 2**31 - 1))],
    "amount": [
        ("double", st.floats(allow_nan=False, allow_infinity=False)),
        ("float", st.floats(allow_nan=False, allow_infinity=False, width=32)),
    ],
    "name": [("string", st.text(max_size=5)), (["null", "string"], st.none() | st.text(max_size=5))],
    "ok": [(["null", "boolean"], st.none() | st.booleans())],
    "price": [(_DECIMAL, st.decimals(min_value=-(10**7), max_value=10**7, places=2, allow_nan=False))],
    "day": [({"type": "int", "logicalType": "date"}, st.dates(date(1900, 1, 1), date(2200, 1, 1)))],
    "at": [
        (
            {"type": "long", "logicalType": "timestamp-micros"},
            st.datetimes(datetime(1970, 1, 1), datetime(2200, 1, 1), timezones=st.just(UTC)),
        )
    ],
    "tags": [({"type": "array", "items": "string"}, st.lists(st.text(max_size=3), max_size=2))],
    "color": [
        ({"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}, st.sampled_from(["RED", "GREEN"]))
    ],
}


@st.composite
def avro_file(draw: st.DrawFn) -> bytes:
    names = draw(st.lists(st.sampled_from(sorted(_AVRO_FIELDS)), min_size=1, max_size=4, unique=True))
    chosen = [(n, *draw(st.sampled_from(_AVRO_FIELDS[n]))) for n in names]
    schema = {"type": "record", "name": "Row", "fields": [{"name": n, "type": t} for n, t, _ in chosen]}
    rows = draw(
        st.lists(st.fixed_dictionaries({n: values for n, _, values in chosen}), min_size=1, max_size=4)
    )
    sink = io.BytesIO()
    fastavro.writer(
        sink, fastavro.parse_schema(schema), rows, codec=draw(st.sampled_from(["null", "deflate"]))
    )
    return _spoiled(draw, sink.getvalue())


# -- ORC: a pool of columns as Arrow types ------------------------------------------------------------

_ORC_COLUMNS: dict[str, list[tuple[pa.DataType, st.SearchStrategy[Any]]]] = {
    "id": [(pa.int64(), st.integers(-(2**63), 2**63 - 1)), (pa.int32(), st.integers(-(2**31), 2**31 - 1))],
    "amount": [(pa.float64(), st.floats(allow_nan=False, allow_infinity=False))],
    "name": [(pa.string(), st.none() | st.text(max_size=5))],
    "ok": [(pa.bool_(), st.none() | st.booleans())],
    "price": [
        (pa.decimal128(9, 2), st.decimals(min_value=-(10**6), max_value=10**6, places=2, allow_nan=False))
    ],
    "day": [(pa.date32(), st.none() | st.dates(date(1900, 1, 1), date(2200, 1, 1)))],
    "tags": [(pa.list_(pa.string()), st.lists(st.text(max_size=3), max_size=2))],
}


@st.composite
def orc_file(draw: st.DrawFn) -> bytes:
    names = draw(st.lists(st.sampled_from(sorted(_ORC_COLUMNS)), min_size=1, max_size=4, unique=True))
    chosen = [(n, *draw(st.sampled_from(_ORC_COLUMNS[n]))) for n in names]
    count = draw(st.integers(1, 4))
    table = pa.table(
        {n: pa.array(draw(st.lists(values, min_size=count, max_size=count)), t) for n, t, values in chosen}
    )
    sink = io.BytesIO()
    orc.write_table(table, sink)
    return _spoiled(draw, sink.getvalue())


def _spoiled(draw: st.DrawFn, data: bytes) -> bytes:
    """The file as written, mostly; else cut short, emptied, or bytes of another format."""
    kind = draw(st.sampled_from(["whole"] * 6 + ["cut", "empty", "garbage"]))
    if kind == "cut":
        return data[: draw(st.integers(0, max(len(data) - 1, 0)))]
    if kind == "empty":
        return b""
    if kind == "garbage":
        return draw(st.sampled_from([b'{"id": 1}\n', b"PAR1\x00\x00PAR1", b"Obj\x01\xff\xff", b"ORC"]))
    return data


# -- XML: <row> records of drifting children, attributes and values ---------------------------------------

_XML_TEXT = st.one_of(
    st.integers(-(2**40), 2**40).map(str),
    st.sampled_from(
        ["1.5", "-0.25", "1e3", "true", "False", "2026-11-22", "2026-11-22T10:00:00Z", " 7 ", ""]
    ),
    st.text(alphabet=st.sampled_from([*"ab é&<"]), max_size=4).map(
        lambda t: t.replace("&", "&amp;").replace("<", "&lt;")
    ),
)
_XML_NAMES = st.sampled_from(["id", "name", "amount", "tag"])
# Mostly values of the table's types (so files take the fast path), sometimes any (declines, error rows)
_XML_VALUES = {
    "id": st.integers(-(2**40), 2**40).map(str),
    "name": st.text(alphabet=st.sampled_from([*"ab é"]), min_size=1, max_size=4),
    "amount": st.sampled_from(["1.5", "-0.25", "1e3", "3.0"]),
}


def _xml_text(name: str) -> st.SearchStrategy[str]:
    return st.one_of(*[_XML_VALUES.get(name, _XML_TEXT)] * 4, _XML_TEXT)


@st.composite
def _xml_element(draw: st.DrawFn, name: str, depth: int = 0) -> str:
    attrs = draw(st.dictionaries(st.sampled_from(["lang", "n"]), _XML_TEXT, max_size=1 if depth else 0))
    opening = name + "".join(f' {k}="{v}"' for k, v in attrs.items())
    kinds = ["text"] * 4 + (["empty", "nested"] if name == "tag" else ["empty"])
    kind = draw(st.sampled_from(kinds if depth == 0 else ["text", "empty"]))
    if kind == "empty":
        return f"<{opening}/>"
    if kind == "nested":
        inner = draw(
            st.lists(_XML_NAMES.flatmap(lambda n: _xml_element(n, depth + 1)), min_size=1, max_size=2)
        )
        return f"<{opening}>{''.join(inner)}</{opening.split()[0]}>"
    return f"<{opening}>{draw(_xml_text(name))}</{name}>"


@st.composite
def xml_file(draw: st.DrawFn) -> bytes:
    records = []
    for _ in range(draw(st.integers(0, 4))):
        names = draw(st.lists(_XML_NAMES, unique=True, max_size=3)) + ["tag"] * draw(st.integers(0, 2))
        children = [draw(_xml_element(n)) for n in names]  # a repeated name: an array
        attrs = draw(st.sampled_from(["", ' id="7"', ' kind="x"']))
        records.append(f"<row{attrs}>{''.join(children)}</row>")
    text = "<rows>" + "\n".join(records) + "</rows>\n"
    kind = draw(st.sampled_from(["whole"] * 6 + ["cut", "entity", "garbage"]))
    if kind == "cut":
        text = text[: draw(st.integers(0, max(len(text) - 1, 0)))]
    elif kind == "entity":
        text = '<?xml version="1.0"?><!DOCTYPE rows [<!ENTITY e "boom">]>' + text.replace(
            "</rows>", "&e;</rows>"
        )
    elif kind == "garbage":
        text = draw(st.sampled_from(['{"id": 1}\n', "<rows><row></rows>", "\u00ff not xml"]))
    return text.encode()


# -- one batch, read both ways -----------------------------------------------------------------------------


def _target(fmt: str, path: Path) -> TargetSpec:
    conf = [
        "s3events.ingest.targets=t",
        f"s3events.ingest.target.t.path={path}",
        f"s3events.ingest.target.t.format={fmt}",
        f"s3events.ingest.target.t.binary.max.bytes={_BINARY_MAX}",
        *(["s3events.ingest.target.t.reader.options=rowTag=row"] if fmt == "xml" else []),
    ]
    [spec] = target_specs(load_settings(None, conf))
    return spec


# A table's columns as a first batch of every field of the pool would leave them (the widest types):
# with a table, each file takes the fast path on its own and the Spark path reads only what it declines.
_TABLES = {
    "avro": {
        "id": pa.int64(),
        "amount": pa.float64(),
        "name": pa.string(),
        "ok": pa.bool_(),
        "price": pa.decimal128(10, 2),
        "day": pa.date32(),
        "at": pa.timestamp("us", tz="UTC"),
        "tags": pa.list_(pa.string()),
        "color": pa.string(),
    },
    "orc": {
        "id": pa.int64(),
        "amount": pa.float64(),
        "name": pa.string(),
        "ok": pa.bool_(),
        "price": pa.decimal128(9, 2),
        "day": pa.date32(),
        "tags": pa.list_(pa.string()),
    },
    "binary": {"content": pa.binary(), "size": pa.int64()},
    "xml": {"id": pa.int64(), "name": pa.string(), "amount": pa.float64(), "_id": pa.int64()},
}


def _table_schema(fmt: str) -> pa.Schema:
    data = [pa.field(n, t) for n, t in _TABLES[fmt].items()]
    spark_types = pa.schema([*LINEAGE_FIELDS, *data, pa.field(INGESTED_AT_COLUMN, TIMESTAMP)])
    return arrow_schema(from_arrow_schema(spark_types))  # as dispatch.run_batch hands it on


def _both_paths(
    spark: Any,
    s3: Any,
    aws_options: aws.AwsOptions,
    root: Path,
    fmt: str,
    bodies: list[bytes],
    table: bool,
) -> None:
    run, bucket = next(_RUNS), _bucket(s3)
    refs = _put(s3, bucket, f"{fmt}/{run}", bodies, f".{fmt}")  # every other one gzipped (.gz)
    existing = _table_schema(fmt) if table else None
    fast_path, spark_path = root / f"{run}-fast", root / f"{run}-spark"
    fast = run_batch(
        spark,
        Batch(refs, (), Checkpoint(-1), Checkpoint(0)),
        _target(fmt, fast_path),
        existing_schema=existing,
        aws=aws_options,
        ingested_at=INGESTED_AT,
    )
    if fast.fast_path_files == 0:  # the fast path declined every file: run_batch took the line path alone
        return
    alone = run_line_path(spark, refs, _target(fmt, spark_path), existing, aws_options, INGESTED_AT)
    assert sorted(fast.schema, key=lambda f: f.name) == sorted(alone.schema, key=lambda f: f.name)
    assert _rows(fast, fast_path) == _rows(alone, spark_path)
    assert _errors(fast) == _errors(alone)
    assert fast.failed_files == alone.failed_files


@settings(_SETTINGS, max_examples=4)
@given(bodies=st.lists(avro_file(), min_size=2, max_size=4), table=st.booleans())
def test_avro_files_give_the_same_rows_and_error_rows_on_either_path(
    s3, aws_options, spark, tmp_path, bodies, table
):
    _both_paths(spark, s3, aws_options, tmp_path, "avro", bodies, table)


@settings(_SETTINGS, max_examples=4)
@given(bodies=st.lists(orc_file(), min_size=2, max_size=4), table=st.booleans())
def test_orc_files_give_the_same_rows_and_error_rows_on_either_path(
    s3, aws_options, spark, tmp_path, bodies, table
):
    _both_paths(spark, s3, aws_options, tmp_path, "orc", bodies, table)


@settings(_SETTINGS, max_examples=3)
@given(bodies=st.lists(st.binary(max_size=_BINARY_MAX + 200), min_size=2, max_size=5), table=st.booleans())
def test_binary_objects_give_the_same_rows_and_error_rows_on_either_path(
    s3, aws_options, spark, tmp_path, bodies, table
):
    _both_paths(spark, s3, aws_options, tmp_path, "binary", bodies, table)


_XML_READ_FAST = [  # into a table: the first two files take the fast path, the others the Spark path
    b'<rows><row id="1"><name>a</name><amount>1.5</amount></row><row><id>2</id><name> b </name></row></rows>',
    b"<rows><row><id>3</id><amount>2</amount></row><row><id>4</id><name>z</name></row></rows>",
    b"<rows><row><id>5</id><name/><name>a</name></row></rows>",  # [null, "a"]: pyarrow 26 builds it wrong
    b"<rows><row><id>6</id></row><row><id>x</id></rows>",  # not well-formed: one error row
]


@settings(_SETTINGS, max_examples=3)
@example(bodies=_XML_READ_FAST, table=True)
@given(bodies=st.lists(xml_file(), min_size=2, max_size=4), table=st.booleans())
def test_xml_files_give_the_same_rows_and_error_rows_on_either_path(
    s3, aws_options, spark, tmp_path, bodies, table
):
    _both_paths(spark, s3, aws_options, tmp_path, "xml", bodies, table)


def test_a_json_list_pyarrow_reads_wrong_is_read_by_the_line_path_not_a_failed_batch(
    s3, aws_options, spark, tmp_path
):
    # pyarrow 26's JSON reader builds `[null, "a"]` as an invalid array: the task declines the file
    bodies = [b'{"id": 1, "tags": [null, "a"]}\n', b'{"id": 2, "tags": ["b"]}\n']
    json_both_paths(spark, s3, aws_options, tmp_path, "json", bodies)


# -- multi-line JSON: documents and top-level arrays ---------------------------------------------------------


@st.composite
def json_document(draw: st.DrawFn) -> bytes:
    objects = st.dictionaries(_NAMES, _json_value(), max_size=4)
    kind = draw(st.sampled_from(["array", "array", "array", "document", "scalars", "broken"]))
    if kind == "broken":
        return draw(st.sampled_from([b'[\n  {"id": 1},\n  {"id": 2', b'{"id": 1} {"id": 2}', b"[1,]", b""]))
    value = {
        "array": st.lists(objects, max_size=4),
        "document": objects,
        "scalars": st.lists(st.integers(0, 9), min_size=1, max_size=2),
    }[kind]
    indent = draw(st.sampled_from([None, 2, "\t"]))
    return json.dumps(draw(value), indent=indent, ensure_ascii=draw(st.booleans())).encode()


@settings(_SETTINGS, max_examples=4)
@example(bodies=[b'[\n {"id": 1, "v": "a\\nb"},\n {"id": 2}\n]', b'{\n "id": 3,\n "w": {"x": [1, 2]}\n}'])
@given(bodies=st.lists(json_document(), min_size=1, max_size=3))
def test_multi_line_json_gives_the_same_rows_and_error_rows_on_either_path(
    s3, aws_options, spark, tmp_path, bodies
):
    json_both_paths(
        spark, s3, aws_options, tmp_path, "json", bodies, extra={"reader.options": "multiLine=true"}
    )


# -- multi-line CSV: quoted newlines ---------------------------------------------------------------------

_MULTI_LINE_FIELD = st.one_of(
    _CSV_FIELD,
    st.sampled_from(
        ['"a\nb"', '"\n"', '"x\n\n y "', '"say ""hi""\nthere"', '"1\n2"', '"a,\nb"', '"\ttab\n"']
    ),
)
_MULTI_LINE = {"reader.options": "multiLine=true"}


@st.composite
def multi_line_csv_file(draw: st.DrawFn, header: list[str]) -> bytes:
    head = ",".join(header) if draw(st.integers(0, 5)) else 'id,"na\nme"'  # a header with a quoted newline
    records = [head]
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["row"] * 5 + ["blank", "short"]))
        if kind == "blank":
            records.append("")
        else:
            n = len(header) - (kind == "short")
            records.append(
                ",".join(draw(st.lists(_MULTI_LINE_FIELD, min_size=max(n, 1), max_size=max(n, 1))))
            )
    text = "\n".join(records) + draw(st.sampled_from(["\n", ""]))
    if draw(st.integers(0, 5)) == 0:
        text += '1,"a record cut short\nat the end'
    return _encode(draw, text)  # as written, with a byte order mark, or with CRLF line ends


@st.composite
def multi_line_csv_files(draw: st.DrawFn) -> list[bytes]:
    headers = st.sampled_from([["id", "name"], ["id", "name", "amount"], ["name", "id"]])
    first = draw(headers)
    same = draw(st.booleans())
    return [
        draw(multi_line_csv_file(first if same else draw(headers))) for _ in range(draw(st.integers(1, 3)))
    ]


@settings(_SETTINGS, max_examples=4)
@example(bodies=[b'id,name\n1,"a\nb"\n', b'id,name\r\n2,"say ""hi""\r\nthere"\r\n3,"x\r\n\r\ny"'])
@example(bodies=[b'id,"na\nme"\n1,"a\nb"\n', b'id,name\n2,"open\n3,x\n'])
@given(bodies=multi_line_csv_files())
def test_multi_line_csv_gives_the_same_rows_and_error_rows_on_either_path(
    s3, aws_options, spark, tmp_path, bodies
):
    json_both_paths(spark, s3, aws_options, tmp_path, "csv", bodies, extra=_MULTI_LINE)


def test_a_csv_export_with_quoted_newlines_takes_the_fast_path_with_the_line_paths_rows(
    s3, aws_options, spark, tmp_path
):
    bodies = [
        b'id,note,amount\n1,"first\nsecond",1.5\n2,plain,2\n3,"a, b\n\nc",\n',
        b'id,note,amount\r\n4,"x\r\ny",-0.5\r\n5,"",3\r\n',  # CRLF, inside quotes too
        b'\xef\xbb\xbfid,note,amount\n6,"tail\n",7',  # a byte order mark, no final newline
    ]
    fast = json_both_paths(spark, s3, aws_options, tmp_path, "csv", bodies, extra=_MULTI_LINE)
    assert fast.fast_path_files == len(bodies)
