"""`s3events status` against moto_server, local Spark and real delta-rs tables, through the real command."""

from __future__ import annotations

import json
from typing import Any

import pytest
from deltalake import DeltaTable

from s3events.capture.service import run_capture
from s3events.config import load_settings
from s3events.ingest.files.transform import TransformSpec
from s3events.ingest.files.transform_sql import statements
from s3events.ingest.model import Checkpoint
from s3events.ingest.progress import pending_after
from s3events.ingest.service import run_ingest
from tests.conftest import Stack, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.process]


def _conf_args(pairs: list[str]) -> list[str]:
    return [arg for kv in pairs for arg in ("--conf", kv)]


def _two_targets(stack: Stack, tmp_path: Any, **extra: object) -> list[str]:
    return stack.conf(
        ingest__targets="a,b",
        ingest__target__a__path=tmp_path / "a",
        ingest__target__a__format="json",
        ingest__target__a__key__prefix="a/",
        ingest__target__b__path=tmp_path / "b",
        ingest__target__b__format="json",
        ingest__target__b__key__prefix="b/",
        **extra,
    )


def _status_json(conf: list[str]) -> tuple[int, dict[str, Any]]:
    result = run_cli(["status", "--json", *_conf_args(conf)])
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


def test_one_target_ingested_and_one_not_with_messages_waiting_is_reported_and_fails_a_zero_lag_check(
    make_stack, s3, sqs, spark, tmp_path
):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="a/1.json", Body=b'{"x": 1}\n{"x": 2}\n{broken\n')
    s3.put_object(Bucket=stack.bucket, Key="b/1.json", Body=b'{"y": 1}\n')
    sqs.send_message(QueueUrl=stack.queue_url, MessageBody="not an S3 event")  # poison → quarantine
    conf = _two_targets(stack, tmp_path)
    run_capture(load_settings(None, conf), once=True)
    settings = load_settings(None, conf)
    settings.validate_for("ingest")
    totals = run_ingest(settings, once=True, targets=("a",), spark=spark)
    assert not totals.failed
    for n in range(3):  # captured by nobody: they wait in the queue
        s3.put_object(Bucket=stack.bucket, Key=f"a/later-{n}.json", Body=b'{"x": 9}\n')
    metadata_version = DeltaTable(stack.metadata_path).version()

    code, doc = _status_json([*conf, "s3events.status.max.lag.seconds=0"])

    assert code == 1 and doc["healthy"] is False
    assert doc["queue"] == {"url": stack.queue_url, "visible": 3, "in_flight": 0, "error": None}
    assert doc["metadata"]["exists"] and doc["metadata"]["version"] == metadata_version >= 1
    assert doc["metadata"]["rows"] == 2 and doc["metadata"]["last_commit_at"].endswith("Z")
    assert doc["quarantine"]["rows"] == 1
    a, b = doc["targets"]
    assert (a["name"], a["checkpoint"]) == ("a", {"version": metadata_version, "position": 0})
    assert (a["lag_versions"], a["lag_seconds"], a["lagging"]) == (0, 0.0, False)
    assert (a["table"]["rows"], a["error_table"]["rows"]) == (2, 1)
    assert a["last_error"]["error"] == "not valid JSON"
    assert (a["last_error"]["file"], a["last_error"]["line"]) == (f"s3://{stack.bucket}/a/1.json", 3)
    assert (b["name"], b["checkpoint"], b["table"]["exists"]) == ("b", None, False)
    # version 0 is the empty CREATE: the oldest version holding a file routed to b is 1
    assert b["lag_versions"] == metadata_version and b["oldest_pending_version"] == 1
    assert b["lag_seconds"] > 0 and b["lagging"] is True and b["last_error"] is None
    assert len(doc["problems"]) == 1 and doc["problems"][0].startswith("target b:")

    relaxed = [*conf, "s3events.status.max.lag.seconds=86400"]
    code, doc = _status_json(relaxed)
    assert code == 0 and doc["healthy"] is True and doc["problems"] == []
    assert [t["lag_versions"] for t in doc["targets"]] == [0, metadata_version]

    text = run_cli(["status", *_conf_args(relaxed)])
    assert text.returncode == 0, text.stderr
    assert "healthy" in text.stdout and "visible 3" in text.stdout
    rows = {line.split()[0]: line.split() for line in text.stdout.splitlines() if line[:2] in ("a ", "b ")}
    assert rows["a"][1:3] == [f"{metadata_version}:0", "0"]
    assert rows["b"][1:3] == ["-", str(metadata_version)]
    assert "not valid JSON" in text.stdout


def test_fresh_setup_without_tables_reports_they_do_not_exist_yet_and_exits_0(make_stack, tmp_path):
    stack = make_stack()
    conf = _two_targets(stack, tmp_path, status__max__lag__seconds=0)

    text = run_cli(["status", *_conf_args(conf)])
    code, doc = _status_json(conf)

    assert text.returncode == 0, text.stderr
    assert "metadata    does not exist yet" in text.stdout
    assert f"a: table {tmp_path / 'a'} does not exist yet" in text.stdout
    assert code == 0 and doc["problems"] == []
    assert doc["metadata"]["exists"] is False and doc["quarantine"]["exists"] is False
    assert doc["queue"]["visible"] == 1  # moto's s3:TestEvent, not yet captured
    assert [(t["checkpoint"], t["lag_versions"], t["lagging"]) for t in doc["targets"]] == [
        (None, 0, False),
        (None, 0, False),
    ]


def test_a_queue_that_does_not_exist_exits_1_naming_it(make_stack, tmp_path):
    stack = make_stack()
    missing = stack.queue_url + "-gone"
    conf = [*stack.conf(), f"s3events.source.queue.url={missing}"]

    code, doc = _status_json(conf)

    assert code == 1
    assert doc["queue"]["url"] == missing and "does not exist" in doc["queue"]["error"]
    assert doc["problems"] == [f"queue {missing}: cannot read its depth: {doc['queue']['error']}"]


def test_a_checkpoint_inside_a_version_still_lags_and_a_caught_up_one_does_not():
    assert pending_after(Checkpoint(3, 2), 5) == 4
    assert pending_after(Checkpoint(4, 1), 5) == 5
    assert pending_after(Checkpoint(5, 0), 5) is None
    assert pending_after(None, 5) == 0
    assert pending_after(None, 5, start_latest=True) is None
    assert pending_after(None, -1) is None  # no metadata table yet


def test_a_quiet_target_whose_routes_saw_nothing_new_is_not_lagging(make_stack, s3, spark, tmp_path):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="a/1.json", Body=b'{"x": 1}\n')
    s3.put_object(Bucket=stack.bucket, Key="b/1.json", Body=b'{"y": 1}\n')
    conf = _two_targets(stack, tmp_path)
    settings = load_settings(None, conf)
    settings.validate_for("ingest")
    run_capture(settings, once=True)
    run_ingest(settings, once=True, spark=spark)
    s3.put_object(Bucket=stack.bucket, Key="a/2.json", Body=b'{"x": 2}\n')  # only a's prefix moves on
    run_capture(settings, once=True)
    run_ingest(settings, once=True, spark=spark)

    code, doc = _status_json([*conf, "s3events.status.max.lag.seconds=0"])

    a, b = doc["targets"]
    assert b["checkpoint"]["version"] < a["checkpoint"]["version"]  # b's stored checkpoint is older
    assert (b["lag_seconds"], b["lagging"], b["oldest_pending_version"]) == (0.0, False, None)
    assert code == 0 and doc["healthy"] is True


def test_messages_waiting_beside_a_metadata_table_idle_for_too_long_report_capture_as_stalled(
    make_stack, s3, tmp_path
):
    from datetime import UTC, datetime, timedelta

    from s3events.status.gather import gather_status

    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="a/1.json", Body=b'{"x": 1}\n')
    conf = _two_targets(stack, tmp_path, status__max__capture__stall__seconds=900)
    run_capture(load_settings(None, conf), once=True)  # capture ran once, then died
    for n in range(2):
        s3.put_object(Bucket=stack.bucket, Key=f"a/later-{n}.json", Body=b'{"x": 9}\n')
    settings = load_settings(None, conf)

    soon = gather_status(settings, now=datetime.now(UTC))
    later = gather_status(settings, now=datetime.now(UTC) + timedelta(hours=1))

    assert not [p for p in soon.problems if p.startswith("capture:")]
    stalled = [p for p in later.problems if p.startswith("capture:")]
    assert len(stalled) == 1 and later.exit_code == 1
    assert stalled[0].startswith("capture: 2 message(s) wait in the queue and the last commit was")
    assert "s3events.status.max.capture.stall.seconds" in stalled[0]


def test_a_transformed_target_shows_its_sql_identity_and_the_rows_its_last_batch_filtered(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="t/1.json", Body=b'{"id": 1}\n{"id": null}\n{"id": 3}\n')
    sql = "SELECT id FROM src WHERE id IS NOT NULL"
    conf = stack.conf(
        ingest__targets="t",
        ingest__target__t__path=tmp_path / "t",
        ingest__target__t__format="json",
        ingest__target__t__transform__sql=sql,
    )
    run_capture(load_settings(None, conf), once=True)
    settings = load_settings(None, conf)
    settings.validate_for("ingest")
    assert run_ingest(settings, once=True, spark=spark).filtered == 1
    relaxed = [*conf, "s3events.status.max.lag.seconds=86400"]

    _, doc = _status_json(relaxed)

    [target] = doc["targets"]
    identity = TransformSpec("any", tuple(statements(sql))).identity
    assert target["transform"] == {
        "identity": identity,
        "rows_filtered": 1,
        "version": DeltaTable(str(tmp_path / "t")).version(),
        "error": None,
    }
    text = run_cli(["status", *_conf_args(relaxed)])
    assert f"t: transform {identity}: the last batch (version" in text.stdout
    assert "filtered 1 row(s)" in text.stdout


def test_a_fail_mode_target_that_refused_a_new_field_is_named_with_why_until_a_batch_commits(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    conf = _two_targets(stack, tmp_path, ingest__target__a__schema__evolution="fail")
    relaxed = [*conf, "s3events.status.max.lag.seconds=86400"]  # lag alone is no problem here
    s3.put_object(Bucket=stack.bucket, Key="a/1.json", Body=b'{"id": 1}\n')
    run_capture(load_settings(None, conf), once=True)
    settings = load_settings(None, conf)
    settings.validate_for("ingest")
    run_ingest(settings, once=True, spark=spark)  # the first batch defines the table
    s3.put_object(Bucket=stack.bucket, Key="a/2.json", Body=b'{"id": 2}\n{"id": 3, "extra": true}\n')
    run_capture(load_settings(None, conf), once=True)
    assert set(run_ingest(settings, once=True, spark=spark).failed) == {"a"}

    code, doc = _status_json(relaxed)

    where = f"s3://{stack.bucket}/a/2.json line 2 has new field(s) extra"
    refused = {t["name"]: t["refused"] for t in doc["targets"]}
    assert code == 1 and refused["b"] is None and where in refused["a"]
    assert any(p.startswith("target a: failed: schema.evolution=fail: ") for p in doc["problems"])
    assert where in run_cli(["status", *_conf_args(relaxed)]).stdout

    added = [*conf, "s3events.ingest.target.a.schema.evolution=add"]
    settings = load_settings(None, added)
    settings.validate_for("ingest")
    assert not run_ingest(settings, once=True, spark=spark).failed
    code, doc = _status_json(relaxed)
    assert code == 0 and all(t["refused"] is None for t in doc["targets"])
