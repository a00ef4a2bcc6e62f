"""The CSV fast path with `multiLine=true`: pyarrow cuts records with quoted newlines as the line path
cuts them (`records.csv_records`), numbers each by its first line, and declines what it would cut or read
otherwise. Its rows against the line path's: tests/integration/test_dispatch_whole_files.py."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from s3events.ingest.files.formats import records
from s3events.ingest.files.formats.base import Body, has_blank_lines
from s3events.ingest.files.formats.csv_fields import CsvOptions, csv_options
from s3events.ingest.files.formats.csv_format import parse_csv
from s3events.ingest.files.formats.csv_multi_line import Quotes, Records, quotes_of
from tests.unit.conftest import file_ref

FILE = file_ref("in/f.csv")


def parse(data: bytes, known: pa.Schema | None = None, **options: object):
    options = {"multi_line": True, **options}
    declared = known is not None
    schema = known if known is not None else pa.schema([])
    return parse_csv(data, FILE, "e1", known=schema, declared=declared, options=CsvOptions(**options))  # type: ignore[arg-type]


def _rows(data: bytes, **options: object) -> list[dict[str, object]]:
    parsed = parse(data, **options)
    assert parsed.table is not None, parsed.reason
    return parsed.table.drop_columns(["_source_file", "_source_etag", "_event_time"]).to_pylist()


def test_a_quoted_newline_stays_in_its_value_and_a_record_is_numbered_by_its_first_line():
    data = b'id,note\r\n1,"a\r\nb"\r\n2,"x"\n3,"x\n\n y "\n4,z'
    assert _rows(data) == [
        {"_source_line": 2, "id": 1, "note": "a\nb"},  # the line path drops each line's final \r
        {"_source_line": 4, "id": 2, "note": "x"},
        {"_source_line": 5, "id": 3, "note": "x\n\n y "},  # a blank line inside quotes is the value's
        {"_source_line": 8, "id": 4, "note": "z"},
    ]
    # as the line path cuts the same object
    split = records.splitter("csv", {"multiLine": "true"})
    assert split is not None
    assert [n for n, _ in split(data)] == [1, 2, 4, 5, 8]


def test_a_declared_schema_without_a_header_numbers_records_from_the_first_line():
    known = pa.schema([("id", pa.int64()), ("v", pa.string())])
    assert _rows(b'1;"x\ny"\n2;z\n', known=known, header=False, delimiter=";") == [
        {"_source_line": 1, "id": 1, "v": "x\ny"},
        {"_source_line": 3, "id": 2, "v": "z"},
    ]


def test_a_header_record_is_the_line_paths_also_when_declined():
    parsed = parse(b'id,"na\r\nme"\r\n1,a\r\n')
    assert parsed.table is None and parsed.header == 'id,"na\nme"'  # the name holds a newline: declined
    assert parse(b'"id",name\n1,x\n').header == '"id",name'


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'id,note\n1,"cut short\n', "left open"),  # the line path cuts the rest as one record
        (b'id,note\n1,"a""b"\n', "whole fields"),  # a doubled quote: Spark keeps both
        (b'id,note\n1,"a"b\n', "whole fields"),
        (b'id,note\n1, "a"\n', "whole fields"),
        (b'id,note\n1,"a\nb"\n\n2,c\n', "blank line"),  # the line path skips it, pyarrow gives nulls
        (b"id\n1\n  \n2\n", "blank line"),
        (b'id,note\n1,"a\rb"\n', "carriage return"),
        (b'id,note\n1,"a\\\nb"\n', "escape"),
        (b'id,note\n1,"a\nb",3\n', "pyarrow"),  # too many fields
        (b'id,note\n1,"12\n34"\n', "inference"),  # a number with a newline: Spark's to type
    ],
)
def test_what_the_line_path_would_cut_or_read_otherwise_is_declined(data, why):
    parsed = parse(data)
    assert parsed.table is None and parsed.reason is not None and why in parsed.reason, parsed.reason


def test_multi_line_is_a_reader_option_the_fast_path_takes_in_any_case():
    assert csv_options({"multiLine": "true", "sep": ";"}) == CsvOptions(delimiter=";", multi_line=True)
    assert csv_options({"MULTILINE": " TRUE "}) == CsvOptions(multi_line=True)
    assert csv_options({"multiline": "false"}) == CsvOptions()


# -- the record split by quote parity against the split by quote pairs it replaced -------------------------

_OLD_BLANK_LINE = re.compile(rb"(?:^|\n)[ \t\r]*(?=\n|$)")
_OPTIONS = [CsvOptions(multi_line=True), CsvOptions(multi_line=True, delimiter=";", quote="'")]
_AS_OPTIONS = [bytes.maketrans(b"", b""), bytes.maketrans(b"\",';", b"';\",")]  # written for each
_FIELDS = [b"", b"a", b"7", b" ", b'""', b'"x\ny"', b'"p\r\nq"', b'"\n\n"', b'"a,b"', b'" \n\t"']
_FIELDS = _FIELDS * 4 + [b'"', b'a"b', b'"a""b"', b'"open', b'"x\ry"', b"\\", b"\r"]  # the fast path declines
_LINE_ENDS = [b"\n", b"\n", b"\r\n", b"\n\n", b"\n \n"]
_LINES = st.lists(st.sampled_from(_FIELDS), min_size=1, max_size=4).map(b",".join)
_CSV = st.builds(
    lambda lines, ends, last: b"".join(line + end for line, end in zip(lines, ends, strict=False)) + last,
    st.lists(_LINES, min_size=1, max_size=8),
    st.lists(st.sampled_from(_LINE_ENDS), min_size=8, max_size=8),
    st.sampled_from([b"", b"", b"\n", b'"tail']),
)
_ANY = st.lists(st.sampled_from([*_FIELDS, b",", b"'", *_LINE_ENDS]), max_size=30).map(b"".join)


def _pairwise_split(body: Body, quotes: Quotes) -> tuple[bool, np.ndarray, bool]:
    """The split as quote pairs gave it: a blank line outside quotes, the line ends outside quotes (as
    indexes among the body's line ends), a b"\\r" inside quotes."""
    octets = np.frombuffer(body.data, np.uint8, count=body.end)
    found = np.array([m.start() for m in _OLD_BLANK_LINE.finditer(body.data, 0, body.end)], np.int64)
    blank = has_blank_lines(body) and bool(np.any(~quotes.inside(found)))
    ends = np.flatnonzero(~quotes.inside(np.flatnonzero(octets == ord("\n"))))
    returns = bool(np.any(quotes.inside(np.flatnonzero(octets == ord("\r")))))
    return blank, ends, returns


@settings(max_examples=1000, deadline=None, derandomize=True)
@given(st.one_of(_CSV, _ANY), st.integers(0, 1))
def test_records_cut_by_quote_parity_are_the_ones_quote_pairs_and_the_line_path_cut(written, kind):
    """Bodies of records whose fields are quoted or not, hold quoted line ends (CRLF too), doubled
    quotes, a quote inside a field, a quote left open at the end, blank lines, or are any bytes of those
    pieces; as they are, and with `;` and `'` for `,` and `"` (the reader options saying so)."""
    data, options = written.translate(_AS_OPTIONS[kind]), _OPTIONS[kind]
    body = Body.of(data)
    if not body:
        return
    pairs, cut = quotes_of(body, options), Records.of(body, options)
    if isinstance(pairs, str) or isinstance(cut, str):
        assert cut == pairs  # declined for the same reason (a quote left open, or inside a field)
        return
    blank, ends, returns = _pairwise_split(body, pairs)
    assert cut.blank_line_outside(body) == blank
    assert cut.ends.tolist() == ends.tolist()
    values = cut.without_carriage_returns(pa.table({"v": ["a\r\nb"]}), body)
    assert values.column("v").to_pylist() == ["a\nb" if returns else "a\r\nb"]
    if b"\\" in data:  # the escape character: declined (it makes the line path count quotes otherwise)
        return
    line_path = records.csv_records(data.decode(), quote=options.quote)
    starts = cut.first_lines(len(ends) + 1)
    assert not isinstance(starts, str)
    assert starts.tolist() == [n for n, _ in line_path]
