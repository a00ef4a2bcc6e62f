"""Why the line path refused a JSON line: a raw control character inside a string is invalid JSON (Spark's
get_json_object lets it through, from_json does not), found by RAW_CONTROL_IN_STRING, a regex Spark's
Java engine and Python's `re` read alike (possessive quantifiers, \\xhh escapes, DOTALL)."""

from __future__ import annotations

import re

import pytest

from s3events.ingest.files.formats.json_lines import RAW_CONTROL_IN_STRING

PATTERN = re.compile(RAW_CONTROL_IN_STRING)


def test_a_nul_byte_inside_a_json_string_is_found_with_its_column():
    line = '{"id": 1, "note": "a\x00b"}'
    found = PATTERN.search(line)
    assert found is not None and found.group(1) == "\x00"
    assert len(found.group(0)) == line.index("\x00") + 1  # the column the reason names


@pytest.mark.parametrize(
    "line",
    [
        '{"id": 1,\t"note": "tab between tokens is whitespace"}',
        '{"id": "not-a-number"}',  # a type conflict, not a control character
        '{"note": "escaped \\u0000 and \\t and a quote \\" then \\\\"}',
        '{"a": "x", "b": "y"}\t',
    ],
)
def test_lines_without_a_raw_control_character_in_a_string_are_not_flagged(line):
    assert PATTERN.search(line) is None


@pytest.mark.parametrize(
    ("line", "char"),
    [
        ('{"note\x01": 1}', "\x01"),  # in a field name
        ('{"a": "\\"", "b": "x\ty"}', "\t"),  # after a string holding an escaped quote
        ('{"a": "x"}\t{"b": "\x1f"}', "\x1f"),
    ],
)
def test_a_raw_control_character_in_any_string_is_flagged(line, char):
    found = PATTERN.search(line)
    assert found is not None and found.group(1) == char


def test_a_long_line_of_strings_is_searched_without_backtracking_blowup():
    line = "{" + ", ".join(f'"k{n}": "{"v" * 50}"' for n in range(2000)) + ', "last": "\x00"}'
    assert PATTERN.search(line) is not None
    assert PATTERN.search(line.replace("\x00", "")) is None
