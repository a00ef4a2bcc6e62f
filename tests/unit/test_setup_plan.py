"""The setup planner, merger and link checks, on plain state values: no server, no boto3."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from s3events.config import load_settings
from s3events.errors import ConfigError, FatalError
from s3events.setup import notifications, policy
from s3events.setup.links import check_links
from s3events.setup.model import (
    OWNER_TAG,
    OWNER_TAG_VALUE,
    POLICY_SID,
    CreateQueue,
    CurrentState,
    DeleteQueue,
    Plan,
    PutNotifications,
    QueueState,
    SetQueueAttributes,
    SetupSpec,
    TagQueue,
    bucket_record,
    recorded_buckets,
)
from s3events.setup.plan import plan_setup, plan_teardown

REGION = "us-east-1"
ACCOUNT = "123456789012"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:events"
DLQ_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:events-dlq"
OWNED = {OWNER_TAG: OWNER_TAG_VALUE}


def spec(**changes: Any) -> SetupSpec:
    base = SetupSpec(
        queue_url=f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/events",
        dead_letter_queue_name="events-dlq",
        max_receive_count=5,
        buckets=("landing-a", "landing-b"),
        prefixes=("in/",),
    )
    return replace(base, **changes)


def fresh(s: SetupSpec, **notifications_by_bucket: Mapping[str, Any]) -> CurrentState:
    configs: dict[str, Mapping[str, Any] | None] = {b: {} for b in s.buckets}
    configs.update({k.replace("_", "-"): v for k, v in notifications_by_bucket.items()})
    return CurrentState(region=REGION, queue=None, dead_letter_queue=None, notifications=configs)


def applied(state: CurrentState, plan: Plan) -> CurrentState:
    """The state after the plan's actions, as AWS would hold it."""
    queue, dlq, configs = state.queue, state.dead_letter_queue, dict(state.notifications)
    for action in plan.actions:
        if isinstance(action, CreateQueue):
            arn = QUEUE_ARN if action.name == "events" else DLQ_ARN
            made = QueueState(
                url=f"https://q/{action.name}", arn=arn, attributes=dict(action.attributes), tags=action.tags
            )
            queue, dlq = (made, dlq) if action.name == "events" else (queue, made)
        elif isinstance(action, SetQueueAttributes):
            assert queue is not None
            attributes = {**queue.attributes, **action.attributes}
            queue = replace(queue, attributes={k: v for k, v in attributes.items() if v})
        elif isinstance(action, TagQueue):
            assert queue is not None
            tags = {**queue.tags, **action.tags}
            queue = replace(queue, tags={k: v for k, v in tags.items() if k not in action.untag})
        elif isinstance(action, PutNotifications):
            configs[action.bucket] = action.configuration
        elif isinstance(action, DeleteQueue):
            queue, dlq = (None, dlq) if action.name == "events" else (queue, None)
    return replace(state, queue=queue, dead_letter_queue=dlq, notifications=configs)


def foreign_queue_config(id_: str, prefix: str, events: list[str] | None = None) -> dict[str, Any]:
    return {
        "Id": id_,
        "QueueArn": "arn:aws:sqs:us-east-1:123456789012:other",
        "Events": events or ["s3:ObjectCreated:*"],
        "Filter": {"Key": {"FilterRules": [{"Name": "Prefix", "Value": prefix}]}},
    }


# ------------------------------------------------------------------------------------------------ setup


def test_fresh_setup_creates_dead_letter_queue_then_queue_then_each_bucket_notification() -> None:
    s = spec()
    plan = plan_setup(s, fresh(s))
    kinds = [(type(a).__name__, getattr(a, "name", getattr(a, "bucket", ""))) for a in plan.actions]
    assert kinds == [
        ("CreateQueue", "events-dlq"),
        ("CreateQueue", "events"),
        ("PutNotifications", "landing-a"),
        ("PutNotifications", "landing-b"),
    ]
    queue = plan.actions[1]
    assert isinstance(queue, CreateQueue)
    assert queue.tags == {**OWNED, "s3events:buckets": "landing-a landing-b"}
    assert json.loads(queue.attributes["RedrivePolicy"]) == {
        "deadLetterTargetArn": DLQ_ARN,
        "maxReceiveCount": 5,
    }
    statement = json.loads(queue.attributes["Policy"])["Statement"][0]
    assert statement["Condition"] == {
        "ArnLike": {"aws:SourceArn": ["arn:aws:s3:::landing-a", "arn:aws:s3:::landing-b"]},
        "StringEquals": {"aws:SourceAccount": ACCOUNT},
    }
    put = plan.actions[2]
    assert isinstance(put, PutNotifications)
    (config,) = put.configuration["QueueConfigurations"]
    assert config["QueueArn"] == QUEUE_ARN and config["Id"].startswith("s3events-events-")
    assert notifications.filter_of(config) == ("in/", "")


def test_second_run_on_the_state_setup_left_plans_nothing() -> None:
    s = spec(suffixes=(".json", ".csv"))
    state = applied(fresh(s), plan_setup(s, fresh(s)))
    again = plan_setup(s, state)
    assert again.actions == ()
    assert any("landing-a" in line for line in again.unchanged)


def test_existing_notifications_of_other_owners_are_kept_beside_ours() -> None:
    s = spec(buckets=("landing-a",))
    existing = {
        "QueueConfigurations": [foreign_queue_config("theirs", "other/")],
        "TopicConfigurations": [
            {"Id": "topic", "TopicArn": "arn:aws:sns:us-east-1:1:t", "Events": ["s3:ObjectRestore:*"]}
        ],
        "EventBridgeConfiguration": {},
    }
    plan = plan_setup(s, fresh(s, landing_a=existing))
    (put,) = [a for a in plan.actions if isinstance(a, PutNotifications)]
    ids = [c["Id"] for c in put.configuration["QueueConfigurations"]]
    assert ids[0] == "theirs" and ids[1].startswith("s3events-events-")
    assert put.configuration["TopicConfigurations"] == existing["TopicConfigurations"]
    assert put.configuration["EventBridgeConfiguration"] == {}  # S3's "EventBridge on": kept
    assert "1 configuration(s) of other owners kept" not in put.summary  # two are kept
    assert "2 configuration(s) of other owners kept" in put.summary


def test_an_enabled_eventbridge_delivery_is_kept_by_setup_a_second_setup_and_teardown() -> None:
    """S3 answers an enabled EventBridge delivery as an empty element, which botocore parses as {}."""
    s = spec(buckets=("landing-a",))
    answer = {"EventBridgeConfiguration": {}, "ResponseMetadata": {"HTTPStatusCode": 200}}
    assert notifications.clean(answer) == {"EventBridgeConfiguration": {}}
    state = fresh(s, landing_a=answer)
    state = applied(state, plan_setup(s, state))
    assert state.notifications["landing-a"]["EventBridgeConfiguration"] == {}
    assert plan_setup(s, state).actions == ()
    teardown = plan_teardown(s, state)
    (put,) = [a for a in teardown.actions if isinstance(a, PutNotifications)]
    assert put.configuration == {"EventBridgeConfiguration": {}}


def test_a_bucket_dropped_from_the_configuration_loses_our_entries_then_leaves_the_record() -> None:
    both = spec()
    theirs = {
        "TopicConfigurations": [
            {"Id": "t", "TopicArn": "arn:aws:sns:us-east-1:1:t", "Events": ["s3:ObjectRestore:*"]}
        ]
    }
    state = applied(fresh(both, landing_b=theirs), plan_setup(both, fresh(both, landing_b=theirs)))
    assert state.recorded_buckets == ("landing-a", "landing-b")

    one = spec(buckets=("landing-a",))
    plan = plan_setup(one, state)
    kinds = [(type(a).__name__, getattr(a, "bucket", "")) for a in plan.actions]
    assert kinds == [("SetQueueAttributes", ""), ("PutNotifications", "landing-b"), ("TagQueue", "")]
    put, forget = plan.actions[1], plan.actions[2]
    assert isinstance(put, PutNotifications) and isinstance(forget, TagQueue)
    assert put.configuration == theirs  # other owners' entries stay as they were
    assert "no longer in s3events.setup.buckets" in put.summary
    assert forget.tags == {"s3events:buckets": "landing-a"}
    assert "forget bucket(s) landing-b" in forget.line()
    after = applied(state, plan)
    assert after.recorded_buckets == ("landing-a",)
    assert plan_setup(one, after).actions == ()


def test_a_new_bucket_is_recorded_on_the_queue_before_its_notification_is_written() -> None:
    one = spec(buckets=("landing-a",))
    state = applied(fresh(one), plan_setup(one, fresh(one)))
    both = spec()
    state = replace(state, notifications={**state.notifications, "landing-b": {}})
    plan = plan_setup(both, state)
    kinds = [type(a).__name__ for a in plan.actions]
    assert kinds == ["SetQueueAttributes", "TagQueue", "PutNotifications"]
    record = plan.actions[1]
    assert isinstance(record, TagQueue) and record.tags == {"s3events:buckets": "landing-a landing-b"}


def test_a_queue_made_before_the_record_existed_gets_its_buckets_recorded() -> None:
    s = spec()
    state = applied(fresh(s), plan_setup(s, fresh(s)))
    assert state.queue is not None
    unrecorded = replace(state, queue=replace(state.queue, tags=OWNED))
    plan = plan_setup(s, unrecorded)
    assert [type(a).__name__ for a in plan.actions] == ["TagQueue"]
    assert plan_setup(s, applied(unrecorded, plan)).actions == ()


def test_the_bucket_record_spreads_over_tags_that_each_fit_a_tag_value() -> None:
    buckets = [f"{i:02d}-" + "b" * 60 for i in range(12)]
    tags = bucket_record(buckets)
    assert len(tags) > 1 and all(len(v) <= 256 for v in tags.values())
    assert list(tags)[:2] == ["s3events:buckets", "s3events:buckets:2"]
    assert recorded_buckets({**tags, "team": "x y"}) == tuple(sorted(buckets))


def test_a_receive_count_of_one_is_warned_about() -> None:
    assert plan_setup(spec(), fresh(spec())).warnings == ()
    plan = plan_setup(spec(max_receive_count=1), fresh(spec()))
    (warning,) = plan.warnings
    assert "s3events.setup.dead.letter.max.receive.count=1" in warning
    assert plan.lines()[-1].startswith("warning  s3events.setup.dead.letter.max.receive.count=1")


def test_links_name_a_dropped_bucket_that_still_holds_our_configuration() -> None:
    both = spec()
    state = applied(fresh(both), plan_setup(both, fresh(both)))
    one = spec(buckets=("landing-a",))
    broken = [link for link in check_links(one, state) if not link.ok]
    assert [link.name for link in broken] == [
        "notification on bucket landing-b (not in s3events.setup.buckets)"
    ]
    assert "run s3events setup to remove it" in (broken[0].problem or "")


def test_overlapping_configuration_of_another_owner_is_refused_naming_both() -> None:
    s = spec(buckets=("landing-a",))
    existing = {"QueueConfigurations": [foreign_queue_config("theirs", "in/sub/")]}
    with pytest.raises(ConfigError) as caught:
        plan_setup(s, fresh(s, landing_a=existing))
    message = str(caught.value)
    assert "'theirs'" in message and "s3events-events-" in message and "landing-a" in message


@pytest.mark.parametrize(
    ("prefix", "events"),
    [("out/", ["s3:ObjectCreated:*"]), ("in/", ["s3:ObjectRestore:Completed"]), ("", ["s3:ObjectTagging:*"])],
    ids=["other prefix", "other event type", "whole bucket, other event type"],
)
def test_configurations_that_do_not_overlap_ours_are_accepted(prefix: str, events: list[str]) -> None:
    s = spec(buckets=("landing-a",))
    existing = {"QueueConfigurations": [foreign_queue_config("theirs", prefix, events)]}
    plan = plan_setup(s, fresh(s, landing_a=existing))
    assert any(isinstance(a, PutNotifications) for a in plan.actions)


def test_an_existing_configuration_that_already_does_what_ours_would_is_adopted_not_duplicated() -> None:
    s = spec(buckets=("landing-a",))
    twin = {
        "Id": "made-by-hand",
        "QueueArn": QUEUE_ARN,
        "Events": ["s3:ObjectRemoved:*", "s3:ObjectCreated:*"],
        "Filter": {"Key": {"FilterRules": [{"Name": "Prefix", "Value": "in/"}]}},
    }
    state = fresh(s, landing_a={"QueueConfigurations": [twin]})
    plan = plan_setup(s, state)
    assert not any(isinstance(a, PutNotifications) for a in plan.actions)
    assert any("made-by-hand" in line for line in plan.unchanged)


def test_our_own_prefixes_may_not_overlap() -> None:
    s = spec(prefixes=("in/", "in/2026/"))
    with pytest.raises(ConfigError, match=r"'in/' .* and prefix 'in/2026/'"):
        plan_setup(s, fresh(s))


def test_a_missing_bucket_is_fatal_naming_it() -> None:
    s = spec()
    state = replace(fresh(s), notifications={"landing-a": {}, "landing-b": None})
    with pytest.raises(FatalError, match="bucket landing-b does not exist"):
        plan_setup(s, state)


def test_existing_queue_policy_statements_are_kept_and_ours_added_once() -> None:
    s = spec()
    theirs = {
        "Sid": "sns",
        "Effect": "Allow",
        "Principal": {"Service": "sns.amazonaws.com"},
        "Action": "sqs:SendMessage",
    }
    queue = QueueState(
        url="https://q/events",
        arn=QUEUE_ARN,
        attributes={"Policy": json.dumps({"Version": "2012-10-17", "Statement": [theirs]})},
    )
    state = replace(fresh(s), queue=queue)
    plan = plan_setup(s, state)
    (change,) = [a for a in plan.actions if isinstance(a, SetQueueAttributes)]
    statements = json.loads(change.attributes["Policy"])["Statement"]
    assert [st["Sid"] for st in statements] == ["sns", POLICY_SID]
    assert json.loads(change.attributes["RedrivePolicy"])["maxReceiveCount"] == 5
    assert plan_setup(s, applied(state, plan)).actions == ()


def test_a_policy_aws_handed_back_reformatted_is_not_rewritten() -> None:
    s = spec(buckets=("landing-a",))
    state = applied(fresh(s), plan_setup(s, fresh(s)))
    assert state.queue is not None
    document = json.loads(state.queue.attributes["Policy"])
    statement = document["Statement"][0]
    statement["Condition"]["ArnLike"]["aws:SourceArn"] = "arn:aws:s3:::landing-a"  # ["x"] read back as "x"
    statement["Action"] = ["sqs:SendMessage"]
    reformatted = replace(
        state.queue, attributes={**state.queue.attributes, "Policy": json.dumps(document, indent=2)}
    )
    assert plan_setup(s, replace(state, queue=reformatted)).actions == ()


def test_a_changed_bucket_list_updates_our_policy_statement_in_place() -> None:
    s = spec()
    state = applied(fresh(s), plan_setup(s, fresh(s)))
    wider = spec(buckets=("landing-a", "landing-b", "landing-c"))
    state = replace(state, notifications={**state.notifications, "landing-c": {}})
    plan = plan_setup(wider, state)
    (change,) = [a for a in plan.actions if isinstance(a, SetQueueAttributes)]
    assert list(change.attributes) == ["Policy"] and "update policy statement" in change.summary
    assert "arn:aws:s3:::landing-c" in change.attributes["Policy"]


# ------------------------------------------------------------------------------------------ notifications


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        (("in/", ""), ("in/sub/", ""), True),
        (("in/", ""), ("out/", ""), False),
        (("", ".json"), ("in/", ""), True),
        (("in/", ".json"), ("in/", ".csv"), False),
        (("in/", ".gz"), ("in/", ".json.gz"), True),
    ],
)
def test_filters_overlap_when_one_prefix_and_one_suffix_contain_the_other(
    a: tuple[str, str], b: tuple[str, str], overlap: bool
) -> None:
    assert notifications.filters_overlap(a, b) is overlap
    assert notifications.filters_overlap(b, a) is overlap


def test_event_types_overlap_through_wildcards() -> None:
    assert notifications.events_overlap(["s3:ObjectCreated:*"], ["s3:ObjectCreated:Put"])
    assert notifications.events_overlap(["s3:ObjectRemoved:Delete"], ["s3:ObjectRemoved:*"])
    assert not notifications.events_overlap(["s3:ObjectCreated:*"], ["s3:ObjectRemoved:*"])


def test_filter_rule_names_are_read_in_either_letter_case() -> None:
    config = {
        "Filter": {
            "Key": {"FilterRules": [{"Name": "Prefix", "Value": "a/"}, {"Name": "suffix", "Value": ".j"}]}
        }
    }
    assert notifications.filter_of(config) == ("a/", ".j")


# ------------------------------------------------------------------------------------------------- policy


def test_policy_check_finds_a_bucket_the_policy_does_not_name() -> None:
    document = policy.with_ours(None, policy.our_statement(QUEUE_ARN, ["arn:aws:s3:::landing-a"], ACCOUNT))
    ok = policy.send_problem(
        document, queue_arn=QUEUE_ARN, bucket_arn="arn:aws:s3:::landing-a", account=ACCOUNT
    )
    other = policy.send_problem(
        document, queue_arn=QUEUE_ARN, bucket_arn="arn:aws:s3:::landing-z", account=ACCOUNT
    )
    wrong_account = policy.send_problem(
        document, queue_arn=QUEUE_ARN, bucket_arn="arn:aws:s3:::landing-a", account="999999999999"
    )
    assert ok is None
    assert other is not None and "landing-z" in other
    assert wrong_account is not None and "999999999999" in wrong_account


def test_policy_check_honours_wildcards_and_explicit_denies() -> None:
    allow_all = {
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "sqs:*",
                "Resource": "*",
                "Condition": {"ArnLike": {"aws:SourceArn": "arn:aws:s3:::landing-*"}},
            }
        ]
    }
    assert (
        policy.send_problem(
            allow_all, queue_arn=QUEUE_ARN, bucket_arn="arn:aws:s3:::landing-a", account=ACCOUNT
        )
        is None
    )
    denied = {
        "Statement": [
            *allow_all["Statement"],
            {"Sid": "no", "Effect": "Deny", "Principal": "*", "Action": "*"},
        ]
    }
    problem = policy.send_problem(
        denied, queue_arn=QUEUE_ARN, bucket_arn="arn:aws:s3:::landing-a", account=ACCOUNT
    )
    assert problem is not None and "'no' denies" in problem
    assert "no policy" in (
        policy.send_problem(None, queue_arn=QUEUE_ARN, bucket_arn="b", account=ACCOUNT) or ""
    )


# ------------------------------------------------------------------------------------------------- links


def test_links_name_a_removed_notification_and_a_policy_without_the_bucket() -> None:
    s = spec()
    state = applied(fresh(s), plan_setup(s, fresh(s)))
    assert all(link.ok for link in check_links(s, state))
    assert state.queue is not None
    narrow = policy.with_ours(None, policy.our_statement(QUEUE_ARN, ["arn:aws:s3:::landing-a"], ACCOUNT))
    broken = replace(
        state,
        queue=replace(state.queue, attributes={**state.queue.attributes, "Policy": json.dumps(narrow)}),
        notifications={**state.notifications, "landing-a": {}},
    )
    problems = {link.name: link.problem for link in check_links(s, broken) if not link.ok}
    assert set(problems) == {"queue policy for bucket landing-b", "notification on bucket landing-a"}


def test_links_name_a_queue_encrypted_with_a_key_s3_cannot_use() -> None:
    s = spec()
    state = applied(fresh(s), plan_setup(s, fresh(s)))
    assert state.queue is not None
    attributes = {**state.queue.attributes, "KmsMasterKeyId": "alias/aws/sqs"}
    (broken,) = [
        link
        for link in check_links(s, replace(state, queue=replace(state.queue, attributes=attributes)))
        if not link.ok
    ]
    assert broken.name == "queue events" and "alias/aws/sqs" in (broken.problem or "")


def test_links_name_a_missing_queue_and_a_missing_redrive() -> None:
    s = spec()
    state = applied(fresh(s), plan_setup(s, fresh(s)))
    assert state.queue is not None
    no_redrive = replace(
        state, queue=replace(state.queue, attributes={"Policy": state.queue.attributes["Policy"]})
    )
    assert [link.name for link in check_links(s, no_redrive) if not link.ok] == [
        "dead-letter queue events-dlq"
    ]
    no_queue = replace(state, queue=None)
    assert [link.name for link in check_links(s, no_queue) if not link.ok] == ["queue events"]


# ---------------------------------------------------------------------------------------------- teardown


def test_teardown_removes_our_configurations_and_the_queues_setup_created_only() -> None:
    s = spec(buckets=("landing-a",))
    state = fresh(s, landing_a={"QueueConfigurations": [foreign_queue_config("theirs", "other/")]})
    state = applied(state, plan_setup(s, state))
    plan = plan_teardown(s, state)
    names = [type(a).__name__ for a in plan.actions]
    assert names == ["PutNotifications", "DeleteQueue", "DeleteQueue"]
    put = plan.actions[0]
    assert isinstance(put, PutNotifications)
    assert put.configuration == {"QueueConfigurations": [foreign_queue_config("theirs", "other/")]}
    assert plan_teardown(s, applied(state, plan)).actions == ()


def test_teardown_removes_our_entries_from_a_bucket_only_the_record_names() -> None:
    both = spec()
    state = applied(fresh(both), plan_setup(both, fresh(both)))
    one = spec(buckets=("landing-a",))
    plan = plan_teardown(one, state)
    puts = [a for a in plan.actions if isinstance(a, PutNotifications)]
    assert [p.bucket for p in puts] == ["landing-a", "landing-b"]
    assert all(p.configuration == {} for p in puts)
    assert "recorded on queue events" in puts[1].summary
    assert plan_teardown(one, applied(state, plan)).actions == ()


def test_teardown_removes_the_bucket_record_from_a_queue_it_keeps() -> None:
    s = spec(buckets=("landing-a",))
    state = replace(fresh(s), queue=QueueState(url="https://q/events", arn=QUEUE_ARN))
    state = applied(state, plan_setup(s, state))
    assert state.recorded_buckets == ("landing-a",)
    plan = plan_teardown(s, state)
    (untag,) = [a for a in plan.actions if isinstance(a, TagQueue)]
    assert untag.tags == {} and untag.untag == ("s3events:buckets",)
    assert applied(state, plan).recorded_buckets == ()


def test_teardown_keeps_a_queue_setup_did_not_create_but_removes_its_statement_and_redrive() -> None:
    s = spec(buckets=("landing-a",))
    theirs = {"Sid": "mine", "Effect": "Allow", "Principal": "*", "Action": "sqs:ReceiveMessage"}
    queue = QueueState(
        url="https://q/events",
        arn=QUEUE_ARN,
        attributes={"Policy": json.dumps({"Version": "2012-10-17", "Statement": [theirs]})},
    )
    state = replace(fresh(s), queue=queue)
    state = applied(state, plan_setup(s, state))
    plan = plan_teardown(s, state)
    (change,) = [a for a in plan.actions if isinstance(a, SetQueueAttributes)]
    assert json.loads(change.attributes["Policy"])["Statement"] == [theirs]
    assert change.attributes["RedrivePolicy"] == ""
    assert [a.name for a in plan.actions if isinstance(a, DeleteQueue)] == ["events-dlq"]


# ------------------------------------------------------------------------------------------------ config


def _settings(*overrides: str) -> Any:
    base = [
        f"s3events.source.queue.url=https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/events",
        "s3events.setup.buckets=landing-a",
    ]
    return load_settings(None, [*base, *overrides], env={})


def test_spec_defaults_derive_from_the_queue_url() -> None:
    from s3events.setup.command import spec_from

    s = spec_from(_settings("s3events.setup.prefixes=in/"))
    assert (s.dead_letter_queue_name, s.source_account, s.probe_prefix) == (
        "events-dlq",
        ACCOUNT,
        "in/_s3events_probe/",
    )


def test_setup_needs_buckets_and_a_queue_but_no_table() -> None:
    settings = load_settings(
        None, [f"s3events.source.queue.url=https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/q"], env={}
    )
    with pytest.raises(ConfigError, match=r"s3events\.setup\.buckets"):
        settings.validate_for("setup")
    _settings().validate_for("setup")  # s3events.metadata.table.path unset: setup touches no table


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("s3events.setup.probe.prefix=elsewhere/", "s3events.setup.probe.prefix"),
        (
            "s3events.source.queue.url=https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo",
            "s3events.source.queue.url",
        ),
    ],
    ids=["probe outside the prefixes", "fifo queue"],
)
def test_spec_refuses_what_could_never_deliver(override: str, key: str) -> None:
    from s3events.setup.command import spec_from

    with pytest.raises(ConfigError) as caught:
        spec_from(_settings("s3events.setup.prefixes=in/", override))
    assert caught.value.key == key
