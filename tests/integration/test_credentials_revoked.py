"""Credentials that stop working while capture runs (an access key deleted, as when a key is rotated out
or a user is removed), on a moto server of its own that enforces IAM: the continuous process stops with
exit 3 and one fatal line naming the credentials, and the message it could not commit stays queued."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.integration.test_startup_errors import _allow, _client, _keys, iam_endpoint  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.process, pytest.mark.chaos]


def test_an_access_key_deleted_mid_run_stops_capture_with_one_line_naming_the_credentials(
    iam_endpoint, tmp_path  # noqa: F811
):
    endpoint, admin = iam_endpoint
    iam, s3, sqs = (_client(service, endpoint, admin) for service in ("iam", "s3", "sqs"))
    name = f"capture-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName="all", PolicyDocument=_allow(["s3:*", "sqs:*"]))
    created = iam.create_access_key(UserName=name)
    env = {**os.environ, **_keys(created)}
    bucket = f"landing-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    queue = sqs.create_queue(QueueName=bucket)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={"QueueConfigurations": [{
            "QueueArn": arn, "Events": ["s3:ObjectCreated:*"],
            "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "in/"}]}},  # not the table's files
        }]},
    )
    metadata = f"s3://{bucket}/metadata"
    conf = {
        "s3events.aws.endpoint.url": endpoint.url,
        "s3events.aws.region": "us-east-1",
        "s3events.source.queue.url": queue,
        "s3events.source.queue.long.poll.wait": "1",
        "s3events.source.queue.visibility.timeout": "2",
        "s3events.capture.min.sync.interval.seconds": "1",
        "s3events.metadata.table.path": metadata,
    }
    storage = {"AWS_ENDPOINT_URL": endpoint.url, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1", **admin}

    def keys() -> list[str]:
        try:
            table = DeltaTable(metadata, storage_options=storage)
        except Exception:  # no table yet
            return []
        return sorted(str(k) for k in table.to_pyarrow_table(columns=["key"]).column("key").to_pylist())

    log = tmp_path / "capture.log"
    args = [arg for k, v in conf.items() for arg in ("--conf", f"{k}={v}")]
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("s3events")), "capture", "--continuous", *args],
        stdout=subprocess.DEVNULL, stderr=log.open("wb"), env=env,
    )
    try:
        s3.put_object(Bucket=bucket, Key="in/before.json", Body=b'{"a": 1}\n')
        deadline = time.monotonic() + 60
        while keys() != ["in/before.json"]:
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)  # polling a condition
        iam.delete_access_key(UserName=name, AccessKeyId=created["AccessKey"]["AccessKeyId"])
        s3.put_object(Bucket=bucket, Key="in/after.json", Body=b'{"a": 2}\n')
        try:
            code = process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"capture still runs with a deleted access key: {log.read_text()[-3000:]}")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    text = log.read_text()
    lines = [line for line in text.splitlines() if line.strip()]
    assert code == 3, text[-3000:]
    assert "Traceback" not in text, text[-5000:]
    assert lines[-1].startswith("s3events: fatal: ") and sum("fatal" in line for line in lines) == 1, text
    assert "access key" in lines[-1] or "credentials" in lines[-1], lines[-1]
    assert keys() == ["in/before.json"]
    depth = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    queued = int(depth["ApproximateNumberOfMessages"]) + int(depth["ApproximateNumberOfMessagesNotVisible"])
    assert queued == 1, depth  # the event not committed was not acknowledged
    print(f"\n{lines[-1]}\n{json.dumps({'exit': code})}")
