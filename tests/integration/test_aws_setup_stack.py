"""deploy/aws/s3events.yaml deployed with moto's CloudFormation on the shared test endpoint.

What moto's CloudFormation does with this template (moto 5.x): it creates the queue and the dead-letter
queue (retention, long polling, SSE-SQS, RedrivePolicy), the landing bucket, the managed policies and the
roles, but attaches no ManagedPolicyArns to the roles. It skips AWS::SQS::QueuePolicy ("No Moto
CloudFormation support") and creates the bucket without its NotificationConfiguration. So this test
checks what moto deploys, then saves the template's notification itself (what CloudFormation does on
AWS) when moto left it out, and sends objects through: the notification's events and prefix filter reach
the stack's queue and parse into the events capture writes. The queue policy (which moto does not
evaluate anyway) and the role attachments are checked statically in tests/unit/test_aws_setup.py.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from s3events.events.parse import parse_message
from s3events.infra import aws

pytestmark = pytest.mark.integration

TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "aws" / "s3events.yaml"
PREFIX = "events/"


def _deploy(aws_options: aws.AwsOptions, landing: str, lake: str) -> tuple[str, dict[str, str]]:
    cfn = aws.client(aws_options, "cloudformation")
    stack = f"s3ev-{uuid.uuid4().hex[:8]}"
    parameters = {
        "LandingBucketName": landing,
        "NotificationPrefix": PREFIX,
        "LakeBucketName": lake,
        "MaxReceiveCount": "3",
        # Each notification grant is an `!If [..., statement, !Ref AWS::NoValue]` list item. CloudFormation
        # drops a NoValue item; moto leaves a null statement and refuses the policy. With destinations
        # set, moto deploys the grants; tests/unit/test_aws_setup.py evaluates both branches.
        "NotifyTopicArns": "arn:aws:sns:us-east-1:123456789012:lake-commits",
        "NotifyQueueArns": "arn:aws:sqs:us-east-1:123456789012:lake-commits",
        "NotifyEventBusArns": "arn:aws:events:us-east-1:123456789012:event-bus/lake",
    }
    cfn.create_stack(
        StackName=stack,
        TemplateBody=TEMPLATE.read_text(encoding="utf-8"),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
        Capabilities=["CAPABILITY_IAM"],
    )
    deadline = time.monotonic() + 60
    while True:
        (described,) = cfn.describe_stacks(StackName=stack)["Stacks"]
        if not described["StackStatus"].endswith("_IN_PROGRESS") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert described["StackStatus"] == "CREATE_COMPLETE", described.get("StackStatusReason")
    return stack, {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def _notification_as_the_template_says(queue_arn: str) -> dict[str, Any]:
    rule = {"Key": {"FilterRules": [{"Name": "prefix", "Value": PREFIX}]}}
    return {
        "QueueConfigurations": [
            {"QueueArn": queue_arn, "Events": [event], "Filter": rule}
            for event in ("s3:ObjectCreated:*", "s3:ObjectRemoved:*")
        ]
    }


def test_the_template_deploys_queue_dead_letter_queue_bucket_and_iam(aws_options: aws.AwsOptions) -> None:
    s3 = aws.client(aws_options, "s3")
    sqs = aws.client(aws_options, "sqs")
    iam = aws.client(aws_options, "iam")
    suffix = uuid.uuid4().hex[:8]
    landing, lake = f"landing-{suffix}", f"lake-{suffix}"
    s3.create_bucket(Bucket=lake)  # the lake bucket exists before the stack

    stack, outputs = _deploy(aws_options, landing, lake)

    # the queue and its dead-letter queue
    queue_url = outputs["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=outputs["DeadLetterQueueUrl"], AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    redrive = json.loads(attributes["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == dlq_arn
    assert int(redrive["maxReceiveCount"]) == 3
    assert attributes["MessageRetentionPeriod"] == "1209600"
    assert attributes["ReceiveMessageWaitTimeSeconds"] == "20"
    assert outputs["QueueArn"] == attributes["QueueArn"]
    assert outputs["MetadataTablePath"] == f"s3://{lake}/s3events/metadata"

    # the landing bucket
    s3.head_bucket(Bucket=landing)

    # one managed policy and one role per process, the role carrying its policy
    for process in ("Capture", "Ingest", "Backfill", "Maintain", "Status"):
        policy_arn = outputs[f"{process}PolicyArn"]
        version = iam.get_policy(PolicyArn=policy_arn)["Policy"]["DefaultVersionId"]
        document = iam.get_policy_version(PolicyArn=policy_arn, VersionId=version)["PolicyVersion"][
            "Document"
        ]
        if isinstance(document, str):
            document = json.loads(document)
        assert document["Statement"], process
        role = iam.get_role(RoleName=outputs[f"{process}RoleArn"].rsplit("/", 1)[1])["Role"]
        trust = role["AssumeRolePolicyDocument"]
        trust = json.loads(trust) if isinstance(trust, str) else trust
        assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
        # moto's CloudFormation does not attach a role's ManagedPolicyArns (AWS does): the attachment
        # is checked in tests/unit/test_aws_setup.py.
    capture_actions = {
        action
        for s in _document(iam, outputs["CapturePolicyArn"])["Statement"]
        for action in _listed(s["Action"])
    }
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"} <= capture_actions

    # the notification: moto's CloudFormation does not apply it; save the template's own if missing
    saved = s3.get_bucket_notification_configuration(Bucket=landing)
    if not saved.get("QueueConfigurations"):
        s3.put_bucket_notification_configuration(
            Bucket=landing,
            NotificationConfiguration=_notification_as_the_template_says(outputs["QueueArn"]),
        )
    saved = s3.get_bucket_notification_configuration(Bucket=landing)
    assert {e for c in saved["QueueConfigurations"] for e in c["Events"]} == {
        "s3:ObjectCreated:*",
        "s3:ObjectRemoved:*",
    }
    assert {c["QueueArn"] for c in saved["QueueConfigurations"]} == {outputs["QueueArn"]}

    # objects under the prefix reach the stack's queue as events capture takes; others do not
    s3.put_object(Bucket=landing, Key=f"{PREFIX}2026/a b.json", Body=b'{"a": 1}\n')
    s3.put_object(Bucket=landing, Key="elsewhere/b.json", Body=b'{"b": 2}\n')
    s3.delete_object(Bucket=landing, Key=f"{PREFIX}2026/a b.json")
    events = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(events) < 2:
        for message in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        ):
            events.extend(parse_message(message["Body"]).events)
    assert sorted((e.kind, e.key) for e in events) == [
        ("created", f"{PREFIX}2026/a b.json"),
        ("removed", f"{PREFIX}2026/a b.json"),
    ]

    aws.client(aws_options, "cloudformation").delete_stack(StackName=stack)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _document(iam: Any, policy_arn: str) -> dict[str, Any]:
    version = iam.get_policy(PolicyArn=policy_arn)["Policy"]["DefaultVersionId"]
    document = iam.get_policy_version(PolicyArn=policy_arn, VersionId=version)["PolicyVersion"]["Document"]
    return json.loads(document) if isinstance(document, str) else dict(document)
