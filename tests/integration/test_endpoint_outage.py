"""The endpoint goes away for a while, then comes back. The fault proxy cuts every connection before it
reaches the endpoint (as a refused or reset connection would) while continuous capture and ingest run
through it: both back off and stay alive, log one line per failed cycle and no traceback, and catch up
once the endpoint answers again. `s3events status` during the outage exits non-zero naming what it
cannot reach."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from functools import partial
from pathlib import Path

import pytest

from s3events.dev.fault_proxy import FaultProxy
from s3events.infra import aws
from tests.conftest import counted_rows, run_cli, spark_env, through_proxy
from tests.integration.test_fault_rate import _wait_for

pytestmark = [pytest.mark.integration, pytest.mark.process, pytest.mark.chaos]

LINES = 3


def _put(s3, bucket: str, f: int) -> None:
    body = "".join(f'{{"f": {f}, "n": {n}}}\n' for n in range(LINES))
    s3.put_object(Bucket=bucket, Key=f"in/{f}.json", Body=body.encode())


def _failed_cycles(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if "cycle failed" in line]


def test_continuous_capture_and_ingest_outlive_an_unreachable_endpoint_and_catch_up(
    make_stack, s3, endpoint, aws_options, tmp_path
):
    stack = make_stack(metadata_on_s3=True, VisibilityTimeout="5")
    target = stack.metadata_path.rsplit("/", 1)[0] + "/events"
    storage = aws.delta_storage_options(aws_options)  # the test reads the endpoint directly
    env = spark_env()
    exe = str(Path(sys.executable).with_name("s3events"))
    rows = partial(counted_rows, target, storage, ("f", "n"))

    def lines(files: range) -> Counter[tuple[int, int]]:
        return Counter((f, n) for f in files for n in range(LINES))

    conf = {
        "ingest__targets": "events",
        "ingest__target__events__path": target,
        "ingest__target__events__format": "json",
        "spark__master": "local[1]",
    }
    logs = {name: tmp_path / f"{name}.log" for name in ("capture", "ingest")}
    with FaultProxy(endpoint.url) as proxy:
        continuous = ["--continuous", "--min-sync-interval-seconds", "1"]
        processes = {
            name: subprocess.Popen(
                [exe, *through_proxy([name, *continuous], stack, proxy, **conf)],
                stdout=subprocess.DEVNULL, stderr=log.open("wb"), env=env,
            )
            for name, log in logs.items()
        }
        alive, log_list = list(processes.values()), list(logs.values())
        try:
            for f in range(2):
                _put(s3, stack.bucket, f)
            _wait_for(lambda: rows() == lines(range(2)), deadline_seconds=300, alive=alive, logs=log_list)

            # The outage: nothing reaches the endpoint. Files keep landing (S3 itself is fine: the test
            # PUTs past the proxy) and their notifications wait in the queue.
            proxy.down = True
            before = {name: len(_failed_cycles(log)) for name, log in logs.items()}
            for f in range(2, 5):
                _put(s3, stack.bucket, f)
            status = run_cli(through_proxy(["status"], stack, proxy, **conf), timeout=120)
            _wait_for(
                lambda: all(len(_failed_cycles(log)) >= before[name] + 2 for name, log in logs.items()),
                deadline_seconds=300, alive=alive, logs=log_list,
            )
            refused = proxy.refused

            proxy.down = False  # back: the same processes catch up without a restart
            _wait_for(lambda: rows() == lines(range(5)), deadline_seconds=300, alive=alive, logs=log_list)
        finally:
            for process in processes.values():
                process.send_signal(signal.SIGTERM)
            codes = {name: process.wait(timeout=120) for name, process in processes.items()}

    texts = {name: log.read_text() for name, log in logs.items()}
    assert codes == {"capture": 0, "ingest": 0}, {name: text[-3000:] for name, text in texts.items()}
    assert rows() == lines(range(5))
    for name, text in texts.items():
        assert "Traceback" not in text, (name, text[-5000:])
        for line in _failed_cycles(logs[name]):
            assert "retrying in" in line and "\x1b" not in line, (name, line)
    assert status.returncode != 0, status.stdout + status.stderr
    said = status.stdout + status.stderr
    assert "Traceback" not in said, said
    assert "s3events.aws.endpoint.url" in said or "reach" in said, said
    failed = {name: len(_failed_cycles(logs[name])) - before[name] for name in logs}
    print(f"\noutage: {refused} requests refused; failed cycles logged {failed}; status exit "
          f"{status.returncode}: {said.strip()[:300]}")
