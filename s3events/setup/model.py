"""What setup wants (`SetupSpec`), what exists (`CurrentState`) and what it does about it (actions, `Plan`).

Ownership is recorded where AWS keeps it, so teardown removes only what setup made: a tag on the queues
setup created, a recognizable Id on its notification configurations, a Sid on its queue-policy statement,
and on the queue the buckets that hold those configurations (so a bucket dropped from the configuration is
still found and cleaned).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

OWNER_TAG = "s3events:created-by"
OWNER_TAG_VALUE = "s3events setup"
POLICY_SID = "s3events-setup-s3-send"
DEAD_LETTER_RETENTION_SECONDS = 1_209_600  # 14 days, the SQS maximum: a dead letter waits for a person
# The buckets holding our notification configurations, space-separated in this tag of the queue (and in
# BUCKETS_TAG:2, :3, ... when they do not fit one tag value). SQS tag values hold 256 characters of
# letters, digits, spaces and _.:/=+-@, which bucket names fit.
BUCKETS_TAG = "s3events:buckets"
_TAG_VALUE_MAX = 256


def bucket_record(buckets: Iterable[str]) -> dict[str, str]:
    """The tags that record these buckets on the queue (none for no bucket)."""
    values: list[str] = []
    for bucket in sorted(set(buckets)):
        if values and len(values[-1]) + 1 + len(bucket) <= _TAG_VALUE_MAX:
            values[-1] += f" {bucket}"
        else:
            values.append(bucket)
    return {BUCKETS_TAG if i == 0 else f"{BUCKETS_TAG}:{i + 1}": v for i, v in enumerate(values)}


def is_record_tag(key: str) -> bool:
    return key == BUCKETS_TAG or (key.startswith(f"{BUCKETS_TAG}:") and key[len(BUCKETS_TAG) + 1 :].isdigit())


def recorded_buckets(tags: Mapping[str, str]) -> tuple[str, ...]:
    """The buckets a queue's tags record as holding our notification configurations."""
    return tuple(sorted({b for key, value in tags.items() if is_record_tag(key) for b in value.split()}))


def notification_id_prefix(queue_name: str) -> str:
    """The Id prefix of the notification configurations setup writes for this queue."""
    return f"s3events-{queue_name}-"


def queue_name_and_account(queue_url: str) -> tuple[str, str]:
    """(name, account id) from an SQS queue URL `https://sqs.<region>.amazonaws.com/<account>/<name>`."""
    parts = [part for part in urlsplit(queue_url).path.split("/") if part]
    if len(parts) != 2:
        raise ValueError(f"{queue_url!r} is not a queue URL of the form https://host/<account>/<name>")
    return parts[1], parts[0]


def partition_of(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def queue_arn(region: str, account: str, name: str) -> str:
    return f"arn:{partition_of(region)}:sqs:{region}:{account}:{name}"


def bucket_arn(region: str, bucket: str) -> str:
    return f"arn:{partition_of(region)}:s3:::{bucket}"


@dataclass(frozen=True, slots=True)
class SetupSpec:
    """The notification path as configured (s3events.source.queue.url and s3events.setup.*)."""

    queue_url: str
    dead_letter_queue_name: str
    max_receive_count: int
    buckets: tuple[str, ...]
    prefixes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    events: tuple[str, ...] = ("s3:ObjectCreated:*", "s3:ObjectRemoved:*")
    bucket_account: str | None = None  # aws:SourceAccount; None: the queue's account
    probe_prefix: str = "_s3events_probe/"
    verify_timeout_seconds: float = 60.0

    @property
    def queue_name(self) -> str:
        return queue_name_and_account(self.queue_url)[0]

    @property
    def queue_account(self) -> str:
        return queue_name_and_account(self.queue_url)[1]

    @property
    def source_account(self) -> str:
        return self.bucket_account or self.queue_account

    @property
    def filters(self) -> tuple[tuple[str, str], ...]:
        """(prefix, suffix) of each notification configuration: one per prefix and suffix pair."""
        return tuple((p, s) for p in self.prefixes or ("",) for s in self.suffixes or ("",))


@dataclass(frozen=True, slots=True)
class QueueState:
    url: str
    arn: str
    attributes: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def owned(self) -> bool:
        """Created by setup (and so removed by teardown)."""
        return self.tags.get(OWNER_TAG) == OWNER_TAG_VALUE

    @property
    def recorded_buckets(self) -> tuple[str, ...]:
        """The buckets setup recorded on this queue as holding its notification configurations."""
        return recorded_buckets(self.tags)

    @property
    def record_tags(self) -> tuple[str, ...]:
        return tuple(sorted(key for key in self.tags if is_record_tag(key)))


@dataclass(frozen=True, slots=True)
class CurrentState:
    region: str
    queue: QueueState | None
    dead_letter_queue: QueueState | None
    # bucket -> its configuration (None: no such bucket), for the configured buckets and those recorded on
    # the queue
    notifications: Mapping[str, Mapping[str, Any] | None]

    @property
    def recorded_buckets(self) -> tuple[str, ...]:
        return self.queue.recorded_buckets if self.queue is not None else ()


# ----------------------------------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class CreateQueue:
    name: str
    attributes: Mapping[str, str]
    tags: Mapping[str, str]
    summary: str

    def line(self) -> str:
        return f"create   queue {self.name}: {self.summary}"


@dataclass(frozen=True, slots=True)
class SetQueueAttributes:
    name: str
    url: str
    attributes: Mapping[str, str]
    summary: str

    def line(self) -> str:
        return f"change   queue {self.name}: {self.summary}"


@dataclass(frozen=True, slots=True)
class TagQueue:
    """Set the bucket record (`tags`) on a queue and remove the record tags in `untag`."""

    name: str
    url: str
    tags: Mapping[str, str]
    untag: tuple[str, ...]
    summary: str

    def line(self) -> str:
        return f"change   queue {self.name}: {self.summary}"


@dataclass(frozen=True, slots=True)
class PutNotifications:
    """Write a bucket's whole notification configuration (S3 has no per-entry call). `base` is what the
    plan merged into: the executor re-reads the bucket and refuses when it changed meanwhile."""

    bucket: str
    configuration: Mapping[str, Any]
    base: Mapping[str, Any]
    summary: str

    def line(self) -> str:
        return f"change   bucket {self.bucket} notifications: {self.summary}"


@dataclass(frozen=True, slots=True)
class DeleteQueue:
    name: str
    url: str

    def line(self) -> str:
        return f"delete   queue {self.name} (created by s3events setup)"


Action = CreateQueue | SetQueueAttributes | TagQueue | PutNotifications | DeleteQueue


@dataclass(frozen=True, slots=True)
class Plan:
    """The actions to take, in order, a line for each thing already as it should be, and warnings about
    the configuration itself."""

    actions: tuple[Action, ...]
    unchanged: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        return (
            [f"ok       {text}" for text in self.unchanged]
            + [action.line() for action in self.actions]
            + [f"warning  {text}" for text in self.warnings]
        )
