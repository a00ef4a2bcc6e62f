"""The metrics say what a run did: capture on the local moto endpoint, ingest on known files, a backfill
pass, and the real /metrics endpoint of a running `s3events capture --continuous`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from s3events.backfill.run import run_backfill
from s3events.capture.service import run_capture
from s3events.config import load_settings
from s3events.dev.local_endpoint import free_port
from s3events.ingest.service import run_ingest
from s3events.observe.server import serve
from s3events.process_metrics import Metrics
from tests.conftest import Stack, write_metadata_version

pytestmark = pytest.mark.integration

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """Every sample as (name, sorted labels) -> value."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(registry: CollectorRegistry) -> Samples:
    return parse(generate_latest(registry).decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def wait_for(condition: Callable[[], bool], *, deadline_seconds: float = 120.0) -> None:
    """Poll a condition until it holds; the deadline only bounds a broken run."""
    deadline = time.monotonic() + deadline_seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.2)


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def test_capture_metrics_count_the_messages_events_duplicates_and_poison_of_the_run(make_stack, s3, sqs):
    stack = make_stack()
    sqs.purge_queue(QueueUrl=stack.queue_url)  # the s3:TestEvent of the notification set-up
    for n in range(5):
        s3.put_object(Bucket=stack.bucket, Key=f"in/{n}.json", Body=b"{}")
    wait_for(lambda: _visible(sqs, stack.queue_url) == 5)
    redelivered = sqs.receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=1, VisibilityTimeout=0)
    sqs.send_message(QueueUrl=stack.queue_url, MessageBody=redelivered["Messages"][0]["Body"])
    sqs.send_message(QueueUrl=stack.queue_url, MessageBody="not json at all")
    sqs.send_message(QueueUrl=stack.queue_url, MessageBody=json.dumps({"Event": "s3:TestEvent"}))
    settings = load_settings(None, stack.conf())
    metrics = Metrics()

    totals = run_capture(settings, once=True, metrics=metrics)

    got = scrape(metrics.registry)
    c = "s3events_capture_"
    assert value(got, c + "messages_received_total") == 8 == totals.received
    assert value(got, c + "events_written_total") == 5
    assert value(got, c + "duplicates_dropped_total") == 1
    assert value(got, c + "poison_quarantined_total") == 1
    assert value(got, c + "test_events_total") == 1
    assert value(got, c + "messages_deleted_total") == 8
    assert value(got, c + "messages_delete_failed_total") == 0
    assert value(got, c + "commit_conflicts_total") == 0
    assert value(got, c + "messages_in_hand") == 0
    assert value(got, c + "metadata_table_version") == totals.table_version
    assert value(got, c + "cycles_total") == value(got, c + "cycle_duration_seconds_count") >= 1
    assert value(got, c + "commit_duration_seconds_count") == value(got, c + "cycles_total")
    assert value(got, c + "last_success_timestamp_seconds") > 0
    assert not [name for name, _ in got if name.startswith("s3events_ingest_")]


def _visible(sqs: Any, queue_url: str) -> int:
    attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attrs["Attributes"]["ApproximateNumberOfMessages"])


def _settings(stack: Stack, **extra: object) -> Any:
    settings = load_settings(None, stack.conf(**extra))
    return settings


def test_ingest_metrics_count_files_rows_bytes_errors_and_skips_per_target(make_stack, s3, spark, tmp_path):
    stack = make_stack()
    bodies = {
        "j/a.json": jsonl([{"x": 1}, {"x": 2}, {"x": 3}]),
        "j/b.json": jsonl([{"x": 4}]) + b'{"x": 5, cut off\n',
        "j/gone.json": jsonl([{"x": 6}]),
        "c/r.csv": b"k,v\na,1\nb,2\n",
    }
    for key, body in bodies.items():
        s3.put_object(Bucket=stack.bucket, Key=key, Body=body)
    run_capture(_settings(stack), once=True)
    s3.delete_object(Bucket=stack.bucket, Key="j/gone.json")  # deleted before ingest reads it
    metadata_version = run_capture(_settings(stack), once=True).table_version
    conf = {
        "ingest__targets": "orders,readings",
        "ingest__target__orders__path": str(tmp_path / "orders"),
        "ingest__target__orders__format": "json",
        "ingest__target__orders__glob": "**/*.json",
        "ingest__target__readings__path": str(tmp_path / "readings"),
        "ingest__target__readings__format": "csv",
        "ingest__target__readings__glob": "**/*.csv",
        "ingest__target__readings__reader__options": "header=true",
    }
    settings = _settings(stack, **conf)
    settings.validate_for("ingest")
    metrics = Metrics()

    totals = run_ingest(settings, once=True, spark=spark, metrics=metrics)

    got = scrape(metrics.registry)
    i = "s3events_ingest_"
    orders, readings = {"target": "orders"}, {"target": "readings"}
    assert value(got, i + "files_total", **orders) == 3  # a, b and the deleted one
    assert value(got, i + "rows_total", **orders) == 4
    assert value(got, i + "error_rows_total", **orders) == 2  # b's cut-off line, the missing file
    assert value(got, i + "bytes_total", **orders) == sum(len(b) for k, b in bodies.items() if ".json" in k)
    assert value(got, i + "skipped_files_total", target="orders", kind="missing") == 1
    assert value(got, i + "fast_path_files_total", **orders) == 1  # a.json; b.json has a bad line
    assert value(got, i + "files_total", **readings) == 1
    assert value(got, i + "rows_total", **readings) == 2
    assert value(got, i + "fast_path_files_total", **readings) == 1  # a clean CSV file
    assert value(got, i + "rows_total", **orders) + value(got, i + "rows_total", **readings) == totals.rows
    for target in (orders, readings):
        batches = value(got, i + "batches_total", **target)
        assert batches == value(got, i + "batch_duration_seconds_count", **target) >= 1
        assert value(got, i + "checkpoint_version", **target) == metadata_version
        assert value(got, i + "lag_versions", **target) == 0
        assert value(got, i + "lag_seconds", **target) == 0
        assert value(got, i + "target_failures_total", **target) == 0
        assert value(got, i + "last_success_timestamp_seconds", **target) > 0


def test_backfill_metrics_count_listed_known_and_injected_objects(make_stack, s3):
    stack = make_stack()
    for key in ("known.json", "late/1.json", "late/2.json"):
        s3.put_object(Bucket=stack.bucket, Key=key, Body=b"{}")
    write_metadata_version(stack, ["known.json"], s3)
    settings = _settings(stack, backfill__sources=f"s3://{stack.bucket}")
    settings.validate_for("backfill")
    metrics = Metrics()

    report = run_backfill(settings, metrics=metrics)

    got = scrape(metrics.registry)
    b = "s3events_backfill_"
    assert value(got, b + "passes_total") == 1 == value(got, b + "pass_duration_seconds_count")
    assert value(got, b + "objects_listed_total") == 3
    assert value(got, b + "objects_already_known_total") == 1
    assert value(got, b + "objects_injected_total") == 2
    assert report.completed_at is not None
    assert value(got, b + "last_complete_pass_timestamp_seconds") == report.completed_at


def test_the_http_endpoint_serves_what_a_run_recorded(make_stack, s3, sqs):
    stack = make_stack()
    sqs.purge_queue(QueueUrl=stack.queue_url)
    s3.put_object(Bucket=stack.bucket, Key="one.json", Body=b"{}")
    metrics = Metrics()
    server = serve(metrics, host="127.0.0.1", port=free_port())
    try:
        run_capture(_settings(stack), once=True, metrics=metrics)
        with urllib.request.urlopen(server.url, timeout=10) as answer:
            assert answer.status == 200
            got = parse(answer.read().decode())
    finally:
        server.close()
    assert value(got, "s3events_capture_events_written_total") == 1


def test_a_continuous_capture_process_serves_metrics_and_logs_json_lines(make_stack, s3, sqs, tmp_path):
    stack = make_stack()
    sqs.purge_queue(QueueUrl=stack.queue_url)
    port = free_port()
    conf = stack.conf(metrics__port=port, log__format="json")
    log_path = tmp_path / "capture.log"
    exe = Path(sys.executable).with_name("s3events")
    proc = subprocess.Popen(
        [str(exe), "capture", "--continuous", *[a for kv in conf for a in ("--conf", kv)]],
        stdout=subprocess.DEVNULL,
        stderr=log_path.open("wb"),
        env=os.environ.copy(),
    )
    try:
        for n in range(3):
            s3.put_object(Bucket=stack.bucket, Key=f"live/{n}.json", Body=b"{}")
        wait_for(lambda: _written(port) == 3)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
    lines = log_path.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    cycles = [r for r in records if r["message"].startswith("capture cycle:")]
    assert sum(r["written"] for r in cycles) == 3


def _written(port: int) -> float:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            got = parse(answer.read().decode())
    except OSError:  # not listening yet
        return -1
    return got.get(("s3events_capture_events_written_total", ()), -1)
