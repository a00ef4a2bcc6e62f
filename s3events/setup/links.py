"""Which link of the notification path is missing or wrong, by name, from the state alone.

A broken link shows up in production only as silence (no events), so `setup --verify` names each one:
the queue, its dead-letter queue (redrive), the queue policy for each bucket, each bucket's notification.
The end-to-end probe (`probe`) adds one link per bucket.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from s3events.setup import notifications, policy
from s3events.setup.model import CurrentState, SetupSpec, bucket_arn, notification_id_prefix
from s3events.setup.plan import arns, redrive_of


@dataclass(frozen=True, slots=True)
class Link:
    name: str
    problem: str | None = None  # None: the link is intact (or was not checked)
    skipped: str | None = None  # why it was not checked

    @property
    def ok(self) -> bool:
        return self.problem is None

    def line(self) -> str:
        if self.problem is not None:
            return f"BROKEN   {self.name}: {self.problem}"
        if self.skipped is not None:
            return f"skipped  {self.name}: {self.skipped}"
        return f"ok       {self.name}"


def check_links(spec: SetupSpec, state: CurrentState) -> list[Link]:
    links: list[Link] = []
    queue_link = f"queue {spec.queue_name}"
    q_arn, dlq_arn = arns(spec, state)
    if state.queue is None:
        links.append(Link(queue_link, f"does not exist at {spec.queue_url}: run s3events setup"))
    else:
        links.append(Link(queue_link, _encryption_problem(state.queue.attributes)))
        links.append(_redrive_link(spec, state, dlq_arn))
        document = policy.parse(state.queue.attributes.get("Policy"))
        for bucket in spec.buckets:
            problem = policy.send_problem(
                document,
                queue_arn=q_arn,
                bucket_arn=bucket_arn(state.region, bucket),
                account=spec.source_account,
            )
            links.append(Link(f"queue policy for bucket {bucket}", problem))
    for bucket in spec.buckets:
        links.append(_notification_link(spec, state, bucket, q_arn))
    links += _dropped_bucket_links(spec, state)
    return links


def _dropped_bucket_links(spec: SetupSpec, state: CurrentState) -> list[Link]:
    """A bucket the queue records but the configuration no longer names, still holding our entries: its
    events go to a queue whose policy no longer lets it send (and once the queue is gone, S3 refuses every
    notification write on that bucket, whoever makes it)."""
    id_prefix = notification_id_prefix(spec.queue_name)
    links = []
    for bucket in state.recorded_buckets:
        existing = state.notifications.get(bucket)
        if bucket in spec.buckets or existing is None:
            continue
        ours = [e.id for e in notifications.entries(existing) if e.id.startswith(id_prefix)]
        if ours:
            links.append(
                Link(
                    f"notification on bucket {bucket} (not in s3events.setup.buckets)",
                    f"{', '.join(ours)} still sends to queue {spec.queue_name}; "
                    "run s3events setup to remove it",
                )
            )
    return links


def _encryption_problem(attributes: Mapping[str, str]) -> str | None:
    if attributes.get("KmsMasterKeyId") == "alias/aws/sqs":
        return (
            "encrypted with the AWS managed key alias/aws/sqs, which S3 cannot use, so every notification is "
            "dropped: use SSE-SQS or a customer managed key whose policy lets s3.amazonaws.com "
            "kms:GenerateDataKey and kms:Decrypt"
        )
    return None


def _redrive_link(spec: SetupSpec, state: CurrentState, dlq_arn: str) -> Link:
    name = f"dead-letter queue {spec.dead_letter_queue_name}"
    assert state.queue is not None
    redrive = redrive_of(state.queue.attributes)
    if redrive is None:
        return Link(
            name,
            f"queue {spec.queue_name} has no redrive policy: a message no receive can handle "
            "is retried until its retention ends",
        )
    target, count = redrive
    if target != dlq_arn:
        return Link(name, f"queue {spec.queue_name} redrives to {target}, not {dlq_arn}")
    if state.dead_letter_queue is None:
        return Link(name, "does not exist: messages the redrive policy moves have nowhere to go")
    if count != spec.max_receive_count:
        return Link(name, f"maxReceiveCount is {count}, configured {spec.max_receive_count}")
    return Link(name)


def _notification_link(spec: SetupSpec, state: CurrentState, bucket: str, q_arn: str) -> Link:
    name = f"notification on bucket {bucket}"
    existing = state.notifications.get(bucket)
    if existing is None:
        return Link(name, "the bucket does not exist")
    missing = [
        f"prefix {prefix!r} suffix {suffix!r}"
        for prefix, suffix in spec.filters
        if not notifications.covers(
            existing, queue_arn=q_arn, prefix=prefix, suffix=suffix, events=spec.events
        )
    ]
    if missing:
        return Link(
            name,
            f"no configuration sends {', '.join(spec.events)} to queue {spec.queue_name} for "
            f"{'; '.join(missing)}",
        )
    return Link(name)
