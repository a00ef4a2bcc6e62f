"""`s3events setup` / `setup --verify` / `teardown` as a user runs them, against the moto server.

moto delivers S3 notifications to SQS but does not evaluate queue policies (a Deny does not stop
delivery), so the policy link is exercised through verify's static check of the policy document. moto
also never answers a bucket's EventBridge delivery: `EventBridgeStandIn` in front of it answers as S3 does.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from s3events.dev.eventbridge_standin import EventBridgeStandIn
from s3events.dev.local_endpoint import LocalEndpoint
from s3events.events.parse import parse_message
from s3events.infra import aws
from s3events.setup import probe
from s3events.setup.model import SetupSpec
from tests.conftest import CliResult, read_table, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.process]

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


def add_their_topic(s3: Any, bucket: str) -> None:
    """A notification configuration of another owner (id `their-topic`) that does not overlap ours."""
    topic = {
        "Id": "their-topic",
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:t",
        "Events": ["s3:ObjectRestore:*"],
    }
    s3.put_bucket_notification_configuration(
        Bucket=bucket, NotificationConfiguration={"TopicConfigurations": [topic]}
    )


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
    assert sqs.list_queue_tags(QueueUrl=path.queue_url)["Tags"] == {
        "s3events:created-by": "s3events setup",
        "s3events:buckets": " ".join(path.buckets),  # the buckets that hold our notifications
    }

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


def test_verify_passes_a_probe_through_an_empty_queue_and_leaves_nothing_behind(
    make_path: Callable[..., NotificationPath], s3: Any, sqs: Any
) -> None:
    path = make_path()
    assert path.run("setup").returncode == 0
    object_events(sqs, path.queue_url)  # drop the test events: the queue is empty

    result = path.run("setup", "--verify")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ok       probe through bucket {path.buckets[0]}" in result.stdout
    assert "the notification path is intact" in result.stdout
    assert "warning" not in result.stdout
    assert object_events(sqs, path.queue_url) == []  # the probe's messages are gone
    assert s3.list_objects_v2(Bucket=path.buckets[0]).get("KeyCount") == 0


def metadata_keys(metadata_path: Path) -> list[str]:
    return sorted(row["key"] for row in read_table(str(metadata_path)))


def dead_letters(sqs: Any, path: NotificationPath) -> int:
    url = sqs.get_queue_url(QueueName=f"{path.queue}-dlq")["QueueUrl"]
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attributes[name]) for name in names)


def capture_once(path: NotificationPath, metadata: Path, *extra: str) -> CliResult:
    return path.run(
        "capture",
        "--once",
        extra=(*extra, f"s3events.metadata.table.path={metadata}", "s3events.source.queue.long.poll.wait=1"),
    )


ONE_RECEIVE = "s3events.setup.dead.letter.max.receive.count=1"


def test_verify_with_a_backlog_and_one_receive_sends_no_probe_and_capture_then_records_every_message(
    make_path: Callable[..., NotificationPath], s3: Any, sqs: Any, tmp_path: Path
) -> None:
    path = make_path()
    made = path.run("setup", extra=(ONE_RECEIVE,))
    assert made.returncode == 0, made.stderr
    assert "warning  s3events.setup.dead.letter.max.receive.count=1" in made.stdout
    backlog = [f"in/waiting-{i}.json" for i in range(3)]
    for key in backlog:
        s3.put_object(Bucket=path.buckets[0], Key=key, Body=b"{}\n")

    verified = path.run("setup", "--verify", extra=(ONE_RECEIVE,))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"skipped  probe through bucket {path.buckets[0]}: queue {path.queue} holds" in verified.stdout
    assert "no probe was sent" in verified.stdout and "receives only from an empty queue" in verified.stdout
    assert "the links checked are intact (no end-to-end probe)" in verified.stdout
    assert "warning  s3events.setup.dead.letter.max.receive.count=1" in verified.stdout
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket=path.buckets[0])["Contents"]) == backlog

    metadata = tmp_path / "metadata"
    captured = capture_once(path, metadata, ONE_RECEIVE)
    assert captured.returncode == 0, captured.stderr
    assert metadata_keys(metadata) == backlog
    assert dead_letters(sqs, path) == 0


def test_a_message_arriving_while_the_probe_waits_is_sent_again_not_handed_back(
    make_path: Callable[..., NotificationPath], aws_options: aws.AwsOptions, s3: Any, sqs: Any, tmp_path: Path
) -> None:
    """The queue was empty when verify looked, then an event arrived: verify receives it while it waits
    for its probe. With a redrive after one receive, handing it back would send it to the dead-letter
    queue on capture's receive; verify sends it again instead."""
    path = make_path()
    assert path.run("setup", extra=(ONE_RECEIVE,)).returncode == 0
    object_events(sqs, path.queue_url)
    s3.put_object(Bucket=path.buckets[0], Key="in/arrived meanwhile.json", Body=b"{}\n")
    spec = SetupSpec(
        queue_url=path.queue_url,
        dead_letter_queue_name=f"{path.queue}-dlq",
        max_receive_count=1,
        buckets=tuple(path.buckets),
        prefixes=(path.prefix,),
        probe_prefix=f"{path.prefix}_s3events_probe/",
        verify_timeout_seconds=20,
    )

    held: dict[str, Any] = {}
    try:  # as run_verify does
        link = probe.probe_bucket(sqs, s3, spec, path.buckets[0], held=held)
    finally:
        probe.hand_back(sqs, path.queue_url, held)
    assert link.ok, link.problem

    metadata = tmp_path / "metadata"
    captured = capture_once(path, metadata, ONE_RECEIVE)
    assert captured.returncode == 0, captured.stderr
    assert metadata_keys(metadata) == ["in/arrived meanwhile.json"]  # the probe's events are not there
    assert dead_letters(sqs, path) == 0


def test_verify_names_a_removed_notification(
    make_path: Callable[..., NotificationPath], s3: Any, sqs: Any
) -> None:
    path = make_path(buckets=2)
    assert path.run("setup").returncode == 0
    s3.put_bucket_notification_configuration(Bucket=path.buckets[1], NotificationConfiguration={})
    object_events(sqs, path.queue_url)  # drop the test events: verify probes an empty queue only

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
    object_events(sqs, path.queue_url)
    again = path.run("setup", "--verify")
    assert again.returncode == 0 and "the notification path is intact" in again.stdout


def test_teardown_asks_for_yes_then_removes_exactly_what_setup_made(
    make_path: Callable[..., NotificationPath], s3: Any, sqs: Any
) -> None:
    path = make_path()
    bucket = path.buckets[0]
    add_their_topic(s3, bucket)
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


# ------------------------------------------------------------------------------ EventBridge delivery


@pytest.fixture
def standin(endpoint: LocalEndpoint) -> Iterator[EventBridgeStandIn]:
    with EventBridgeStandIn(endpoint.url) as proxy:
        yield proxy


def test_setup_a_second_setup_and_teardown_keep_the_buckets_eventbridge_delivery(
    make_path: Callable[..., NotificationPath], standin: EventBridgeStandIn
) -> None:
    path = replace(make_path(), endpoint_url=standin.url)
    bucket = path.buckets[0]
    s3 = aws.client(aws.AwsOptions(region="us-east-1", endpoint_url=standin.url), "s3")
    s3.put_bucket_notification_configuration(
        Bucket=bucket, NotificationConfiguration={"EventBridgeConfiguration": {}}
    )  # another team's EventBridge rules hang on this bucket
    assert s3.get_bucket_notification_configuration(Bucket=bucket).get("EventBridgeConfiguration") == {}
    puts = len(standin.puts_to(bucket))

    made = path.run("setup")
    assert made.returncode == 0, made.stderr
    written = standin.puts_to(bucket)[puts:]
    assert len(written) == 1 and b"<EventBridgeConfiguration" in written[0]  # the PUT carries it back
    after = s3.get_bucket_notification_configuration(Bucket=bucket)
    assert after.get("EventBridgeConfiguration") == {}
    assert after["QueueConfigurations"][0]["Id"].startswith(f"s3events-{path.queue}-")

    again = path.run("setup")
    assert again.returncode == 0 and "nothing to change" in again.stdout, again.stdout + again.stderr
    assert len(standin.puts_to(bucket)) == puts + 1  # nothing written
    assert s3.get_bucket_notification_configuration(Bucket=bucket).get("EventBridgeConfiguration") == {}

    removed = path.run("teardown", "--yes")
    assert removed.returncode == 0, removed.stderr
    last = standin.puts_to(bucket)[-1]
    assert b"<EventBridgeConfiguration" in last and b"QueueConfiguration" not in last
    final = s3.get_bucket_notification_configuration(Bucket=bucket)
    assert final.get("EventBridgeConfiguration") == {} and "QueueConfigurations" not in final


# ----------------------------------------------------------------- buckets no longer configured


def recorded(sqs: Any, path: NotificationPath) -> str:
    return str(sqs.list_queue_tags(QueueUrl=path.queue_url).get("Tags", {}).get("s3events:buckets", ""))


def test_a_bucket_removed_from_the_configuration_loses_our_notification_and_keeps_the_others(
    make_path: Callable[..., NotificationPath], s3: Any, sqs: Any
) -> None:
    path = make_path(buckets=2)
    kept, dropped = path.buckets
    add_their_topic(s3, dropped)
    assert path.run("setup").returncode == 0
    assert recorded(sqs, path) == f"{kept} {dropped}"
    ours = [i for i in notification_ids(s3, dropped) if i != "their-topic"]
    narrowed = replace(path, buckets=[kept])

    planned = narrowed.run("setup", "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert (
        f"change   bucket {dropped} notifications: remove {ours[0]} (no longer in s3events.setup.buckets); "
        "1 configuration(s) of other owners kept"
    ) in planned.stdout
    assert f"forget bucket(s) {dropped}" in planned.stdout
    assert notification_ids(s3, dropped) == sorted(["their-topic", *ours])  # nothing written
    assert recorded(sqs, path) == f"{kept} {dropped}"

    done = narrowed.run("setup")
    assert done.returncode == 0, done.stderr
    assert notification_ids(s3, dropped) == ["their-topic"]
    assert notification_ids(s3, kept) == ours  # the same Id: one configuration per prefix and suffix
    assert recorded(sqs, path) == kept
    assert "nothing to change" in narrowed.run("setup").stdout


def test_teardown_removes_our_notification_from_every_bucket_the_queue_records(
    make_path: Callable[..., NotificationPath], s3: Any, sqs: Any
) -> None:
    path = make_path(buckets=2)
    assert path.run("setup").returncode == 0
    narrowed = replace(path, buckets=[path.buckets[0]])  # the list changed, setup not run since

    verified = narrowed.run("setup", "--verify")
    assert verified.returncode == 1
    assert (
        f"BROKEN   notification on bucket {path.buckets[1]} (not in s3events.setup.buckets)"
        in verified.stdout
    )

    done = narrowed.run("teardown", "--yes")
    assert done.returncode == 0, done.stderr
    assert f"(recorded on queue {path.queue})" in done.stdout
    assert notification_ids(s3, path.buckets[0]) == [] and notification_ids(s3, path.buckets[1]) == []
    assert not queue_exists(sqs, path.queue)


def test_teardown_of_a_queue_setup_found_existing_removes_its_bucket_record(
    make_path: Callable[..., NotificationPath], sqs: Any
) -> None:
    path = make_path()
    sqs.create_queue(QueueName=path.queue, tags={"team": "data"})
    assert path.run("setup").returncode == 0
    assert recorded(sqs, path) == path.buckets[0]
    assert path.run("teardown", "--yes").returncode == 0
    assert sqs.list_queue_tags(QueueUrl=path.queue_url).get("Tags") == {"team": "data"}
