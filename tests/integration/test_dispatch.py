"""Which path reads a file never shows in the target: hypothesis writes JSON-lines and CSV files (types
drifting between lines, quotes, unicode, empty fields, blank lines, headers repeated, lines that do not
parse) and one batch of them read with the fast path allowed (`dispatch.run_batch`: each format's parser
takes what it can read exactly, the line path the rest) and with it turned off (the line path alone)
must give the same schema, the same rows and the same error rows."""

from __future__ import annotations

import contextlib
import gzip
import itertools
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from s3events.config import load_settings
from s3events.infra import aws
from s3events.ingest.files.dispatch import run_batch
from s3events.ingest.files.lineage import INGESTED_AT as INGESTED_AT_COLUMN
from s3events.ingest.files.lineage import LINEAGE_FIELDS, TIMESTAMP
from s3events.ingest.files.merge_input import conform
from s3events.ingest.files.read_output import ReadOutput
from s3events.ingest.model import Batch, Checkpoint, FileRef
from s3events.ingest.target import TargetSpec, target_specs

pytestmark = pytest.mark.integration

INGESTED_AT = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
_RUNS = itertools.count()
BUCKET = "dispatch-both-paths"

# -- values that drift between types from line to line ----------------------------------------------------

_TEXT = st.text(
    alphabet=st.sampled_from([*"ab ,\"'\\;\t", "é", "€", "日", "\U0001f600", "\u00a0"]), max_size=6
)
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.sampled_from([0, -1, 2**63 - 1, 2**63, 10**20]),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    _TEXT,
    st.sampled_from(["2026-11-22", "2026-11-22T10:00:00Z", "true", "12", "1e5", "NaN", ""]),
)
# Names that differ only in case have a test of their own below (`_CASED_LINE`).
_NAMES = st.sampled_from(["id", "name", "amount", "note"])


def _json_value() -> st.SearchStrategy[Any]:
    return st.one_of(_SCALAR, st.lists(_SCALAR, max_size=2), st.dictionaries(_NAMES, _SCALAR, max_size=2))


_JSON_LINE = st.one_of(
    st.dictionaries(_NAMES, _json_value(), max_size=4).map(lambda d: json.dumps(d, ensure_ascii=False)),
    st.dictionaries(_NAMES, _SCALAR, max_size=3).map(lambda d: json.dumps(d)),
    st.sampled_from(["", "   ", '{"id": ', "not json", "[1, 2]", '{"id": 1} {"id": 2}', '"text"']),
)


def _csv_field(value: Any) -> str:
    text = "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return text


_CSV_FIELD = st.one_of(
    _SCALAR.map(_csv_field),
    _TEXT.map(lambda t: '"' + t.replace('"', "") + '"'),
    st.sampled_from(["", "+1", "007", "-0.5", "5.", "TRUE", "x,y", '"a,b"', "2026-11-22"]),
)


def _csv_line(draw: st.DrawFn, header: list[str], kind: str) -> str:
    if kind == "blank":
        return draw(st.sampled_from(["", "  "]))
    if kind == "header":
        return ",".join(header)
    n = max(len(header) + {"row": 0, "short": -1, "long": 1}[kind], 1)
    return ",".join(draw(st.lists(_CSV_FIELD, min_size=n, max_size=n)))


def _csv_lines(draw: st.DrawFn, header: list[str]) -> list[str]:
    kinds = st.sampled_from(["row", "row", "row", "row", "blank", "header", "short", "long"])
    return [",".join(header), *(_csv_line(draw, header, draw(kinds)) for _ in range(draw(st.integers(0, 6))))]


@st.composite
def _csv_file(draw: st.DrawFn, header: list[str]) -> str:
    return "\n".join(_csv_lines(draw, header)) + draw(st.sampled_from(["\n", "", "\r\n"]))


@st.composite
def json_files(draw: st.DrawFn) -> list[bytes]:
    return [
        _encode(draw, "\n".join(draw(st.lists(_JSON_LINE, min_size=0, max_size=8))) + "\n")
        for _ in range(draw(st.integers(1, 3)))
    ]


@st.composite
def csv_files(draw: st.DrawFn) -> list[bytes]:
    headers = st.sampled_from([["id", "name"], ["id", "name", "amount"], ["name", "id"]])
    first = draw(headers)
    same = draw(st.booleans())  # else each file draws its own header (the batch then takes the line path)
    return [
        _encode(draw, draw(_csv_file(first if same else draw(headers))))
        for _ in range(draw(st.integers(1, 3)))
    ]


def _encode(draw: st.DrawFn, text: str) -> bytes:
    data = text.encode()
    return draw(st.sampled_from([data, b"\xef\xbb\xbf" + data, data.replace(b"\n", b"\r\n")]))


# -- batches of clean and dirty files --------------------------------------------------------------------
# In a file drawn above nearly every line is one the fast path must decline (a bad line, a type drifting
# within a file), and a declined file in a first CSV batch sends the whole batch to the line path: such
# batches compare the line path with itself. A batch below holds clean files (each column one kind of
# value in every file, so the fast path must read them) among dirty ones (each holding a line the fast
# path must decline), as a table's first batch or against a table holding the columns; the tests check
# that the clean files were read on the fast path, so that each example compares the two paths.


@dataclass(frozen=True)
class DrawnBatch:
    bodies: list[bytes]
    clean: int  # how many of `bodies` the fast path must read
    existing: pa.Schema | None  # the table's schema; None: the table's first batch


def _table(columns: list[pa.Field]) -> pa.Schema:
    return pa.schema([*LINEAGE_FIELDS, *columns, pa.field(INGESTED_AT_COLUMN, TIMESTAMP)])


_JSON_KINDS: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "integer": (pa.int64(), st.integers(-(2**40), 2**40) | st.sampled_from([0, -1, 2**63 - 1])),
    "double": (pa.float64(), st.floats(-(2.0**40), 2.0**40, width=32)),  # `1.0`: a double, as JSON writes it
    "boolean": (pa.bool_(), st.booleans()),
    "string": (pa.string(), _TEXT | st.sampled_from(["2026-11-22", "2026-11-22T10:00:00Z", "12", "NaN"])),
    "array": (pa.list_(pa.int64()), st.lists(st.integers(-9, 9), min_size=1, max_size=2)),
    "object": (
        pa.struct([("id", pa.int64()), ("name", pa.string())]),
        st.fixed_dictionaries({"id": st.integers(0, 9), "name": _TEXT}),
    ),
}
# Lines the fast path must decline wherever they stand.
_BAD_JSON_LINE = st.sampled_from(['{"id": ', "not json", "[1, 2]", '{"id": 1} {"id": 2}', '"text"'])


@st.composite
def json_batches(draw: st.DrawFn) -> DrawnBatch:
    """One dirty file among clean ones against a table holding every column; otherwise (a first batch,
    or a table holding some) all clean or all dirty: a dirty file's drifting values would often type a
    new column otherwise than the clean files, which sends the whole batch to the line path
    (test_json_new_column_is_typed_from_the_fast_and_the_declined_files holds both outcomes)."""
    kinds = {name: draw(st.sampled_from(sorted(_JSON_KINDS))) for name in ["id", "name", "amount", "note"]}
    table = draw(st.sampled_from(["every column", "first batch", "some columns"]))
    held = sorted(kinds) if table == "every column" else None
    if table == "some columns":
        held = draw(st.lists(st.sampled_from(sorted(kinds)), unique=True, max_size=3))
    values = {n: st.none() | _JSON_KINDS[k][1] for n, k in kinds.items()}
    clean_line = st.fixed_dictionaries({}, optional=values).map(lambda d: json.dumps(d, ensure_ascii=False))
    mixed = table == "every column"
    count, all_clean = draw(st.integers(1, 3)), draw(st.sampled_from([True, True, False]))
    dirty = draw(st.integers(0, count - 1)) if mixed and count > 1 else None  # one among clean files
    bodies, clean = [], 0
    for i in range(count):
        if i != dirty if dirty is not None else all_clean:
            lines, clean = draw(st.lists(clean_line, min_size=1, max_size=6)), clean + 1
        else:
            lines = draw(st.lists(_JSON_LINE, max_size=6))
            lines.insert(draw(st.integers(0, len(lines))), draw(_BAD_JSON_LINE))
        bodies.append(_encode(draw, "\n".join(lines) + "\n"))
    existing = None if held is None else _table([pa.field(n, _JSON_KINDS[kinds[n]][0]) for n in held])
    return DrawnBatch(bodies, clean, existing)


def _csv_text(t: str) -> str:
    plain = "a" + t.replace('"', "").replace("\\", "")  # a plain string: Spark's inference says string
    return f'"{plain}"' if "," in plain else plain


_CSV_KINDS: dict[str, tuple[pa.DataType, st.SearchStrategy[str]]] = {
    "integer": (pa.int32(), st.integers(-(2**31), 2**31 - 1).map(str) | st.sampled_from(["+1", "007", "-0"])),
    "bigint": (pa.int64(), st.integers(2**31, 2**62).map(str)),
    "double": (
        pa.float64(),
        st.tuples(st.integers(-999, 999), st.integers(0, 99)).map("{0[0]}.{0[1]}".format),
    ),
    "boolean": (pa.bool_(), st.sampled_from(["true", "false", "TRUE", "False"])),
    "string": (pa.string(), _TEXT.map(_csv_text)),
}


@st.composite
def csv_batches(draw: st.DrawFn) -> DrawnBatch:
    """One header for every file (files whose headers differ take the line path whole)."""
    kinds = {name: draw(st.sampled_from(sorted(_CSV_KINDS))) for name in ["id", "name", "amount"]}
    header = draw(st.sampled_from([["id", "name"], ["id", "name", "amount"], ["name", "id"]]))
    row = st.tuples(*(st.just("") | _CSV_KINDS[kinds[n]][1] for n in header)).map(",".join)
    bodies, clean = [], 0
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.sampled_from([True, True, False])):
            lines, clean = [",".join(header), *draw(st.lists(row, min_size=1, max_size=6))], clean + 1
        else:  # a line the fast path must decline: the header again, too few or too many fields
            lines = _csv_lines(draw, header)
            bad = draw(st.sampled_from(["header", "short", "long"]))
            lines.insert(draw(st.integers(1, len(lines))), _csv_line(draw, header, bad))
        bodies.append(_encode(draw, "\n".join(lines) + draw(st.sampled_from(["\n", ""]))))
    table = draw(st.sampled_from(["every column", "first batch"]))
    existing = (
        _table([pa.field(n, _CSV_KINDS[k][0]) for n, k in kinds.items()]) if table != "first batch" else None
    )
    return DrawnBatch(bodies, clean, existing)


# -- one batch, read both ways ----------------------------------------------------------------------------


_SWITCHED = ("json", "csv")  # formats with a `<format>.fast.path` key (text and Parquet have one path)


def _target(fmt: str, path: Path, *, fast: bool, extra: dict[str, str] | None = None) -> TargetSpec:
    conf = [
        "s3events.ingest.targets=t",
        f"s3events.ingest.target.t.path={path}",
        f"s3events.ingest.target.t.format={fmt}",
        *([f"s3events.ingest.target.t.{fmt}.fast.path={str(fast).lower()}"] if fmt in _SWITCHED else []),
        *(f"s3events.ingest.target.t.{k}={v}" for k, v in (extra or {}).items()),
    ]
    [spec] = target_specs(load_settings(None, conf))
    return spec


def _put(
    s3: Any, bucket: str, prefix: str, bodies: list[bytes], suffix: str, folders: list[str] | None = None
) -> tuple[FileRef, ...]:
    refs = []
    for i, body in enumerate(bodies):
        key = f"{prefix}/{folders[i] + '/' if folders else ''}f{i}{suffix}"
        compressed = i % 2 == 1
        if compressed:
            key, body = key + ".gz", gzip.compress(body)
        etag = s3.put_object(Bucket=bucket, Key=key, Body=body)["ETag"].strip('"')
        refs.append(FileRef(bucket, key, etag, None, len(body), INGESTED_AT, f"{prefix}-{i}", "created", 1))
    return tuple(refs)


def _rows(out: ReadOutput, path: Path) -> list[dict[str, Any]]:
    tables = [conform(pq.read_table(path / f.path), out.schema) for f in out.files]
    rows = pa.concat_tables(tables).to_pylist() if tables else []
    return sorted(rows, key=lambda r: (r["_source_file"], r["_source_line"]))


def _errors(out: ReadOutput) -> list[dict[str, Any]]:
    return sorted(out.errors.to_pylist(), key=lambda r: (r["_source_file"], r["_source_line"] or -1))


def _bucket(s3: Any) -> str:
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
        s3.create_bucket(Bucket=BUCKET)
    return BUCKET


def _both_paths(
    spark: Any,
    s3: Any,
    aws_options: aws.AwsOptions,
    root: Path,
    fmt: str,
    bodies: list[bytes],
    *,
    folders: list[str] | None = None,
    extra: dict[str, str] | None = None,
    existing: pa.Schema | None = None,
) -> ReadOutput:
    """Compares the two paths' outputs; returns the fast one's (`fast_path_files`: what it read)."""
    run, bucket = next(_RUNS), _bucket(s3)
    refs = _put(s3, bucket, f"{fmt}/{run}", bodies, f".{'json' if fmt == 'json' else 'csv'}", folders)
    batch = Batch(refs, (), Checkpoint(-1), Checkpoint(0))
    outs = {}
    for fast in (True, False):
        path = root / f"{run}-{fast}"
        target = _target(fmt, path, fast=fast, extra=extra)
        out = run_batch(
            spark, batch, target, existing_schema=existing, aws=aws_options, ingested_at=INGESTED_AT
        )
        outs[fast] = (out, path)
        if fast and out.fast_path_files == 0:  # the fast path declined every file: the line path read
            return out  # them all, as the second read would (most drawn files hold a row it declines)
    (fast_out, fast_path), (line_out, line_path) = outs[True], outs[False]
    assert fast_out.schema == line_out.schema  # the same columns, types and order
    assert _rows(fast_out, fast_path) == _rows(line_out, line_path)
    assert _errors(fast_out) == _errors(line_out)
    assert fast_out.failed_files == line_out.failed_files
    return fast_out


# Derandomized: CI runs the same examples every time (a random one that finds a new divergence would
# make an unrelated change red); `--hypothesis-seed`/a local edit explores further.
_SETTINGS = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@_SETTINGS
@given(drawn=json_batches())
def test_json_files_give_the_same_rows_and_error_rows_on_either_path(s3, aws_options, spark, tmp_path, drawn):
    fast = _both_paths(spark, s3, aws_options, tmp_path, "json", drawn.bodies, existing=drawn.existing)
    assert fast.fast_path_files == drawn.clean  # each line names its fields: a JSON batch splits


@pytest.mark.parametrize(
    ("bodies", "id_type", "fast_files"),
    [
        # The fast file's nulls take the declined file's type: the fast file stays read.
        pytest.param([b'{"id": null}\n', b'{"id": 1}\nnot json\n'], pa.int64(), 1, id="null-beside-bigint"),
        # Merged, the types are DOUBLE: the fast file's values would be parsed again, so the line path
        # reads the whole batch.
        pytest.param(
            [b'{"id": 1}\n', b'{"id": 1.5}\nnot json\n'], pa.float64(), 0, id="bigint-beside-double"
        ),
        pytest.param(
            [b'{"id": 1, "a": "x"}\n', b'{"id": 2, "b": true}\nnot json\n'], pa.int64(), 1, id="own-columns"
        ),
    ],
)
def test_json_new_column_is_typed_from_the_fast_and_the_declined_files(
    s3, aws_options, spark, tmp_path, bodies, id_type, fast_files
):
    fast = _both_paths(spark, s3, aws_options, tmp_path, "json", bodies)
    assert fast.schema.field("id").type == id_type
    assert fast.fast_path_files == fast_files


def test_json_new_column_of_a_merge_batch_is_typed_from_the_fast_and_the_declined_files(
    s3, aws_options, spark, tmp_path
):
    bodies = [b'{"k": 1, "id": null}\n{"k": 2, "id": null}\n', b'{"k": 2, "id": 1}\nnot json\n']
    refs = _put(s3, _bucket(s3), f"json/{next(_RUNS)}", bodies, ".json")
    batch, merge = Batch(refs, (), Checkpoint(-1), Checkpoint(0)), {"mode": "merge", "record.key": "k"}
    outs = [
        run_batch(
            spark,
            batch,
            _target("json", tmp_path / str(fast), fast=fast, extra=merge),
            existing_schema=None,
            aws=aws_options,
            ingested_at=INGESTED_AT,
        )
        for fast in (True, False)
    ]
    assert [out.fast_path_files for out in outs] == [1, 0]
    assert outs[0].schema.field("id").type == outs[1].schema.field("id").type == pa.int64()
    fast, line = (out.merge.take_rows().select(outs[1].schema.names) for out in outs if out.merge)
    assert sorted(fast.to_pylist(), key=lambda r: r["k"]) == sorted(line.to_pylist(), key=lambda r: r["k"])


def test_csv_new_column_is_typed_from_the_fast_and_the_declined_files(s3, aws_options, spark, tmp_path):
    # One header names every file's columns: a declined file sends a first batch to the line path whole.
    bodies = [b"id,name\n,a\n", b"id,name\n1,b\n1,b,c\n"]
    fast = _both_paths(spark, s3, aws_options, tmp_path, "csv", bodies)
    assert fast.schema.field("id").type == pa.int32()
    assert fast.fast_path_files == 0


@_SETTINGS
@given(drawn=csv_batches())
def test_csv_files_give_the_same_rows_and_error_rows_on_either_path(s3, aws_options, spark, tmp_path, drawn):
    fast = _both_paths(spark, s3, aws_options, tmp_path, "csv", drawn.bodies, existing=drawn.existing)
    # A first batch's columns are typed from every file: one declined file sends them all to the line path.
    splits = drawn.existing is not None or drawn.clean == len(drawn.bodies)
    assert fast.fast_path_files == (drawn.clean if splits else 0)


_CASED_LINE = st.one_of(
    st.dictionaries(st.sampled_from(["id", "name", "Name", "NAME"]), _SCALAR, max_size=3).map(json.dumps),
    st.sampled_from(["", "not json"]),
)


@example(bodies=[b'{"id": 1, "name": "a", "Name": "b"}\n{"name": 2}\n', b'{"Name": 3}\n{"NAME": null}\n'])
@settings(_SETTINGS, max_examples=4)
@given(
    bodies=st.lists(
        st.lists(_CASED_LINE, max_size=4).map(lambda ls: ("\n".join(ls) + "\n").encode()),
        min_size=1,
        max_size=3,
    )
)
def test_json_names_differing_only_in_case_give_the_same_rows_on_either_path(
    s3, aws_options, spark, tmp_path, bodies
):
    _both_paths(spark, s3, aws_options, tmp_path, "json", bodies)


# -- columns from the object key ---------------------------------------------------------------------------

_KEY_FOLDERS = st.tuples(
    st.sampled_from(["2026", "20x6", "0007"]),  # key.pattern's `year` (INT): 20x6 does not cast
    st.sampled_from(
        ["dt=2026-11-27", "dt=2026-02-30", "dt=", "dt=__HIVE_DEFAULT_PARTITION__", "dt=2026-1-2"]
    ),
    st.sampled_from(["region=e%75", "region=us", "other=1"]),  # %75 is u: Spark unescapes folder values
).map("/".join)
_KEYED_LINE = st.one_of(
    st.dictionaries(st.sampled_from(["id", "dt", "region"]), _SCALAR, max_size=3).map(json.dumps),
    st.sampled_from(["", "not json"]),
)
KEY_CONF = {
    "key.pattern": r"^[^/]+/\d+/(?<year>[^/]+)/",
    "key.columns": "dt,region",
    "key.column.types": "year INT, dt DATE",
}


@settings(_SETTINGS, max_examples=4)
@given(
    files=st.lists(
        st.tuples(
            _KEY_FOLDERS, st.lists(_KEYED_LINE, max_size=5).map(lambda ls: ("\n".join(ls) + "\n").encode())
        ),
        min_size=1,
        max_size=3,
    ),
    required=st.booleans(),
)
def test_key_columns_give_the_same_rows_and_error_rows_on_either_path(
    s3, aws_options, spark, tmp_path, files, required
):
    conf = {**KEY_CONF, "key.columns.required": str(required).lower()}
    folders, bodies = [f for f, _ in files], [b for _, b in files]
    _both_paths(spark, s3, aws_options, tmp_path, "json", bodies, folders=folders, extra=conf)


# -- schema.hints and schema.infer.types -------------------------------------------------------------------

_JSON_TYPING = st.sampled_from(
    [
        {"schema.hints": "id BIGINT, amount DOUBLE"},
        {"schema.infer.types": "false"},
        {"schema.infer.types": "false", "schema.hints": "id BIGINT, extra STRING"},
        {"schema.hints": "amount DECIMAL(18,2), name MAP<STRING,STRING>"},
    ]
)
_CSV_TYPING = st.sampled_from(
    [{"schema.hints": "id BIGINT"}, {"schema.infer.types": "false"}, {"schema.hints": "amount DOUBLE, x INT"}]
)


@settings(_SETTINGS, max_examples=6)
@given(bodies=json_files(), typing=_JSON_TYPING)
def test_json_hints_and_string_columns_give_the_same_rows_on_either_path(
    s3, aws_options, spark, tmp_path, bodies, typing
):
    _both_paths(spark, s3, aws_options, tmp_path, "json", bodies, extra=typing)


@settings(_SETTINGS, max_examples=5)
@given(bodies=csv_files(), typing=_CSV_TYPING)
def test_csv_hints_and_string_columns_give_the_same_rows_on_either_path(
    s3, aws_options, spark, tmp_path, bodies, typing
):
    _both_paths(spark, s3, aws_options, tmp_path, "csv", bodies, extra=typing)


_AMOUNT = st.sampled_from(
    [2.5, "2.5", 2.555, 100, 1e2, -0.0, "1,000.5", " 3", 12345678901234567890, None, True, "x", {"a": 1}]
)
_DECIMAL_LINE = st.one_of(
    st.fixed_dictionaries({"amount": _AMOUNT}, optional={"id": st.integers(0, 9)}).map(json.dumps),
    st.sampled_from(['{"id": 1}', "not json"]),
)


@settings(_SETTINGS, max_examples=6)
@given(
    bodies=st.lists(
        st.lists(_DECIMAL_LINE, min_size=1, max_size=5).map(lambda ls: ("\n".join(ls) + "\n").encode()),
        min_size=1,
        max_size=3,
    )
)
def test_json_decimal_hints_give_the_same_rows_on_either_path(s3, aws_options, spark, tmp_path, bodies):
    _both_paths(
        spark, s3, aws_options, tmp_path, "json", bodies, extra={"schema.hints": "amount DECIMAL(18,2)"}
    )


_CSV_AMOUNT = st.sampled_from(
    ["2.5", "+1", ".5", "5.", "1e2", "-0", "2.555", '"1,000"', " 3", "x", "", "12345678901234567890", "NaN"]
)


@settings(_SETTINGS, max_examples=5)
@given(
    bodies=st.lists(
        st.lists(st.tuples(st.integers(0, 9), _CSV_AMOUNT), min_size=1, max_size=5).map(
            lambda rows: ("id,amount\n" + "".join(f"{i},{a}\n" for i, a in rows)).encode()
        ),
        min_size=1,
        max_size=3,
    )
)
def test_csv_decimal_hints_give_the_same_rows_on_either_path(s3, aws_options, spark, tmp_path, bodies):
    _both_paths(
        spark, s3, aws_options, tmp_path, "csv", bodies, extra={"schema.hints": "amount DECIMAL(18,2)"}
    )
