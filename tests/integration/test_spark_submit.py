"""capture under the pyspark wheel's `spark-submit`: the README's command line, run for real.

spark-submit starts a JVM whose PythonRunner runs `bin/s3events_main.py` with $PYSPARK_PYTHON and exits
with the Python process's exit code, so the CLI's exit codes must survive the trip. PythonRunner merges
the Python process's stderr into its stdout: our log lines and error messages arrive on spark-submit's
*stdout*; its stderr holds only the JVM's own output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from s3events.infra import aws
from tests.conftest import REPO, read_table

pytestmark = [pytest.mark.integration, pytest.mark.process, pytest.mark.cluster]

VENV_BIN = Path(sys.executable).parent
SPARK_SUBMIT = VENV_BIN / "spark-submit"

# Keys that S3 (and moto) URL-encode in notifications: space, '+', '%', '=', unicode, nested folders.
KEYS = [
    "spark submit/with space.json",
    "spark+submit/plus+sign.json",
    "spark%submit/100%.json",
    "dt=2024-01-01/part=7/ü €.json",
]


def _spark_submit(args: Sequence[str], *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`PYSPARK_PYTHON=<venv python> <venv>/bin/spark-submit --master 'local[1]' bin/s3events_main.py ARGS`,
    from the repository root as the README shows it."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("PYSPARK_DRIVER_PYTHON", None)  # the driver must be the venv's python too
    return subprocess.run(
        [str(SPARK_SUBMIT), "--master", "local[1]", "bin/s3events_main.py", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _conf_args(pairs: Sequence[str]) -> list[str]:
    return [arg for kv in pairs for arg in ("--conf", kv)]


def test_capture_once_under_spark_submit_writes_exactly_the_put_keys(make_stack):
    stack = make_stack()
    s3 = aws.client(aws.AwsOptions(region="us-east-1", endpoint_url=stack.endpoint_url), "s3")
    for key in KEYS:
        s3.put_object(Bucket=stack.bucket, Key=key, Body=b'{"n": 1}\n')

    result = _spark_submit(["capture", "--once", *_conf_args(stack.conf())])

    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "capture cycle: received=" in output
    rows = read_table(stack.metadata_path)
    assert sorted(row["key"] for row in rows) == sorted(KEYS)  # decoded exactly once, none lost or doubled
    assert {row["bucket"] for row in rows} == {stack.bucket}
    assert {row["event_source"] for row in rows} == {"sqs"}


def test_config_error_under_spark_submit_exits_2_with_one_line_naming_the_key(tmp_path):
    result = _spark_submit(
        [
            "capture",
            "--once",
            "--conf",
            f"s3events.metadata.table.path={tmp_path / 'metadata'}",
            "--conf",
            "s3events.source.queue.urll=http://127.0.0.1:1/123456789012/q",
        ]
    )

    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    ours = [line for line in output.splitlines() if line.startswith("s3events:")]
    assert ours == [
        "s3events: configuration error: s3events.source.queue.urll: unknown key; "
        "did you mean s3events.source.queue.url?"
    ], output
    assert "Traceback" not in output
    assert not (tmp_path / "metadata").exists()
