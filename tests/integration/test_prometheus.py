"""The metrics, alert rules and dashboard against a real Prometheus (Debian's `prometheus` package).

One Prometheus on 127.0.0.1 scrapes a `s3events capture --continuous` and an `s3events ingest
--continuous` (child processes, metrics on free ports) every second, with deploy/prometheus/prometheus.yml
rewritten to those ports and a copy of deploy/prometheus/alerts.yml whose stalled-capture alert waits
seconds instead of minutes (the shipped rules are not changed). Through Prometheus's HTTP API the test
checks that both targets are up, that the counters equal what the run did, that every rule evaluates
without error, that every query of deploy/grafana/s3events.json evaluates and names only metrics
Prometheus has, and that stopping capture while messages wait fires the stalled-capture alert.
Conditions are polled with generous deadlines: CI is a loaded 2-core machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from s3events.dev.local_endpoint import free_port
from tests.conftest import REPO, Stack, read_table, spark_env

pytestmark = [pytest.mark.integration, pytest.mark.process]

PROMETHEUS = shutil.which("prometheus")
DEPLOY = REPO / "deploy"
S3EVENTS = Path(sys.executable).with_name("s3events")
STALL_SECONDS, STALL_FOR = 30, "10s"  # the copy's stalled-capture threshold and `for:` (shipped: 600, 5m)
FILES, LINES = 4, 2
METRIC = re.compile(r"\bs3events_[a-z0-9_]+")


# The running children of this test and their logs: a wait fails as soon as one of them exits.
RUNNING: dict[subprocess.Popen[bytes], Path] = {}


def wait_for(condition: Callable[[], Any], what: str, *, deadline_seconds: float = 240.0) -> Any:
    """Poll until `condition()` is truthy and return it; the deadline only bounds a broken run."""
    deadline = time.monotonic() + deadline_seconds
    while not (result := condition()):
        for proc, log in RUNNING.items():
            if proc.poll() is not None:
                pytest.fail(f"{proc.args[:2]} exited ({proc.returncode}) before: {what}\n{log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"not reached in {deadline_seconds:.0f}s: {what}")
        time.sleep(0.5)
    return result


class PrometheusApi:
    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=30) as answer:
            doc = json.loads(answer.read())
        assert doc["status"] == "success", doc
        return doc["data"]

    def value(self, expr: str) -> float | None:
        """The value of a query that yields at most one sample (None: no sample)."""
        result = self.get("/api/v1/query", query=expr)["result"]
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def targets_up(self) -> set[str]:
        active = self.get("/api/v1/targets", state="active")["activeTargets"]
        return {t["labels"]["job"] for t in active if t["health"] == "up"}

    def alert(self, name: str) -> dict[str, Any] | None:
        alerts = [a for a in self.get("/api/v1/alerts")["alerts"] if a["labels"]["alertname"] == name]
        return alerts[0] if alerts else None

    def known_names(self) -> set[str]:
        """Series names Prometheus holds, and the metric families it saw (HELP/TYPE without samples; a
        counter's family is named without `_total`)."""
        names = set(self.get("/api/v1/label/__name__/values"))
        return names | set(self.get("/api/v1/metadata"))


def _rules_copy(directory: Path) -> Path:
    doc = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text(encoding="utf-8"))
    (stalled,) = [r for g in doc["groups"] for r in g["rules"] if r["alert"] == "S3eventsCaptureStalled"]
    assert "> 600" in stalled["expr"] and stalled["for"] == "5m", stalled
    stalled["expr"] = stalled["expr"].replace("> 600", f"> {STALL_SECONDS}")
    stalled["for"] = STALL_FOR
    path = directory / "alerts.yml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _config(directory: Path, ports: dict[str, int]) -> Path:
    """deploy/prometheus/prometheus.yml with each job pointed at the test's port, scraped every second."""
    doc = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text(encoding="utf-8"))
    doc["global"] = {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
    doc["rule_files"] = [str(_rules_copy(directory))]
    jobs = {job["job_name"]: job for job in doc["scrape_configs"]}
    assert set(jobs) == {f"s3events-{name}" for name in ports}, jobs
    for name, port in ports.items():
        jobs[f"s3events-{name}"]["static_configs"] = [{"targets": [f"127.0.0.1:{port}"]}]
    path = directory / "prometheus.yml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Child processes a test started (each leads its process group); whatever still runs is killed."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    RUNNING.clear()
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)


def _start(command: list[str], log: Path, children: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=log.open("wb"), env=spark_env(), start_new_session=True
    )
    children.append(proc)
    RUNNING[proc] = log
    return proc


def _prometheus(
    tmp_path: Path, ports: dict[str, int], children: list[subprocess.Popen[bytes]]
) -> PrometheusApi:
    if PROMETHEUS is None:
        pytest.skip(
            "prometheus not installed (Debian: apt-get install prometheus; CI installs it in .ci/run)"
        )
    port = free_port()
    command = [
        PROMETHEUS,
        f"--config.file={_config(tmp_path, ports)}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    _start(command, tmp_path / "prometheus.log", children)
    api = PrometheusApi(f"http://127.0.0.1:{port}")

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"{api.url}/-/ready", timeout=5) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    wait_for(ready, "Prometheus ready")
    return api


def _s3events(
    command: str, stack: Stack, port: int, tmp_path: Path, children: list[Any], **conf: object
) -> Any:
    pairs = stack.conf(metrics__port=port, log__format="json", **conf)
    args = [str(S3EVENTS), command, "--continuous", "--min-sync-interval-seconds", "1"]
    return _start(
        [*args, *[a for kv in pairs for a in ("--conf", kv)]], tmp_path / f"{command}.log", children
    )


def _land(stack: Stack, s3: Any, prefix: str, files: int) -> None:
    for i in range(files):
        body = "".join(json.dumps({"file": i, "n": n}) + "\n" for n in range(LINES))
        s3.put_object(Bucket=stack.bucket, Key=f"{prefix}/{i}.json", Body=body.encode())


def test_prometheus_scrapes_both_processes_evaluates_rules_and_dashboard_and_fires_a_stalled_capture(
    make_stack, s3, sqs, tmp_path, children
):
    stack = make_stack()
    sqs.purge_queue(QueueUrl=stack.queue_url)  # the s3:TestEvent of the notification set-up
    ports = {"capture": free_port(), "ingest": free_port()}
    prometheus = _prometheus(tmp_path, ports, children)
    target = str(tmp_path / "orders")
    backfill = {"backfill__sources": f"s3://{stack.bucket}", "backfill__interval__seconds": 3600}
    capture = _s3events("capture", stack, ports["capture"], tmp_path, children, **backfill)
    orders = {"ingest__targets": "orders", "ingest__target__orders__path": target}
    orders["ingest__target__orders__format"] = "json"
    _s3events("ingest", stack, ports["ingest"], tmp_path, children, spark__master="local[1]", **orders)
    wait_for(lambda: prometheus.targets_up() == {"s3events-capture", "s3events-ingest"}, "both targets up")
    # capture's periodic backfill lists the empty bucket first: what lands next comes through SQS only
    wait_for(lambda: prometheus.value("s3events_backfill_passes_total") == 1, "a backfill pass")

    _land(stack, s3, "in", FILES)

    _assert_counters_equal_the_run(prometheus, stack, target)
    _assert_rules_and_dashboard_evaluate(prometheus)
    _assert_stopping_capture_fires_the_stalled_alert(prometheus, capture, stack, s3, sqs)


def _assert_counters_equal_the_run(prometheus: PrometheusApi, stack: Stack, target: str) -> None:
    ingested = 's3events_ingest_rows_total{target="orders"}'
    wait_for(lambda: prometheus.value(ingested) == FILES * LINES, f"{ingested} == {FILES * LINES}")
    wait_for(lambda: len(read_table(target)) == FILES * LINES, "the target table holds every line")
    metadata_version = DeltaTable(stack.metadata_path).version()
    c, i = "s3events_capture_", "s3events_ingest_"
    expected = {
        c + "events_written_total": len(read_table(stack.metadata_path)),
        c + "messages_received_total": FILES,
        c + "messages_deleted_total": FILES,
        c + "poison_quarantined_total": 0,
        c + "metadata_table_version": metadata_version,
        "s3events_backfill_objects_injected_total": 0,
        i + 'files_total{target="orders"}': FILES,
        i + 'error_rows_total{target="orders"}': 0,
        i + 'checkpoint_version{target="orders"}': metadata_version,
        i + 'lag_versions{target="orders"}': 0,
    }
    assert expected[c + "events_written_total"] == FILES
    # Prometheus scrapes every second: the gauges settle once ingest's next cycle finds it caught up.
    wait_for(lambda: {name: prometheus.value(name) for name in expected} == expected, f"the run's {expected}")


def _assert_rules_and_dashboard_evaluate(prometheus: PrometheusApi) -> None:
    groups = prometheus.get("/api/v1/rules")["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    doc = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text(encoding="utf-8"))
    shipped = [rule["alert"] for group in doc["groups"] for rule in group["rules"]]
    assert sorted(rule["name"] for rule in rules) == sorted(shipped), rules  # every shipped rule loaded
    assert all(rule["health"] == "ok" for rule in rules), rules
    # A scrape that times out on a loaded machine marks a target's series stale: a stalled alert may go
    # pending for a moment, but its `for:` keeps it from firing while the pipeline is healthy.
    assert not [rule for rule in rules if rule["state"] == "firing"], rules
    dashboard = json.loads((DEPLOY / "grafana" / "s3events.json").read_text(encoding="utf-8"))
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    known = prometheus.known_names()
    for expr in exprs:
        try:
            prometheus.get("/api/v1/query", query=expr)
        except urllib.error.HTTPError as exc:
            pytest.fail(f"Prometheus rejects {expr!r}: {exc.read().decode()}")
        names = set(METRIC.findall(expr))
        unknown = {
            n for n in names if n not in known and re.sub(r"_(bucket|count|sum|total)$", "", n) not in known
        }
        assert not unknown, (expr, sorted(unknown))


def _assert_stopping_capture_fires_the_stalled_alert(
    prometheus: PrometheusApi, capture: subprocess.Popen[bytes], stack: Stack, s3: Any, sqs: Any
) -> None:
    before = prometheus.alert("S3eventsCaptureStalled")
    assert before is None or before["state"] != "firing", before
    del RUNNING[capture]
    capture.send_signal(signal.SIGTERM)
    assert capture.wait(timeout=120) == 0
    stopped = time.time()
    _land(stack, s3, "late", 2)

    def waiting() -> int:
        names = ["ApproximateNumberOfMessages"]
        return int(
            sqs.get_queue_attributes(QueueUrl=stack.queue_url, AttributeNames=names)["Attributes"][names[0]]
        )

    wait_for(lambda: waiting() > 0, "messages waiting in the queue")
    seen: set[str] = set()

    def firing() -> dict[str, Any] | None:
        alert = prometheus.alert("S3eventsCaptureStalled")
        seen.add(alert["state"] if alert else "inactive")
        return alert if alert and alert["state"] == "firing" else None

    alert = wait_for(firing, "S3eventsCaptureStalled firing")
    assert "pending" in seen, seen  # its `for:` held it back first
    assert alert["labels"] == {
        "alertname": "S3eventsCaptureStalled",
        "severity": "critical",
    }  # the absent arm
    active_at = alert["activeAt"]
    assert active_at >= time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(stopped - 2)), (active_at, stopped)
    assert waiting() > 0  # nobody took them
