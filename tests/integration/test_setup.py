"""`s3events setup` / `setup --verify` / `teardown` as a user runs them, against the moto server.

moto delivers S3 notifications to SQS but does not evaluate queue policies (a Deny does not stop
delivery), so the policy link is exercised through verify's static check of the policy document.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from s3events.dev.local_endpoint import LocalEndpoint
from s3events.events.parse import parse_message
from tests.conftest import CliResult, run_cli

pytestmark = pytest.mark.integration

ACCOUNT = "123456789012"  # moto's


@dataclass
class NotificationPath:
    """One notification path to set up: a queue name, its buckets and the CLI arguments naming them."""

    endpoint_url: str
    queue: str
    buckets: list[str]
    prefix: str = "in/"

    @property
    def queue_url(self) -> str:
        return f"{self.endpoint_url}/{ACCOUNT}/{self.queue}"

    def conf(self, *extra: str) -> list[str]:
        pairs = [
            f"s3events.aws.endpoint.url={self.endpoint_url}",
            "s3events.aws.region=us-east-1",
            f"s3events.source.queue.url={self.queue_url}",
            f"s3events.setup.buckets={','.join(self.buckets)}",
            f"s3events.setup.prefixes={self.prefix}",
            "s3events.setup.verify.timeout.seconds=20",
            *extra,
        ]
        return [arg for pair in pairs for arg in ("--conf", pair)]

    def run(self, *args: str, extra: tuple[str, ...] = ()) -> CliResult:
        return run_cli([*args, *self.conf(*extra)])


@pytest.fixture
def make_path(endpoint: LocalEndpoint, s3: Any) -> Callable[..., NotificationPath]:
    def make(buckets: int = 1) -> NotificationPath:
        suffix = uuid.uuid4().hex[:8]
        names = [f"setup-{suffix}-{i}" for i in range(buckets)]
        for name in names:
            s3.create_bucket(Bucket=name)
        return NotificationPath(endpoint.url, f"setup-{suffix}", names)

    return make


def notification_ids(s3: Any, bucket: str) -> list[str]:
    config = s3.get_bucket_notification_configuration(Bucket=bucket)
    return sorted(
        c["Id"] for kind in ("QueueConfigurations", "TopicConfigurations") for c in config.get(kind, [])
    )


def object_events(sqs: Any, queue_url: str) -> list[tuple[str, str, str]]:
    """(bucket, key, kind) of every object event waiting on the queue (test events dropped)."""
    found: list[tuple[str, str, str]] = []
    while True:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        )
        if not messages:
            return found
        for message in messages:
            found += [(e.bucket, e.key, e.kind) for e in parse_message(message["Body"]).events]
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


def queue_exists(sqs: Any, name: str) -> bool:
    return any(url.endswith("/" + name) for url in sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", []))


def test_fresh_setup_delivers_a_put_to_the_queue(
    make_path: Callable[..., NotificationPath], s3: Any, sqs: Any
) -> None:
    path = make_path(buckets=2)
    result = path.run("setup")
    assert result.returncode == 0, result.stderr
    assert "4 change(s) made" in result.stdout
    attributes = sqs.get_queue_attributes(QueueUrl=path.queue_url, AttributeNames=["All"])["Attributes"]
    assert json.loads(attributes["RedrivePolicy"])["deadLetterTargetArn"].endswith(f":{path.queue}-dlq")
    assert sqs.list_queue_tags(QueueUrl=path.queue_url)["Tags"] == {"s3events:created-by": "s3events setup"}

    s3.put_object(Bucket=path.buckets[1], Key="in/a file.json", Body=b"{}\n")
    s3.put_object(Bucket=path.buckets[1], Key="out/not covered.json", Body=b"{}\n")
    assert object_events(sqs, path.queue_url) == [(path.buckets[1], "in/a file.json", "created")]


def test_existing_notifications_are_kept_and_a_second_run_changes_nothing(
    make_path: Callable[..., NotificationPath], s3: Any, sqs: Any
) -> None:
    path = make_path()
    bucket = path.buckets[0]
    other_url = sqs.create_queue(QueueName=f"{path.queue}-other")["QueueUrl"]
    other_arn = sqs.get_queue_attributes(QueueUrl=other_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    theirs = {
        "Id": "theirs",
        "QueueArn": other_arn,
        "Events": ["s3:ObjectCreated:*"],
        "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "other/"}]}},
    }
    s3.put_bucket_notification_configuration(
        Bucket=bucket, NotificationConfiguration={"QueueConfigurations": [theirs]}
    )

    assert path.run("setup").returncode == 0
    ids = notification_ids(s3, bucket)
    assert "theirs" in ids and any(i.startswith(f"s3events-{path.queue}-") for i in ids)
    before = (
        s3.get_bucket_notification_configuration(Bucket=bucket)["QueueConfigurations"],
        sqs.get_queue_attributes(QueueUrl=path.queue_url, AttributeNames=["All"])["Attributes"],
    )

    again = path.run("setup")
    assert again.returncode == 0, again.stderr
    assert "nothing to change" in again.stdout and "change " not in again.stdout
    after = (
        s3.get_bucket_notification_configuration(Bucket=bucket)["QueueConfigurations"],
        sqs.get_queue_attributes(QueueUrl=path.queue_url, AttributeNames=["All"])["Attributes"],
    )
    assert after[0] == before[0]
    assert after[1]["LastModifiedTimestamp"] == before[1]["LastModifiedTimestamp"]

    s3.put_object(Bucket=bucket, Key="other/x.json", Body=b"{}\n")
    assert [e[1] for e in object_events(sqs, other_url)] == ["other/x.json"]  # their path still works


def test_dry_run_prints_the_plan_and_writes_nothing(
    make_path: Callable[..., NotificationPath], s3: Any, sqs: Any
) -> None:
    path = make_path()
    result = path.run("setup", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert f"create   queue {path.queue}-dlq" in result.stdout
    assert f"change   bucket {path.buckets[0]} notifications" in result.stdout
    assert "nothing was written" in result.stdout
    assert not queue_exists(sqs, path.queue)
    assert notification_ids(s3, path.buckets[0]) == []


def test_an_overlapping_configuration_of_another_owner_is_refused(
    make_path: Callable[..., NotificationPath], s3: Any, sqs: Any
) -> None:
    path = make_path()
    other_url = sqs.create_queue(QueueName=f"{path.queue}-other")["QueueUrl"]
    other_arn = sqs.get_queue_attributes(QueueUrl=other_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    whole_bucket = {"Id": "everything", "QueueArn": other_arn, "Events": ["s3:ObjectCreated:Put"]}
    s3.put_bucket_notification_configuration(
        Bucket=path.buckets[0], NotificationConfiguration={"QueueConfigurations": [whole_bucket]}
    )
    result = path.run("setup")
    assert result.returncode == 2
    assert "'everything'" in result.stderr and f"s3events-{path.queue}-" in result.stderr
    assert notification_ids(s3, path.buckets[0]) == ["everything"]


def test_a_missing_bucket_is_a_fatal_error_naming_it(make_path: Callable[..., NotificationPath]) -> None:
    path = make_path()
    path.buckets.append("setup-no-such-bucket")
    result = path.run("setup")
    assert result.returncode == 3
    assert "bucket setup-no-such-bucket does not exist" in result.stderr


def test_verify_passes_a_probe_through_and_hands_other_messages_back(
    make_path: Callable[..., NotificationPath], s3: Any, sqs: Any
) -> None:
    path = make_path()
    assert path.run("setup").returncode == 0
    object_events(sqs, path.queue_url)  # drop the test events
    waiting = {f"not a probe {i}" for i in range(3)}
    for body in waiting:
        sqs.send_message(QueueUrl=path.queue_url, MessageBody=body)

    result = path.run("setup", "--verify")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ok       probe through bucket {path.buckets[0]}" in result.stdout
    assert "the notification path is intact" in result.stdout

    # Visible again at once (no waiting for a visibility timeout), and nothing of the probe is left.
    messages = sqs.receive_message(QueueUrl=path.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1)[
        "Messages"
    ]
    assert {m["Body"] for m in messages} == waiting
    assert s3.list_objects_v2(Bucket=path.buckets[0]).get("KeyCount") == 0


def test_verify_names_a_removed_notification(make_path: Callable[..., NotificationPath], s3: Any) -> None:
    path = make_path(buckets=2)
    assert path.run("setup").returncode == 0
    s3.put_bucket_notification_configuration(Bucket=path.buckets[1], NotificationConfiguration={})

    result = path.run("setup", "--verify")
    assert result.returncode == 1
    assert f"BROKEN   notification on bucket {path.buckets[1]}: no configuration sends" in result.stdout
    assert f"ok       probe through bucket {path.buckets[0]}" in result.stdout
    assert f"skipped  probe through bucket {path.buckets[1]}" in result.stdout
    assert "1 link(s) broken" in result.stdout


def test_verify_names_a_policy_that_does_not_let_the_bucket_send(
    make_path: Callable[..., NotificationPath], sqs: Any
) -> None:
    path = make_path(buckets=2)
    assert path.run("setup").returncode == 0
    attributes = sqs.get_queue_attributes(QueueUrl=path.queue_url, AttributeNames=["Policy"])["Attributes"]
    document = json.loads(attributes["Policy"])
    document["Statement"][0]["Condition"]["ArnLike"]["aws:SourceArn"] = [f"arn:aws:s3:::{path.buckets[0]}"]
    sqs.set_queue_attributes(QueueUrl=path.queue_url, Attributes={"Policy": json.dumps(document)})

    result = path.run("setup", "--verify")
    assert result.returncode == 1
    assert f"BROKEN   queue policy for bucket {path.buckets[1]}: no statement allows" in result.stdout
    assert f"ok       queue policy for bucket {path.buckets[0]}" in result.stdout

    repaired = path.run("setup")  # setup repairs what verify found
    assert "update policy statement" in repaired.stdout
    assert path.run("setup", "--verify").returncode == 0


def test_teardown_asks_for_yes_then_removes_exactly_what_setup_made(
    make_path: Callable[..., NotificationPath], s3: Any, sqs: Any
) -> None:
    path = make_path()
    bucket = path.buckets[0]
    topic = {
        "Id": "their-topic",
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:t",
        "Events": ["s3:ObjectRestore:*"],
    }
    s3.put_bucket_notification_configuration(
        Bucket=bucket, NotificationConfiguration={"TopicConfigurations": [topic]}
    )
    assert path.run("setup").returncode == 0

    refused = path.run("teardown")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert queue_exists(sqs, path.queue)

    done = path.run("teardown", "--yes")
    assert done.returncode == 0, done.stderr
    assert not queue_exists(sqs, path.queue) and not queue_exists(sqs, f"{path.queue}-dlq")
    assert notification_ids(s3, bucket) == ["their-topic"]
    assert "nothing to remove" in path.run("teardown", "--yes").stdout


def test_teardown_keeps_a_queue_setup_found_existing(
    make_path: Callable[..., NotificationPath], s3: Any, sqs: Any
) -> None:
    path = make_path()
    sqs.create_queue(QueueName=path.queue)  # made by someone else before setup
    assert path.run("setup").returncode == 0
    assert path.run("teardown", "--yes").returncode == 0
    assert queue_exists(sqs, path.queue)
    attributes = sqs.get_queue_attributes(QueueUrl=path.queue_url, AttributeNames=["All"])["Attributes"]
    assert "Policy" not in attributes and "RedrivePolicy" not in attributes
    assert not queue_exists(sqs, f"{path.queue}-dlq")
    assert notification_ids(s3, path.buckets[0]) == []


def test_status_reports_a_broken_link_of_the_notification_path_without_a_probe(
    make_path: Callable[..., NotificationPath], s3: Any, tmp_path: Any
) -> None:
    path = make_path(buckets=1)
    assert path.run("setup").returncode == 0
    metadata = f"s3events.metadata.table.path={tmp_path / 'metadata'}"

    intact = path.run("status", "--json", extra=(metadata,))
    s3.put_bucket_notification_configuration(Bucket=path.buckets[0], NotificationConfiguration={})
    broken = path.run("status", "--json", extra=(metadata,))

    assert intact.returncode == 0, intact.stdout + intact.stderr
    assert not [p for p in json.loads(intact.stdout)["problems"] if p.startswith("notification path")]
    assert broken.returncode == 1, broken.stderr
    problems = [p for p in json.loads(broken.stdout)["problems"] if p.startswith("notification path")]
    assert len(problems) == 1
    assert problems[0].startswith(f"notification path: notification on bucket {path.buckets[0]}: no config")
