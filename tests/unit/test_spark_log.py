"""The relay of Spark's JVM stderr (infra.spark_log): with JSON logs, every line the JVM writes becomes one
JSON object on this process's stderr: a line that already is one passes as it is, any other line becomes
a record of logger `spark.stderr`. And the JVM's log4j2 configuration names the same fields."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from s3events.infra import spark_log
from s3events.observe.json_log import JsonFormatter, json_logging


@pytest.fixture
def json_root() -> Iterator[io.StringIO]:
    """The root logger writes JSON lines (to the stream this yields)."""
    root = logging.getLogger()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    try:
        yield stream
    finally:
        root.removeHandler(handler)


def test_every_relayed_line_is_one_json_object(
    json_root: io.StringIO, capfd: pytest.CaptureFixture[str]
) -> None:
    log4j = '{"time":"2026-01-01T00:00:00.000+00:00","level":"WARNING","logger":"org.apache.x","message":"m"}'
    jvm = io.BytesIO(
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        + log4j.encode()
        + b"\n\n"
        + b"Traceback (most recent call last):\n"
        + b"[1, 2]\n"  # JSON, but not an object: a line of output like any other
    )

    spark_log.relay(jvm)

    assert capfd.readouterr().err == log4j + "\n"  # written to fd 2 as it came
    relayed = [json.loads(line) for line in json_root.getvalue().splitlines()]
    assert [(r["logger"], r["level"], r["message"]) for r in relayed] == [
        ("spark.stderr", "WARNING", "WARNING: Using incubator modules: jdk.incubator.vector"),
        ("spark.stderr", "WARNING", "Traceback (most recent call last):"),
        ("spark.stderr", "WARNING", "[1, 2]"),
    ]


def test_json_logging_follows_the_root_handlers(json_root: io.StringIO) -> None:
    assert json_logging()
    options = spark_log.jvm_log_options({"spark.driver.extraJavaOptions": "-Xss4m"})
    java = options["spark.driver.extraJavaOptions"]
    assert java.startswith("-Xss4m -Dlog4j2.configurationFile=file:")
    assert options["spark.ui.showConsoleProgress"] == "false"
    written = spark_log.log4j2_json_file().read_text(encoding="utf-8")
    assert written == spark_log.LOG4J2_JSON
    template = json.loads(written.split("layout.eventTemplate = ", 1)[1].splitlines()[0])
    assert set(template) == {"time", "level", "logger", "message", "exception"}


def test_text_logs_leave_spark_as_it_is() -> None:
    assert not json_logging()
    assert spark_log.jvm_log_options({}) == {}
