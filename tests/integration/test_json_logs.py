"""`s3events.log.format=json` makes the whole ingest process log JSON lines: our loggers, Spark's JVM
(log4j2 and whatever else the JVM writes to stderr, such as its incubator-module warning) and PySpark's
own loggers. The real `s3events ingest --once` runs as a child process with its own Spark; every line of
its stderr must parse as one JSON object with the fields of observe.json_log."""

from __future__ import annotations

import json
from typing import Any

import pytest

from s3events.capture.service import run_capture
from s3events.config import load_settings
from tests.conftest import read_table, run_cli, spark_env

pytestmark = [pytest.mark.integration, pytest.mark.process]

FIELDS = {"time", "level", "logger", "message"}
LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def test_an_ingest_run_with_json_logs_writes_only_json_lines_spark_included(make_stack, s3, tmp_path):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="in/a.json", Body=_jsonl([{"x": 1}, {"x": 2}]))
    s3.put_object(Bucket=stack.bucket, Key="in/b.json", Body=_jsonl([{"x": 3}]) + b'{"x": cut off\n')
    run_capture(load_settings(None, stack.conf()), once=True)
    target = str(tmp_path / "orders")
    conf = stack.conf(
        log__format="json",
        spark__master="local[1]",
        ingest__targets="orders",
        ingest__target__orders__path=target,
        ingest__target__orders__format="json",
    )

    result = run_cli(
        ["ingest", "--once", *[a for kv in conf for a in ("--conf", kv)]], env=spark_env(), timeout=240
    )

    assert result.returncode == 0, result.stderr
    assert sorted(r["x"] for r in read_table(target)) == [1, 2, 3]
    lines = result.stderr.splitlines()
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not a JSON line: {line!r}\n--- the whole stderr:\n{result.stderr}")
    assert all(isinstance(r, dict) and r.keys() >= FIELDS and r["level"] in LEVELS for r in records), records
    loggers = {r["logger"] for r in records}
    assert any(name.startswith("s3events.") for name in loggers), loggers
    # The JVM spoke, and in JSON: log4j2 (Hadoop's native-library warning on any pip-installed Spark) or
    # the relayed stderr of the JVM itself (Java 17+ warns of the incubator module Spark 4 adds).
    assert any(name.startswith("org.apache.") or name == "spark.stderr" for name in loggers), loggers
    batches = [r for r in records if r.get("target") == "orders" and "rows" in r]
    assert sum(r["rows"] for r in batches) == 3, batches
