"""A top-level JSON array cut by numpy (`json_elements`) gives the elements the line path's Python cutter
(`records.json_records`) gives, or nothing (the caller then cuts in Python); where the Python cutter
finds the document malformed, the JSON fast parser declines the lines."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from s3events.ingest.files.formats import json_elements, records
from s3events.ingest.files.formats.json_format import parse_json_lines
from s3events.ingest.files.lines import CorruptData
from tests.unit.conftest import file_ref

_TEXT = st.text(alphabet=st.sampled_from([*'ab ,[]{}:"\\\n\t/', "é", "\u2028", "\ufeff"]), max_size=5)
_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)


def _python_cut(data: bytes) -> list[str] | None:
    try:
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
        return [record for _, record in records.json_records(text)]
    except CorruptData:
        return None


def _agrees(data: bytes) -> None:
    lines = json_elements.one_a_line(data)
    if lines is None:
        return  # cut in Python
    expected = _python_cut(data)
    if expected is None:  # malformed: the JSON fast parser must decline the lines
        parsed = parse_json_lines(lines, file_ref("f.json"), "e", known=pa.schema([]), declared=False)
        assert parsed.table is None, data
        return
    folded = [r.replace("\n", " ").replace("\r", " ").strip() for r in expected]
    assert [line.strip() for line in lines.decode().split("\n")] == folded


def test_an_array_is_cut_as_the_line_path_cuts_it_and_anything_unusual_is_left_to_it():
    assert json_elements.one_a_line(b'\xef\xbb\xbf[\n {"a": "x,]}\\"y"},\r\n [1, 2], "s", 3\n]\n') is not None
    for data in [b"[]", b"[1,]", b"[,1]", b'{"a": 1}', b'[{"a": "x\ny"}]', b"[1] x", b'[{"a":"\xff"}]']:
        assert json_elements.one_a_line(data) is None, data
        _agrees(data)
    _agrees(b'[{"a":1} {"b":2}]')  # two values on one line: pyarrow reads two rows


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    values=st.lists(_VALUE, max_size=5),
    indent=st.sampled_from([None, 1, "\t"]),
    edit=st.tuples(st.integers(0, 10_000), st.sampled_from(["", *',[]{}:"\\\n ', "\ufeff", "x"])),
    edited=st.booleans(),
)
def test_drawn_arrays_and_their_corruptions_agree_with_the_python_cutter(
    values: list[Any], indent: Any, edit: tuple[int, str], edited: bool
) -> None:
    text = json.dumps(values, indent=indent, ensure_ascii=False)
    if edited:  # one character removed, or one inserted
        at, char = edit[0] % (len(text) + 1), edit[1]
        text = text[:at] + char + text[at + (len(char) != 1) :]
    _agrees(text.encode())


def test_a_null_line_is_declined_not_read_by_pyarrow_which_crashes_on_one_starting_a_block():
    for data in [b'null\n{"a": 1}\n', b'{"a": 1}\n  nullx\n', b'[null, {"a": 1}]']:
        lines = json_elements.one_a_line(data) or data
        parsed = parse_json_lines(lines, file_ref("f.json"), "e", known=pa.schema([]), declared=False)
        assert parsed.table is None and "starts with n" in (parsed.reason or ""), data
