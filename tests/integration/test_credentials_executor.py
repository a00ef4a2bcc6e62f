"""Credentials refused on Spark's executors only, on a moto server of its own that enforces IAM: continuous
ingest whose metadata and target tables are local, so that only the executors' object reads reach AWS,
runs with an access key that was deleted. Each executor resolves its credential chain again, as the
driver does (`aws.renew_credentials`); it yields the same key, so the rejection stands: ingest stops with
exit 3 and one fatal line naming the credentials and what to check, instead of failing the batch again
every cycle. (Other credentials after the rejection run the cycle again: test_credentials_rotated.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import spark_env
from tests.integration.test_startup_errors import _allow, _client, _keys, iam_endpoint  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.process, pytest.mark.chaos]


# Where the objects are read: a Spark job's executors, or threads of the driver (a small batch's default).
@pytest.mark.parametrize("driver_read_max_bytes", ["0", "67108864"], ids=["executors", "driver-threads"])
def test_an_access_key_refused_on_the_executors_stops_ingest_with_exit_3_and_one_line(
    driver_read_max_bytes, iam_endpoint, tmp_path  # noqa: F811
):
    endpoint, admin = iam_endpoint
    iam, s3, sqs = (_client(service, endpoint, admin) for service in ("iam", "s3", "sqs"))
    name = f"reader-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName="all", PolicyDocument=_allow(["s3:*", "sqs:*"]))
    reader = _keys(iam.create_access_key(UserName=name))
    bucket = f"landing-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    queue = sqs.create_queue(QueueName=bucket)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"]}]
        },
    )
    for n in range(2):
        s3.put_object(Bucket=bucket, Key=f"in/{n}.json", Body=f'{{"n": {n}}}\n'.encode())
    target = tmp_path / "events"
    conf = {
        "s3events.aws.endpoint.url": endpoint.url,
        "s3events.aws.region": "us-east-1",
        "s3events.source.queue.url": queue,
        "s3events.source.queue.long.poll.wait": "0",
        "s3events.metadata.table.path": str(tmp_path / "metadata"),  # local: the driver needs no AWS call
        "s3events.ingest.targets": "events",
        "s3events.ingest.target.events.path": str(target),
        "s3events.ingest.target.events.format": "json",
        "s3events.ingest.target.events.schema": "n BIGINT",
        "s3events.ingest.target.events.driver.read.max.bytes": driver_read_max_bytes,
        "s3events.spark.master": "local[1]",
    }
    args = [arg for k, v in conf.items() for arg in ("--conf", f"{k}={v}")]
    exe = str(Path(sys.executable).with_name("s3events"))
    env = {k: v for k, v in spark_env().items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "no-config"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_EC2_METADATA_DISABLED="true")
    captured = subprocess.run([exe, "capture", "--once", *args], capture_output=True, text=True, timeout=180,
                              env={**env, **admin})
    assert captured.returncode == 0, captured.stderr[-3000:]

    iam.delete_access_key(UserName=name, AccessKeyId=reader["AWS_ACCESS_KEY_ID"])  # before ingest starts
    log = tmp_path / "ingest.log"
    started = time.monotonic()
    process = subprocess.Popen(
        [exe, "ingest", "--continuous", "--min-sync-interval-seconds", "1", *args],
        stdout=subprocess.DEVNULL, stderr=log.open("wb"), env={**env, **reader},
    )
    try:
        code = process.wait(timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail(f"ingest still runs with a key its executors are refused: {log.read_text()[-4000:]}")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    text = log.read_text()
    ours = [line for line in text.splitlines() if line.startswith("s3events")]
    assert code == 3, text[-4000:]
    fatal = [line for line in ours if line.startswith("s3events: fatal: ")]
    assert len(fatal) == 1 and ours[-1] == fatal[0], text[-4000:]
    assert "InvalidAccessKeyId" in fatal[0] and "credential chain" in fatal[0], fatal[0]
    assert "batch failed" not in text, text[-4000:]  # not logged and retried cycle after cycle
    assert reader["AWS_SECRET_ACCESS_KEY"] not in text
    assert not target.exists() or not any(target.rglob("*.parquet")), "nothing landed with refused reads"
    print(f"\n{fatal[0]}\n{json.dumps({'exit': code, 'seconds': round(time.monotonic() - started)})}")
