"""The thin boto3 side of setup: read the current state, apply a plan's actions. Every AWS error goes
through `aws.call` / `aws.classify` (access denied, a missing bucket: exit 3 naming the resource)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import botocore.exceptions

from s3events.errors import FatalError, TransientError
from s3events.infra import aws
from s3events.setup import notifications
from s3events.setup.model import (
    Action,
    CreateQueue,
    CurrentState,
    DeleteQueue,
    PutNotifications,
    QueueState,
    SetQueueAttributes,
    SetupSpec,
    TagQueue,
    queue_name_and_account,
)

log = logging.getLogger(__name__)

_MISSING_QUEUE = {"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"}


class Clients:
    def __init__(self, options: aws.AwsOptions) -> None:
        self.sqs = aws.client(options, "sqs")
        self.s3 = aws.client(options, "s3")

    @property
    def region(self) -> str:
        return str(self.sqs.meta.region_name)


def _code(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _queue(clients: Clients, *, url: str | None = None, name: str | None = None) -> QueueState | None:
    """A queue's attributes and tags, or None when it does not exist."""
    what = f"read queue {url or name}"
    try:
        if url is None:
            url = clients.sqs.get_queue_url(QueueName=name)["QueueUrl"]
        attributes = clients.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        tags = clients.sqs.list_queue_tags(QueueUrl=url).get("Tags", {})
    except botocore.exceptions.ClientError as exc:
        if _code(exc) in _MISSING_QUEUE:
            return None
        raise aws.classify(exc, action=what) from exc
    except botocore.exceptions.BotoCoreError as exc:
        raise aws.classify(exc, action=what) from exc
    assert url is not None
    return QueueState(url=url, arn=attributes["QueueArn"], attributes=attributes, tags=tags)


def _notifications(clients: Clients, bucket: str) -> dict[str, Any] | None:
    """A bucket's notification configuration, or None when the bucket does not exist."""
    try:
        answer = clients.s3.get_bucket_notification_configuration(Bucket=bucket)
    except botocore.exceptions.ClientError as exc:
        if _code(exc) == "NoSuchBucket":
            return None
        raise aws.classify(exc, action=f"read the notification configuration of bucket {bucket}") from exc
    except botocore.exceptions.BotoCoreError as exc:
        raise aws.classify(exc, action=f"read the notification configuration of bucket {bucket}") from exc
    return notifications.clean(answer)


def read_state(clients: Clients, spec: SetupSpec) -> CurrentState:
    """The queues and the notification configuration of every configured bucket and of every bucket the
    queue records as holding ours (a bucket dropped from the configuration still holds them)."""
    queue = _queue(clients, url=spec.queue_url)
    buckets = dict.fromkeys([*spec.buckets, *(queue.recorded_buckets if queue else ())])
    return CurrentState(
        region=clients.region,
        queue=queue,
        dead_letter_queue=_queue(clients, name=spec.dead_letter_queue_name),
        notifications={bucket: _notifications(clients, bucket) for bucket in buckets},
    )


def apply(clients: Clients, spec: SetupSpec, actions: tuple[Action, ...]) -> None:
    """Take the actions in order; a failure stops at that action (a rerun plans what is left)."""
    for action in actions:
        log.debug("setup: %s", action.line())
        if isinstance(action, CreateQueue):
            url = aws.call(
                f"create queue {action.name}",
                clients.sqs.create_queue,
                QueueName=action.name,
                Attributes=dict(action.attributes),
                tags=dict(action.tags),
            )["QueueUrl"]
            if action.name == spec.queue_name and queue_name_and_account(url) != queue_name_and_account(
                spec.queue_url
            ):
                raise FatalError(
                    f"created queue {url}, but s3events.source.queue.url is {spec.queue_url}: the account "
                    "in the URL differs from the credentials' account; fix the URL and delete that queue "
                    "by hand"
                )
        elif isinstance(action, SetQueueAttributes):
            aws.call(
                f"set attributes {', '.join(action.attributes)} of queue {action.name}",
                clients.sqs.set_queue_attributes,
                QueueUrl=action.url,
                Attributes=dict(action.attributes),
            )
        elif isinstance(action, TagQueue):
            if action.tags:
                aws.call(
                    f"tag queue {action.name}",
                    clients.sqs.tag_queue,
                    QueueUrl=action.url,
                    Tags=dict(action.tags),
                )
            if action.untag:
                aws.call(
                    f"untag queue {action.name}",
                    clients.sqs.untag_queue,
                    QueueUrl=action.url,
                    TagKeys=list(action.untag),
                )
        elif isinstance(action, PutNotifications):
            _put_notifications(clients, action)
        elif isinstance(action, DeleteQueue):
            aws.call(f"delete queue {action.name}", clients.sqs.delete_queue, QueueUrl=action.url)


def _put_notifications(clients: Clients, action: PutNotifications) -> None:
    # S3 has no conditional write for notifications: re-read right before writing, so a change someone
    # made since the plan is not silently replaced.
    now: Mapping[str, Any] | None = _notifications(clients, action.bucket)
    if now is None or notifications.clean(now) != notifications.clean(action.base):
        raise TransientError(
            f"the notification configuration of bucket {action.bucket} changed while setup was planning; "
            "run the command again"
        )
    _write_notifications(clients, action)


@aws.retrying(attempts=6)
def _write_notifications(clients: Clients, action: PutNotifications) -> None:
    what = f"write the notification configuration of bucket {action.bucket}"
    try:
        clients.s3.put_bucket_notification_configuration(
            Bucket=action.bucket, NotificationConfiguration=dict(action.configuration)
        )
    except botocore.exceptions.ClientError as exc:
        # S3 checks it may send to each destination; a queue policy written a moment ago may not have
        # reached it yet (IAM is eventually consistent), so this one refusal is retried with backoff.
        message = str(exc.response.get("Error", {}).get("Message", ""))
        if _code(exc) == "InvalidArgument" and "validate" in message.lower():
            raise TransientError(
                f"{what}: S3 could not validate the queue as a destination ({message}); check the queue "
                "policy with s3events setup --verify"
            ) from exc
        raise aws.classify(exc, action=what) from exc
    except botocore.exceptions.BotoCoreError as exc:
        raise aws.classify(exc, action=what) from exc
