"""The shipped alert rules and dashboard: each rule has the fields Prometheus's rule-file format requires,
every expression names only metrics s3events exports, and Prometheus's own `promtool` accepts the rule
file and passes its unit tests (deploy/prometheus/alerts.test.yml), which cover every alert firing and
not firing. promtool comes from Debian's `prometheus` package; CI installs it (.ci/run)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from s3events.process_metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
ALERT_TESTS = ROOT / "deploy" / "prometheus" / "alerts.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "s3events.json"
# prometheus_client also exposes each counter's and histogram's creation time as <name>_created.
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gauge": ("",),
}
_DURATION = re.compile(r"\d+(ms|s|m|h|d|w|y)")
_METRIC = re.compile(r"\bs3events_[a-z0-9_]+")


def exported_names() -> set[str]:
    """Every series name the metrics of all flows expose (labelled ones included before their first use)."""
    metrics = Metrics()
    for group in (metrics.capture, metrics.ingest, metrics.backfill, metrics.maintenance, metrics.catalog):
        assert group is not None
    return {
        family.name + suffix for family in metrics.registry.collect() for suffix in _SUFFIXES[family.type]
    }


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_every_exported_name_follows_prometheus_naming() -> None:
    for name in exported_names():
        assert re.fullmatch(r"s3events_[a-z]+_[a-z0-9_]+", name), name
        assert not name.endswith("_total") or "_seconds" not in name, name


def test_alert_rule_file_has_named_groups_of_alerting_rules() -> None:
    doc = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    names = [group["name"] for group in doc["groups"]]
    assert names and len(names) == len(set(names))
    alerts = [rule["alert"] for rule in rules()]
    assert len(alerts) == len(set(alerts))
    for rule in rules():
        assert set(rule) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}, rule
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", rule["alert"])
        assert isinstance(rule["expr"], str) and rule["expr"].strip()
        assert "for" not in rule or _DURATION.fullmatch(rule["for"]), rule["for"]
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}
        assert rule["annotations"]["summary"]
        assert rule["expr"].count("(") == rule["expr"].count(")")


@pytest.mark.parametrize("rule", rules(), ids=lambda r: r["alert"])
def test_alert_expressions_name_only_exported_metrics(rule: dict[str, Any]) -> None:
    used = set(_METRIC.findall(rule["expr"]))
    assert used, rule["expr"]
    assert used <= exported_names(), sorted(used - exported_names())


def test_the_rules_cover_lag_stalls_quarantine_error_rows_and_retries() -> None:
    used = {name for rule in rules() for name in _METRIC.findall(rule["expr"])}
    assert {
        "s3events_ingest_lag_seconds",
        "s3events_capture_last_success_timestamp_seconds",
        "s3events_ingest_last_success_timestamp_seconds",
        "s3events_capture_poison_quarantined_total",
        "s3events_ingest_error_rows_total",
        "s3events_capture_aws_retries_total",
    } <= used


def test_dashboard_queries_name_only_exported_metrics() -> None:
    exprs = dashboard_exprs()
    assert exprs
    used = {name for expr in exprs for name in _METRIC.findall(expr)}
    assert used <= exported_names(), sorted(used - exported_names())


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool not installed (Debian: apt-get install prometheus; CI installs it in .ci/run)")
    return found


def test_promtool_accepts_the_rule_file() -> None:
    done = subprocess.run(
        [promtool(), "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules())} rules found" in done.stdout


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    done = subprocess.run(
        [promtool(), "test", "rules", ALERT_TESTS.name],
        cwd=ALERT_TESTS.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_unit_tests_that_fire_it_and_that_must_not() -> None:
    doc = yaml.safe_load(ALERT_TESTS.read_text(encoding="utf-8"))
    assert doc["rule_files"] == [ALERTS.name]
    checks = [check for test in doc["tests"] for check in test.get("alert_rule_test", [])]
    fired = {check["alertname"] for check in checks if check.get("exp_alerts")}
    quiet = {check["alertname"] for check in checks if not check.get("exp_alerts")}
    alerts = {rule["alert"] for rule in rules()}
    assert fired == alerts, sorted(alerts - fired)
    assert quiet == alerts, sorted(alerts - quiet)
