"""Recording flows' results into Prometheus metrics: what the exposition says equals what the results
said; SDK retries are counted by operation and bounded error code."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer

import boto3
import botocore.config
import botocore.exceptions
import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from s3events.capture.cycle import CycleResult
from s3events.ingest.cycle import BatchReport, IngestCycle, TargetProgress
from s3events.ingest.files import objects
from s3events.ingest.metrics import skip_kind
from s3events.ingest.model import Checkpoint
from s3events.maintenance.model import TableReport
from s3events.observe.aws_retries import watch_retries
from s3events.process_metrics import Metrics


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_two_processes_worth_of_metrics_live_side_by_side() -> None:
    first, second = Metrics(), Metrics()
    first.capture.record(CycleResult(received=2, written=2, deleted=2), now=1.0)
    second.capture.record(CycleResult(received=5, written=4, duplicates=1, deleted=5), now=2.0)
    assert samples(first)[("s3events_capture_messages_received_total", ())] == 2
    assert samples(second)[("s3events_capture_messages_received_total", ())] == 5


def test_an_idle_capture_cycle_is_a_success_but_counts_no_cycle() -> None:
    metrics = Metrics()
    metrics.capture.record(CycleResult(), now=1234.0)
    got = samples(metrics)
    assert got[("s3events_capture_last_success_timestamp_seconds", ())] == 1234.0
    assert got[("s3events_capture_cycles_total", ())] == 0
    assert got[("s3events_capture_cycle_duration_seconds_count", ())] == 0


def test_ingest_cycle_is_recorded_per_target_and_a_failed_target_keeps_its_last_success() -> None:
    metrics = Metrics()
    metrics.ingest.declare(["a", "b"])
    report = BatchReport(
        target="a",
        files=3,
        rows=10,
        errors=1,
        deleted=0,
        start=Checkpoint(),
        end=Checkpoint(4, 0),
        version=2,
        seconds=0.5,
        bytes=300,
        fast_path_files=2,
        skipped={"s3://b/k": objects.NOT_FOUND},
    )
    cycle = IngestCycle(
        batches=[report],
        failed={"b": "boom"},
        progress={"a": TargetProgress(4, 0, 0.0), "b": TargetProgress(1, 3, 42.5)},
    )
    metrics.ingest.record(cycle, now=99.0)
    got = samples(metrics)
    a, b = (("target", "a"),), (("target", "b"),)
    assert got[("s3events_ingest_files_total", a)] == 3
    assert got[("s3events_ingest_fast_path_files_total", a)] == 2
    assert got[("s3events_ingest_bytes_total", a)] == 300
    assert got[("s3events_ingest_error_rows_total", a)] == 1
    assert got[("s3events_ingest_skipped_files_total", (("kind", "missing"), ("target", "a")))] == 1
    assert got[("s3events_ingest_last_success_timestamp_seconds", a)] == 99.0
    assert ("s3events_ingest_last_success_timestamp_seconds", b) not in got
    assert got[("s3events_ingest_target_failures_total", b)] == 1
    assert got[("s3events_ingest_batches_total", b)] == 0  # declared: present before its first batch
    assert got[("s3events_ingest_lag_versions", b)] == 3 and got[("s3events_ingest_lag_seconds", b)] == 42.5


def test_skip_kinds_follow_the_readers_reasons() -> None:
    assert skip_kind(objects.NOT_FOUND) == "missing"
    assert skip_kind(objects.CHANGED) == "changed"
    assert skip_kind("access denied (403): ...") == "unreadable"


def test_maintenance_reports_count_passes_compactions_bytes_and_vacuumed_files() -> None:
    metrics = Metrics()
    metrics.maintenance.record(
        [
            TableReport("metadata", "/m", compacted_from=4, compacted_bytes=4000, vacuumed=3),
            TableReport("target:a", "/a", compacted_from=5, compaction_only=True, compacted_bytes=500),
            TableReport("target:b", "/b", error="disk full"),
            TableReport("quarantine", "/q", exists=False),
        ]
    )
    got = samples(metrics)
    assert got[("s3events_maintenance_passes_total", (("kind", "full"), ("table", "metadata")))] == 1
    assert got[("s3events_maintenance_passes_total", (("kind", "compaction"), ("table", "target:a")))] == 1
    assert got[("s3events_maintenance_files_compacted_total", (("table", "metadata"),))] == 4
    assert got[("s3events_maintenance_bytes_rewritten_total", (("table", "target:a"),))] == 500
    assert got[("s3events_maintenance_files_vacuumed_total", (("table", "metadata"),))] == 3
    assert got[("s3events_maintenance_failures_total", (("table", "target:b"),))] == 1


class _Unavailable(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = b'{"__type": "com.amazonaws.sqs#ServiceUnavailable", "message": "try later"}'
        self.send_response(503)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("x-amzn-query-error", "ServiceUnavailable;Receiver")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def unavailable_endpoint() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Unavailable)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_sdk_retries_are_counted_by_operation_and_code_and_the_last_attempt_is_not(unavailable_endpoint):
    client = boto3.Session(region_name="us-east-1").client(
        "sqs",
        endpoint_url=unavailable_endpoint,
        config=botocore.config.Config(retries={"mode": "standard", "max_attempts": 1}),
    )
    metrics = Metrics()
    stop = watch_retries(client, metrics.capture.record_retry)
    with pytest.raises(botocore.exceptions.ClientError):
        client.get_queue_url(QueueName="q")  # 2 attempts, both 503: one retry
    stop()
    with pytest.raises(botocore.exceptions.ClientError):
        client.get_queue_url(QueueName="q")  # not watched any more
    got = samples(metrics)
    labels = (("code", "ServiceUnavailable"), ("operation", "GetQueueUrl"))
    assert got[("s3events_capture_aws_retries_total", labels)] == 1


def test_rescued_rows_and_ignored_fields_are_counted_per_target_and_in_the_batch_log_line() -> None:
    metrics = Metrics()
    metrics.ingest.declare(["t"])
    assert samples(metrics)[("s3events_ingest_rescued_rows_total", (("target", "t"),))] == 0
    start, end = Checkpoint(0, 0), Checkpoint(1, 0)
    report = BatchReport("t", 1, 5, 0, 0, start, end, 3, 0.1, rescued=2, ignored_fields=1)
    metrics.ingest.record(IngestCycle(batches=[report, report]), now=1.0)
    got = samples(metrics)
    assert got[("s3events_ingest_rescued_rows_total", (("target", "t"),))] == 4
    assert got[("s3events_ingest_ignored_fields_total", (("target", "t"),))] == 2
    assert "rescued=2 ignored_fields=1 " in report.log_line()
    assert "rescued" not in replace(report, rescued=0, ignored_fields=0).log_line()
