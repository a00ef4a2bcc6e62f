"""Plan purely: the current state and the configuration in, the actions that make the path whole out.

`plan_setup` creates or repairs (a second run on an intact path plans nothing); `plan_teardown` removes
only what setup recorded as its own. Neither does I/O: `aws_state` reads the state and applies the plan.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from s3events.errors import FatalError
from s3events.setup import notifications, policy
from s3events.setup.model import (
    BUCKETS_TAG,
    DEAD_LETTER_RETENTION_SECONDS,
    OWNER_TAG,
    OWNER_TAG_VALUE,
    POLICY_SID,
    Action,
    CreateQueue,
    CurrentState,
    DeleteQueue,
    Plan,
    PutNotifications,
    QueueState,
    SetQueueAttributes,
    SetupSpec,
    TagQueue,
    bucket_arn,
    bucket_record,
    notification_id_prefix,
    queue_arn,
)

_OWNER_TAGS: Mapping[str, str] = {OWNER_TAG: OWNER_TAG_VALUE}
_BUCKETS_KEY = "s3events.setup.buckets"


def redrive_of(attributes: Mapping[str, str]) -> tuple[str, int] | None:
    """(dead-letter queue ARN, maxReceiveCount) of a queue's RedrivePolicy, or None."""
    text = attributes.get("RedrivePolicy")
    if not text:
        return None
    document = json.loads(text)
    return str(document.get("deadLetterTargetArn", "")), int(document.get("maxReceiveCount", 0))


def arns(spec: SetupSpec, state: CurrentState) -> tuple[str, str]:
    """(queue ARN, dead-letter queue ARN): as AWS reports them, or as they will be once created."""
    q = state.queue.arn if state.queue else queue_arn(state.region, spec.queue_account, spec.queue_name)
    d = (
        state.dead_letter_queue.arn
        if state.dead_letter_queue
        else queue_arn(state.region, spec.queue_account, spec.dead_letter_queue_name)
    )
    return q, d


def wanted_statement(spec: SetupSpec, state: CurrentState) -> dict[str, Any]:
    q_arn, _ = arns(spec, state)
    return policy.our_statement(
        q_arn, [bucket_arn(state.region, b) for b in spec.buckets], spec.source_account
    )


def wanted_notifications(spec: SetupSpec, state: CurrentState) -> list[dict[str, Any]]:
    q_arn, _ = arns(spec, state)
    return notifications.ours(
        id_prefix=notification_id_prefix(spec.queue_name),
        queue_arn=q_arn,
        filters=spec.filters,
        events=spec.events,
    )


def receive_count_warnings(spec: SetupSpec) -> tuple[str, ...]:
    """A redrive after one receive leaves capture no second attempt: any failure between its receive and
    its delete (a crash, a lost answer, a failed commit) sends the message to the dead-letter queue."""
    if spec.max_receive_count > 1:
        return ()
    return (
        f"s3events.setup.dead.letter.max.receive.count={spec.max_receive_count}: a message capture "
        "received once but could not delete (a crash, a timeout, a failed commit) goes to the dead-letter "
        "queue on its next receive instead of being retried; 3 or more leaves room for transient failures",
    )


def plan_setup(spec: SetupSpec, state: CurrentState) -> Plan:
    """Actions in the order AWS needs them: the dead-letter queue before the redrive policy naming it, the
    queue policy before the notifications (S3 checks it may send when a notification is written), the
    buckets recorded on the queue before their notifications are written and forgotten only after the
    notifications of buckets no longer configured are removed (a run stopped half-way leaves no entry of
    ours on a bucket the record does not name)."""
    notifications.check_own_filters(spec.filters)
    actions: list[Action] = []
    unchanged: list[str] = []
    _plan_dead_letter_queue(spec, state, actions, unchanged)
    _plan_queue(spec, state, actions, unchanged)
    id_prefix = notification_id_prefix(spec.queue_name)
    _plan_notifications(spec, state, id_prefix, actions, unchanged)
    dropped = sorted(set(state.recorded_buckets) - set(spec.buckets))
    if dropped and state.queue is not None:
        _remove_ours(state, dropped, id_prefix, actions, unchanged, why=f"no longer in {_BUCKETS_KEY}")
        actions.append(
            _record(state.queue, spec.queue_name, set(spec.buckets), f"forget bucket(s) {', '.join(dropped)}")
        )
    return Plan(tuple(actions), tuple(unchanged), receive_count_warnings(spec))


def _plan_dead_letter_queue(
    spec: SetupSpec, state: CurrentState, actions: list[Action], unchanged: list[str]
) -> None:
    dlq = state.dead_letter_queue
    if dlq is None:
        actions.append(
            CreateQueue(
                spec.dead_letter_queue_name,
                {"MessageRetentionPeriod": str(DEAD_LETTER_RETENTION_SECONDS)},
                _OWNER_TAGS,
                "dead-letter queue, messages kept 14 days",
            )
        )
    else:
        unchanged.append(f"dead-letter queue {spec.dead_letter_queue_name} exists{_made_by(dlq.owned)}")


def _plan_queue(spec: SetupSpec, state: CurrentState, actions: list[Action], unchanged: list[str]) -> None:
    """The queue with its redrive policy, its policy statement and the record of the buckets."""
    _, dlq_arn = arns(spec, state)
    senders = f"S3 may send from {', '.join(spec.buckets)} (account {spec.source_account})"
    redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": spec.max_receive_count}
    redrive_text = f"redrive to {spec.dead_letter_queue_name} after {spec.max_receive_count} receives"
    statement = wanted_statement(spec, state)
    queue = state.queue
    recorded = set(state.recorded_buckets)
    if queue is None:
        attributes = {
            "RedrivePolicy": json.dumps(redrive),
            "Policy": json.dumps(policy.with_ours(None, statement)),
        }
        actions.append(
            CreateQueue(
                spec.queue_name,
                attributes,
                {**_OWNER_TAGS, **bucket_record(spec.buckets)},
                f"{redrive_text}; policy: {senders}; buckets recorded in tag {BUCKETS_TAG}",
            )
        )
        return
    changes: dict[str, str] = {}
    what: list[str] = []
    if redrive_of(queue.attributes) != (dlq_arn, spec.max_receive_count):
        changes["RedrivePolicy"] = json.dumps(redrive)
        what.append(redrive_text)
    current = policy.parse(queue.attributes.get("Policy"))
    wanted = policy.with_ours(current, statement)
    if not policy.same(current, wanted):
        changes["Policy"] = json.dumps(wanted)
        verb = "update" if policy.ours(current) else "add"
        what.append(f"{verb} policy statement {statement['Sid']} ({senders})")
    if changes:
        actions.append(SetQueueAttributes(spec.queue_name, queue.url, changes, "; ".join(what)))
    else:
        unchanged.append(f"queue {spec.queue_name}{_made_by(queue.owned)}: {redrive_text}; policy: {senders}")
    new = sorted(set(spec.buckets) - recorded)
    if new:
        actions.append(
            _record(
                queue, spec.queue_name, recorded | set(spec.buckets), f"record bucket(s) {', '.join(new)}"
            )
        )


def _plan_notifications(
    spec: SetupSpec, state: CurrentState, id_prefix: str, actions: list[Action], unchanged: list[str]
) -> None:
    """Each configured bucket's notifications: ours merged in, other owners' kept."""
    wanted_configs = wanted_notifications(spec, state)
    for bucket in spec.buckets:
        existing = state.notifications.get(bucket)
        if existing is None:
            raise FatalError(
                f"bucket {bucket} does not exist: setup does not create buckets; check "
                "s3events.setup.buckets and s3events.aws.region"
            )
        merged = notifications.merge(existing, wanted_configs, id_prefix=id_prefix, bucket=bucket)
        kept = f"{merged.kept} configuration(s) of other owners kept" if merged.kept else ""
        if merged.changed:
            parts = [f"write {', '.join(merged.added)}"] if merged.added else []
            parts += [f"remove {', '.join(merged.removed)}"] if merged.removed else []
            actions.append(
                PutNotifications(
                    bucket,
                    merged.configuration,
                    notifications.clean(existing),
                    "; ".join(filter(None, [*parts, kept])),
                )
            )
        else:
            adopted = f"; sent by existing {', '.join(merged.adopted)}" if merged.adopted else ""
            unchanged.append(
                "; ".join(
                    filter(None, [f"bucket {bucket} notifications to queue {spec.queue_name}{adopted}", kept])
                )
            )


def _record(queue: QueueState, name: str, buckets: set[str], what: str) -> TagQueue:
    """Record exactly `buckets` on the queue: the record's tags set, its tags no longer needed removed."""
    tags = bucket_record(buckets)
    return TagQueue(
        name,
        queue.url,
        tags,
        tuple(key for key in queue.record_tags if key not in tags),
        f"{what} (tag {BUCKETS_TAG}: {', '.join(sorted(buckets)) or 'none'})",
    )


def _remove_ours(
    state: CurrentState,
    buckets: Iterable[str],
    id_prefix: str,
    actions: list[Action],
    unchanged: list[str],
    *,
    why: str = "",
) -> None:
    """Remove our configurations from each bucket; every other owner's entry (and EventBridge) kept."""
    because = f" ({why})" if why else ""
    for bucket in buckets:
        existing = state.notifications.get(bucket)
        if existing is None:
            unchanged.append(f"bucket {bucket}{because} does not exist")
            continue
        remaining = notifications.without_ours(existing, id_prefix=id_prefix)
        if remaining.removed:
            summary = f"remove {', '.join(remaining.removed)}{because}"
            if remaining.kept:
                summary += f"; {remaining.kept} configuration(s) of other owners kept"
            actions.append(
                PutNotifications(bucket, remaining.configuration, notifications.clean(existing), summary)
            )
        else:
            unchanged.append(f"bucket {bucket}{because}: no notification configuration of s3events setup")


def plan_teardown(spec: SetupSpec, state: CurrentState) -> Plan:
    """Remove what setup made: its notification configurations on every bucket configured or recorded on
    the queue (others kept), the queues it created (tagged), and on a queue it did not create, its policy
    statement, a redrive to a queue it made and its bucket record."""
    actions: list[Action] = []
    unchanged: list[str] = []
    id_prefix = notification_id_prefix(spec.queue_name)
    _remove_ours(state, spec.buckets, id_prefix, actions, unchanged)
    recorded_only = [b for b in state.recorded_buckets if b not in spec.buckets]
    _remove_ours(
        state, recorded_only, id_prefix, actions, unchanged, why=f"recorded on queue {spec.queue_name}"
    )

    queue, dlq = state.queue, state.dead_letter_queue
    if queue is None:
        unchanged.append(f"queue {spec.queue_name} does not exist")
    elif queue.owned:
        actions.append(DeleteQueue(spec.queue_name, queue.url))
    else:
        changes: dict[str, str] = {}
        what: list[str] = []
        current = policy.parse(queue.attributes.get("Policy"))
        if policy.ours(current):
            remaining_policy = policy.without_ours(current)
            changes["Policy"] = json.dumps(remaining_policy) if remaining_policy else ""
            what.append(f"remove policy statement {POLICY_SID}")
        redrive = redrive_of(queue.attributes)
        if dlq is not None and dlq.owned and redrive is not None and redrive[0] == dlq.arn:
            changes["RedrivePolicy"] = ""
            what.append(f"remove the redrive to {spec.dead_letter_queue_name}")
        if changes:
            actions.append(
                SetQueueAttributes(spec.queue_name, queue.url, changes, "; ".join(what) + " (queue kept)")
            )
        if queue.record_tags:
            actions.append(
                TagQueue(
                    spec.queue_name,
                    queue.url,
                    {},
                    queue.record_tags,
                    f"remove tag {BUCKETS_TAG} (queue kept)",
                )
            )
        if not changes and not queue.record_tags:
            unchanged.append(f"queue {spec.queue_name} was not created by s3events setup: kept")
    if dlq is None:
        unchanged.append(f"dead-letter queue {spec.dead_letter_queue_name} does not exist")
    elif dlq.owned:
        actions.append(DeleteQueue(spec.dead_letter_queue_name, dlq.url))
    else:
        unchanged.append(
            f"dead-letter queue {spec.dead_letter_queue_name} was not created by s3events setup: kept"
        )
    return Plan(tuple(actions), tuple(unchanged))


def _made_by(owned: bool) -> str:
    return " (created by s3events setup)" if owned else " (not created by s3events setup)"
