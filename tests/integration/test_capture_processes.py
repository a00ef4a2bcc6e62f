"""Capture as real OS processes: two on one queue, SIGTERM, and the exit codes of the real command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from s3events.infra import aws
from tests.conftest import read_table, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.process]


def _conf_args(pairs: list[str]) -> list[str]:
    return [arg for kv in pairs for arg in ("--conf", kv)]


def _start_capture(conf: list[str], log: Path) -> subprocess.Popen[bytes]:
    exe = Path(sys.executable).with_name("s3events")
    return subprocess.Popen(
        [str(exe), "capture", "--continuous", *_conf_args(conf)],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        env=os.environ.copy(),
    )


def test_two_capture_processes_on_one_queue_lose_and_duplicate_nothing(make_stack, tmp_path):
    stack = make_stack(metadata_on_s3=True)
    conf = stack.conf(source__queue__max__messages__per__batch=15, source__queue__max__batch__seconds=0.5)
    s3 = aws.client(aws.AwsOptions(region="us-east-1", endpoint_url=stack.endpoint_url), "s3")
    workers = [_start_capture(conf, tmp_path / f"capture-{n}.log") for n in range(2)]
    keys = [f"concurrent/{i:04d}.json" for i in range(300)]
    try:
        for key in keys:
            s3.put_object(Bucket=stack.bucket, Key=key, Body=key.encode())
            # duplicate notification for some objects: the same object PUT again is the same identity
            if key.endswith("7.json"):
                s3.put_object(Bucket=stack.bucket, Key=key, Body=key.encode())
    finally:
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(timeout=120) for proc in workers]
    logs = [(tmp_path / f"capture-{n}.log").read_text() for n in range(2)]
    assert codes == [0, 0], logs

    drained = run_cli(["capture", "--once", *_conf_args(conf)])
    assert drained.returncode == 0, drained.stderr

    options = aws.delta_storage_options(aws.AwsOptions(region="us-east-1", endpoint_url=stack.endpoint_url))
    rows = read_table(stack.metadata_path, options)
    assert sorted(r["key"] for r in rows) == keys
    assert len({r["event_id"] for r in rows}) == len(rows)
    history = DeltaTable(stack.metadata_path, storage_options=options).history()
    versions = sorted(h["version"] for h in history)
    assert versions == list(range(len(versions)))
    operations = [h["operation"] for h in sorted(history, key=lambda h: h["version"])]
    # new events are appended; a batch holding an id already held (a redelivery, or the same object PUT
    # again) goes through the MERGE, and each process catches up with the other's commits
    assert operations[0] == "CREATE TABLE" and "WRITE" in operations
    assert set(operations[1:]) <= {"MERGE", "WRITE"}
    assert {h.get("s3events.writer") for h in history if h["version"] > 0} == {"capture"}
    # both processes did real work (the queue was shared, not drained by one alone)
    assert all("capture cycle: received=" in log for log in logs), logs


def test_unknown_key_exits_2_with_one_line_naming_it(tmp_path):
    props = tmp_path / "bad.properties"
    props.write_text("s3events.metadata.table.path=/tmp/x\ns3events.source.queue.urll=http://127.0.0.1:1/q\n")
    result = run_cli(["capture", "--once", "--props", str(props)])
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "s3events.source.queue.urll" in lines[0] and "s3events.source.queue.url" in lines[0]


def test_out_of_range_value_exits_2_naming_key_value_and_range():
    result = run_cli(
        [
            "capture",
            "--once",
            "--conf",
            "s3events.source.queue.url=http://127.0.0.1:1/123/q",
            "--conf",
            "s3events.metadata.table.path=/tmp/x",
            "--conf",
            "s3events.source.queue.long.poll.wait=25",
        ]
    )
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "s3events.source.queue.long.poll.wait" in lines[0] and "25" in lines[0] and "20" in lines[0]


def test_missing_required_key_exits_2_naming_it():
    result = run_cli(["capture", "--once", "--conf", "s3events.metadata.table.path=/tmp/x"])
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "s3events.source.queue.url" in lines[0]


def test_missing_queue_is_fatal_with_an_actionable_message(endpoint, tmp_path):
    result = run_cli(
        [
            "capture",
            "--once",
            "--conf",
            f"s3events.aws.endpoint.url={endpoint.url}",
            "--conf",
            "s3events.aws.region=us-east-1",
            "--conf",
            f"s3events.source.queue.url={endpoint.url}/123456789012/no-such-queue",
            "--conf",
            f"s3events.metadata.table.path={tmp_path / 'm'}",
        ]
    )
    assert result.returncode == 3, result.stderr
    assert "queue does not exist" in result.stderr and "no-such-queue" in result.stderr


def test_help_lists_the_subcommands():
    result = run_cli(["--help"])
    assert result.returncode == 0
    assert "capture" in result.stdout and "demo" in result.stdout


def _first_commit(path: str, endpoint_url: str, key: str) -> None:
    from datetime import UTC, datetime

    from s3events.events.model import ObjectEvent
    from s3events.events.record import EventRecord
    from s3events.metadata.table import MetadataTable

    now = datetime.now(UTC)
    options = aws.delta_storage_options(aws.AwsOptions(region="us-east-1", endpoint_url=endpoint_url))
    event = ObjectEvent(bucket="b", key=key, event_name="ObjectCreated:Put", event_time=now, size=1, etag=key)
    MetadataTable(path, storage_options=options).commit(
        [EventRecord(event=event, source="sqs", captured_at=now, message_id=key)], custom_metadata={}
    )


def test_writers_racing_to_create_the_table_make_one_create_commit(endpoint, s3):
    import multiprocessing

    s3.create_bucket(Bucket="race-create")
    path = "s3://race-create/metadata"
    ctx = multiprocessing.get_context("spawn")  # deltalake must not run in a fork()ed child
    procs = [ctx.Process(target=_first_commit, args=(path, endpoint.url, f"k{n}")) for n in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]

    options = aws.delta_storage_options(aws.AwsOptions(region="us-east-1", endpoint_url=endpoint.url))
    history = DeltaTable(path, storage_options=options).history()
    operations = [h["operation"] for h in sorted(history, key=lambda h: h["version"])]
    assert operations.count("CREATE TABLE") == 1 and operations[0] == "CREATE TABLE"
    assert sorted(r["key"] for r in read_table(path, options)) == ["k0", "k1", "k2", "k3"]
