"""Capture and ingest with a tenth of every AWS request failing (seeded): 503 answers, connections cut
before the request reaches the endpoint, and answers lost after it was served. Runs are repeated as a
scheduler would; in the end every line lands exactly once."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from s3events.dev.fault_proxy import FaultProxy
from s3events.infra import aws
from tests.conftest import CliResult, counted_rows, run_cli, spark_env, through_proxy

pytestmark = [pytest.mark.integration, pytest.mark.process, pytest.mark.chaos]

FILES = 6
LOST = 2  # files whose notifications never arrive
LINES = 3


def _runs_until(
    done: Callable[[list[int]], bool], run: Callable[[], CliResult], *, deadline_seconds: float
) -> list[int]:
    """Run (as a scheduler re-runs a failed job) until `done(exit codes so far)`; the exit codes. A run
    that ends other than done (0) or retry-later (1) fails the test with what it printed."""
    codes: list[int] = []
    deadline = time.monotonic() + deadline_seconds
    while not done(codes):
        assert time.monotonic() < deadline, f"not done after {len(codes)} runs: exit codes {codes}"
        result = run()
        printed = result.stderr[-4000:]
        assert result.returncode in (0, 1), f"exit {result.returncode} after exits {codes}:\n{printed}"
        codes.append(result.returncode)
    return codes


def _lose_every_message(sqs: Any, queue_url: str) -> None:
    while messages := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages"):
        for message in messages:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


@pytest.mark.parametrize(
    "kinds",
    [
        ("status", "drop_before", "drop_after"),
        ("throttle", "cut_body", "latency", "drop_after"),  # SQS throttling, bodies cut mid-stream, slowness
    ],
    ids=["errors-and-cuts", "throttling-cut-bodies-latency"],
)
def test_capture_backfill_and_ingest_with_ten_percent_of_requests_failing_land_every_line_exactly_once(
    kinds, make_stack, s3, sqs, endpoint, aws_options
):
    stack = make_stack(metadata_on_s3=True, VisibilityTimeout="2")
    expected: Counter[tuple[int, int]] = Counter()

    def put(f: int) -> None:
        body = "".join(f'{{"f": {f}, "n": {n}}}\n' for n in range(LINES))
        s3.put_object(Bucket=stack.bucket, Key=f"in/{f}.json", Body=body.encode())
        expected.update((f, n) for n in range(LINES))

    for f in range(FILES, FILES + LOST):  # their notifications are lost: only backfill finds them
        put(f)
    _lose_every_message(sqs, stack.queue_url)
    for f in range(FILES):
        put(f)
    target = stack.metadata_path.rsplit("/", 1)[0] + "/events"
    ingest_conf = {
        "ingest__targets": "events",
        "ingest__target__events__path": target,
        "ingest__target__events__format": "json",
        "ingest__target__events__max__files__per__batch": 2,
        "spark__master": "local[1]",
    }
    storage = aws.delta_storage_options(aws_options)

    def drained() -> bool:
        depth = sqs.get_queue_attributes(QueueUrl=stack.queue_url, AttributeNames=["All"])["Attributes"]
        return depth["ApproximateNumberOfMessages"] == depth["ApproximateNumberOfMessagesNotVisible"] == "0"

    def landed() -> bool:
        return counted_rows(target, storage, ("f", "n")).total() >= expected.total()

    env = spark_env()
    with FaultProxy(endpoint.url, rate=0.10, seed=11, random_kinds=kinds) as proxy:
        capture = through_proxy(["capture", "--once"], stack, proxy)
        capture_codes = _runs_until(
            lambda _: drained(), lambda: run_cli(capture), deadline_seconds=300
        )
        backfill = through_proxy(["backfill", "--source", f"s3://{stack.bucket}"], stack, proxy)
        backfill_codes = _runs_until(
            lambda codes: bool(codes) and codes[-1] == 0,  # a complete pass
            lambda: run_cli(backfill),
            deadline_seconds=300,
        )
        ingest = through_proxy(["ingest", "--once"], stack, proxy, **ingest_conf)
        ingest_codes = _runs_until(
            lambda _: landed(), lambda: run_cli(ingest, env=env, timeout=300), deadline_seconds=600
        )

    assert counted_rows(target, storage, ("f", "n")) == expected
    kinds = Counter(i.kind for i in proxy.injected)
    print(f"\nfaults injected {dict(kinds)} of {len(proxy.injected) + proxy.forwarded} requests; exit codes "
          f"of the runs: capture {capture_codes}, backfill {backfill_codes}, ingest {ingest_codes}")
    assert sum(kinds.values()) > 0


def _wait_for(condition: Callable[[], bool], *, deadline_seconds: float, alive: list[subprocess.Popen[bytes]],
              logs: list[Path]) -> None:
    """Wait on `condition` (polling, generous deadline); the processes must stay alive meanwhile."""
    deadline = time.monotonic() + deadline_seconds
    while not condition():
        dead = [p.args for p in alive if p.poll() is not None]
        assert not dead, (dead, [log.read_text()[-3000:] for log in logs])
        assert time.monotonic() < deadline, [log.read_text()[-3000:] for log in logs]
        time.sleep(0.5)  # polling a condition, not waiting for time to pass


def test_continuous_processes_ride_out_thirty_percent_faults_and_catch_up_without_a_restart(
    make_stack, s3, endpoint, aws_options, tmp_path
):
    stack = make_stack(metadata_on_s3=True, VisibilityTimeout="5")
    target = stack.metadata_path.rsplit("/", 1)[0] + "/events"
    storage = aws.delta_storage_options(aws_options)
    env = spark_env()
    exe = str(Path(sys.executable).with_name("s3events"))
    expected = Counter((f, n) for f in range(FILES) for n in range(LINES))
    rows = partial(counted_rows, target, storage, ("f", "n"))

    with FaultProxy(endpoint.url, rate=0.30, seed=5) as proxy:
        conf = {
            "ingest__targets": "events",
            "ingest__target__events__path": target,
            "ingest__target__events__format": "json",
            "spark__master": "local[1]",
        }
        logs = [tmp_path / "capture.log", tmp_path / "ingest.log"]
        continuous = ["--continuous", "--min-sync-interval-seconds", "1"]
        processes = [
            subprocess.Popen(
                [exe, *through_proxy([command, *continuous], stack, proxy, **conf)],
                stdout=subprocess.DEVNULL, stderr=log.open("wb"), env=env,
            )
            for command, log in zip(("capture", "ingest"), logs, strict=True)
        ]
        try:
            for f in range(FILES):
                body = "".join(f'{{"f": {f}, "n": {n}}}\n' for n in range(LINES))
                s3.put_object(Bucket=stack.bucket, Key=f"in/{f}.json", Body=body.encode())
            # The outage: a third of all requests fail until both processes have met plenty of faults.
            _wait_for(lambda: len(proxy.injected) >= 60, deadline_seconds=300, alive=processes, logs=logs)
            during = len(proxy.injected)
            proxy.rate = 0.0  # recovery: the same processes, no restart
            _wait_for(lambda: rows() == expected, deadline_seconds=300, alive=processes, logs=logs)
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            codes = [process.wait(timeout=120) for process in processes]

    assert codes == [0, 0], [log.read_text()[-3000:] for log in logs]
    assert rows() == expected
    print(f"\n{during} faults injected at 30% before recovery; every line landed once after it")
