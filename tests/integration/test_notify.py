"""Commit notifications on the local endpoint: one message per data commit, at least once, in version
order; a kill between a commit and its announcement announces exactly the missing versions after the
restart; a destination that cannot be reached never stops ingest (and `status` says so)."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from deltalake import DeltaTable

from s3events.ingest.cycle import Ingest
from s3events.ingest.notify.announce import announcers
from s3events.ingest.notify.model import SUMMARY_KEY
from s3events.ingest.service import ingest_ports, run_ingest
from s3events.process_metrics import Metrics
from s3events.status.gather import gather_status
from tests.conftest import write_metadata_version
from tests.integration.test_ingest import jsonl, settings_for, target_conf
from tests.integration.test_ingest_crash_points import Killed, _KilledAfter

pytestmark = [pytest.mark.integration]

FILES = 6


@pytest.fixture
def landed(make_stack, s3):
    """A metadata version of FILES files, each 2 good lines and 1 malformed."""
    stack = make_stack()
    keys = [f"orders/{i:02d}.json" for i in range(FILES)]
    for i, key in enumerate(keys):
        s3.put_object(
            Bucket=stack.bucket, Key=key, Body=jsonl([{"file": i, "n": 0}, {"file": i, "n": 1}]) + b"{x\n"
        )
    write_metadata_version(stack, keys, s3)
    return stack


def make_queue(sqs: Any) -> tuple[str, str]:
    url = sqs.create_queue(QueueName=f"commits-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Every message the queue holds now (moto delivers during the send), deleted as read."""
    bodies = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        bodies.extend(json.loads(m["Body"]) for m in batch)
        for m in batch:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return bodies


def data_versions(path: str) -> list[int]:
    """The target's versions that hold a batch (what must be announced)."""
    return sorted(h["version"] for h in DeltaTable(path).history() if SUMMARY_KEY in h)


def conf_for(stack, path: str, *, extra: dict[str, object] | None = None, **notify: object) -> Any:
    target = target_conf(
        "o", path, "json", schema="file BIGINT, n BIGINT", max__files__per__batch=2, **notify
    )
    return settings_for(stack, {"o": target}, **(extra or {}))


@pytest.mark.chaos
def test_a_kill_between_commit_and_announcement_announces_exactly_the_missing_version(
    landed, sqs, spark, tmp_path
):
    url, _ = make_queue(sqs)
    path = str(tmp_path / "orders")
    conf = conf_for(landed, path, notify__sqs__queue__url=url)
    # first process: one batch committed and announced, the next committed, then killed before announcing
    ports = ingest_ports(conf, spark=spark)
    notify = announcers(conf, ports.targets)
    Ingest(ports.feed, ports.targets, read=ports.read).run_once()
    notify.announce()
    (target,) = ports.targets
    killed = [replace(target, table=_KilledAfter(target.table, "commit_append"))]
    with contextlib.suppress(Killed):
        Ingest(ports.feed, killed, read=ports.read).run_once()
    before = drain(sqs, url)
    assert [m["version"] for m in before] == data_versions(path)[:1]

    # the restart: announces the version the kill left out, then goes on
    run_ingest(conf, once=True, spark=spark)

    after = drain(sqs, url)
    everything = Counter(m["version"] for m in before + after)
    assert everything == Counter(dict.fromkeys(data_versions(path), 1))  # each exactly once
    assert [m["version"] for m in after] == sorted(m["version"] for m in after)  # in version order
    assert sum(m["rows"] for m in before + after) == 2 * FILES
    assert sum(m["error_rows"] for m in before + after) == FILES
    assert {(m["path"], m["table_id"]) for m in before + after} == {(path, DeltaTable(path).metadata().id)}
    assert after[-1]["checkpoint"]["metadata_version"] == DeltaTable(landed.metadata_path).version()


def test_sns_and_eventbridge_get_every_commit(landed, sqs, aws_options, spark, tmp_path):
    from s3events.infra import aws

    sns, events = aws.client(aws_options, "sns"), aws.client(aws_options, "events")
    topic = sns.create_topic(Name=f"commits-{uuid.uuid4().hex[:8]}")["TopicArn"]
    via_sns, via_sns_arn = make_queue(sqs)
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=via_sns_arn, Attributes={"RawMessageDelivery": "true"}
    )
    bus = f"lake-{uuid.uuid4().hex[:8]}"
    events.create_event_bus(Name=bus)
    via_bus, via_bus_arn = make_queue(sqs)
    events.put_rule(Name="commits", EventBusName=bus, EventPattern=json.dumps({"source": ["s3events"]}))
    events.put_targets(Rule="commits", EventBusName=bus, Targets=[{"Id": "q", "Arn": via_bus_arn}])
    path = str(tmp_path / "orders")
    conf = conf_for(landed, path, notify__sns__topic__arn=topic, notify__eventbridge__bus__name=bus)

    metrics = Metrics()
    run_ingest(conf, once=True, spark=spark, metrics=metrics)

    expected = data_versions(path)
    assert [m["version"] for m in drain(sqs, via_sns)] == expected
    assert [m["detail"]["version"] for m in drain(sqs, via_bus)] == expected
    published = metrics.registry.get_sample_value(
        "s3events_ingest_notify_published_total", {"target": "o", "destination": "sns"}
    )
    assert published == len(expected)


@pytest.mark.chaos
def test_an_unreachable_topic_does_not_stop_ingest_and_gets_every_commit_once_it_is_back(
    landed, sqs, aws_options, spark, tmp_path
):
    from s3events.infra import aws

    path = str(tmp_path / "orders")
    name = f"later-{uuid.uuid4().hex[:8]}"
    topic = f"arn:aws:sns:us-east-1:123456789012:{name}"  # the local endpoint's account; not created yet
    conf = conf_for(
        landed, path, notify__sns__topic__arn=topic, extra={"ingest__notify__max__lag__versions": 1}
    )

    metrics = Metrics()
    totals = run_ingest(conf, once=True, spark=spark, metrics=metrics)

    assert totals.rows == 2 * FILES and not totals.failed  # every batch committed
    assert len(data_versions(path)) == FILES // 2
    failures = metrics.registry.get_sample_value(
        "s3events_ingest_notify_failures_total", {"target": "o", "destination": "sns"}
    )
    assert failures is not None and failures >= 1
    status = gather_status(conf, now=datetime.now(UTC))
    assert status.exit_code == 1
    assert any("o: " in p and "not announced" in p for p in status.problems), status.problems

    # the topic exists now: the next run (nothing left to ingest) announces every commit, in order
    sns = aws.client(aws_options, "sns")
    assert sns.create_topic(Name=name)["TopicArn"] == topic
    queue, queue_arn = make_queue(sqs)
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"}
    )
    run_ingest(conf, once=True, spark=spark)

    assert [m["version"] for m in drain(sqs, queue)] == data_versions(path)
    after = gather_status(conf, now=datetime.now(UTC)).problems
    assert not any("not announced" in p for p in after), after  # the backlog's end is recorded
