"""The whole-buffer checks every fast path shares, against what they mean line by line."""

from __future__ import annotations

import random

from s3events.ingest.files.formats.base import Body, has_blank_lines, line_count, lone_carriage_return


def blank_line_by_line(body: bytes) -> bool:
    return any(not line.strip(b" \t\r") for line in body.split(b"\n"))


def lone_carriage_return_line_by_line(body: bytes) -> bool:
    """A b"\\r" other than at a line's end (the body's last byte ends its last line)."""
    return any(b"\r" in line[:-1] for line in body.split(b"\n"))


def whole(body: bytes) -> Body:
    return Body(body, len(body))


def random_bodies(seed: int, alphabet: bytes) -> list[bytes]:
    rng = random.Random(seed)
    return [bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(3000)]


def test_a_blank_line_is_found_wherever_it_is_and_whatever_whitespace_fills_it():
    assert has_blank_lines(whole(b"a\n\nb")) and has_blank_lines(whole(b"a\n \t\r\nb"))
    assert has_blank_lines(whole(b"\na")) and has_blank_lines(whole(b"a\n  ")) and has_blank_lines(whole(b""))
    assert has_blank_lines(whole(b"a\nb\n\n\nc"))
    assert not has_blank_lines(whole(b"a\nb")) and not has_blank_lines(whole(b"a\r\nb\r"))
    assert not has_blank_lines(whole(b" x "))


def test_random_buffers_agree_with_a_line_by_line_reading():
    for body in random_bodies(20261125, b"ab \t\r\n\n"):
        assert has_blank_lines(whole(body)) == blank_line_by_line(body), body
        assert lone_carriage_return(whole(body)) == lone_carriage_return_line_by_line(body), body
        assert line_count(whole(body)) == len(body.split(b"\n")), body


def test_a_body_is_the_object_without_its_final_newline_and_is_never_copied():
    data = b"id,name\r\n1,a\r\n"
    body = Body.of(data)
    assert body.data is data and len(body) == len(data) - 1
    assert body.first_line() == b"id,name\r" and body.last_line() == b"1,a\r"
    assert line_count(body) == 2 and not lone_carriage_return(body) and not has_blank_lines(body)
    assert b"1,a\r\n" not in body and b"1,a\r" in body and body.find(b"\r\n", 8) == -1
    assert body.buffer().to_pybytes() == data[:-1]
