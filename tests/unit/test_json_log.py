"""JSON log lines (`s3events.log.format=json`): one object per line, the cycle's fields as keys."""

from __future__ import annotations

import json
import logging

from s3events.observe.json_log import JsonFormatter


def record(message: str, *args: object, exc_info: object = None, **extra: object) -> logging.LogRecord:
    rec = logging.getLogger("s3events.capture.service").makeRecord(
        "s3events.capture.service", logging.INFO, __file__, 1, message, args, exc_info, extra=extra
    )
    return rec


def test_a_line_holds_time_level_logger_message_and_the_extra_fields_as_keys() -> None:
    line = JsonFormatter().format(record("capture cycle: received=%d", 3, received=3, table_version=7))
    doc = json.loads(line)
    assert doc["level"] == "INFO"
    assert doc["logger"] == "s3events.capture.service"
    assert doc["message"] == "capture cycle: received=3"
    assert doc["received"] == 3 and doc["table_version"] == 7
    assert doc["time"].endswith("+00:00")


def test_an_exception_and_a_multi_line_message_stay_on_one_line() -> None:
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        import sys

        rec = record("first line\nsecond line\u2028third", exc_info=sys.exc_info())
    line = JsonFormatter().format(rec)
    assert len(line.splitlines()) == 1
    doc = json.loads(line)
    assert doc["message"] == "first line\nsecond line\u2028third"
    assert "Traceback" in doc["exception"] and "ValueError: bad\nvalue" in doc["exception"]


def test_fields_named_like_secrets_are_masked_and_odd_values_are_strings() -> None:
    doc = json.loads(JsonFormatter().format(record("x", session_token="abc", path=object())))
    assert doc["session_token"] == "***"
    assert isinstance(doc["path"], str)
