"""The whole-buffer checks every fast path shares, against what they mean line by line."""

from __future__ import annotations

import random

from s3events.ingest.files.fast_parse import has_blank_lines


def blank_line_by_line(body: bytes) -> bool:
    return any(not line.strip(b" \t\r") for line in body.split(b"\n"))


def test_a_blank_line_is_found_wherever_it_is_and_whatever_whitespace_fills_it():
    assert has_blank_lines(b"a\n\nb") and has_blank_lines(b"a\n \t\r\nb") and has_blank_lines(b"\na")
    assert has_blank_lines(b"a\n  ") and has_blank_lines(b"") and has_blank_lines(b"a\nb\n\n\nc")
    assert not has_blank_lines(b"a\nb") and not has_blank_lines(b"a\r\nb\r") and not has_blank_lines(b" x ")


def test_random_buffers_agree_with_a_line_by_line_reading():
    rng = random.Random(20261125)
    for _ in range(3000):
        body = bytes(rng.choice(b"ab \t\r\n\n") for _ in range(rng.randint(1, 40)))
        assert has_blank_lines(body) == blank_line_by_line(body), body
