"""An access key rotated while continuous capture and ingest run, on a moto server of its own that enforces
IAM: the processes read their key from a profile in a shared credentials file; a new key is created and
written to the file, the old one deleted. The first call the old key is refused for makes the process
resolve its credential chain again at once, say so in one line and go on with the new key: nothing is
lost or duplicated, the messages not committed before the rotation are committed once, and the
processes keep running. (Deleted with no new key in the file, the same rejection is fatal:
test_credentials_revoked.py.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import counted_rows, spark_env
from tests.integration.test_startup_errors import _allow, _client, _keys, iam_endpoint  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.process, pytest.mark.chaos]

LINES = 3
REFRESHED = "credentials refreshed after a rejection"


def _write_profile(path: Path, keys: dict[str, str]) -> None:
    path.write_text(
        f"[s3events]\naws_access_key_id = {keys['AWS_ACCESS_KEY_ID']}\n"
        f"aws_secret_access_key = {keys['AWS_SECRET_ACCESS_KEY']}\n"
    )


def _wait_for(
    condition: Callable[[], bool], *, deadline_seconds: float, processes: dict[str, subprocess.Popen[bytes]],
    logs: dict[str, Path], what: str,
) -> None:
    """Poll `condition` until it holds; fail naming `what` if a process ends or the deadline passes."""
    deadline = time.monotonic() + deadline_seconds
    while not condition():
        for name, process in processes.items():
            said = logs[name].read_text()[-4000:]
            assert process.poll() is None, f"{name} ended while waiting for {what}: {said}"
        assert time.monotonic() < deadline, f"no {what} within {deadline_seconds}s: " + " | ".join(
            f"{name}: {log.read_text()[-2500:]}" for name, log in logs.items()
        )
        time.sleep(0.5)  # polling a condition


def test_an_access_key_rotated_in_the_profile_mid_run_is_picked_up_and_every_line_lands_once(
    iam_endpoint, tmp_path  # noqa: F811
):
    endpoint, admin = iam_endpoint
    iam, s3, sqs = (_client(service, endpoint, admin) for service in ("iam", "s3", "sqs"))
    name = f"pipeline-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName="all", PolicyDocument=_allow(["s3:*", "sqs:*"]))
    old = _keys(iam.create_access_key(UserName=name))
    credentials = tmp_path / "credentials"
    _write_profile(credentials, old)
    # Only the profile: no keys in the environment (they would win over the file).
    env = {k: v for k, v in spark_env().items() if not k.startswith("AWS_")}
    env.update(
        AWS_SHARED_CREDENTIALS_FILE=str(credentials), AWS_CONFIG_FILE=str(tmp_path / "no-config"),
        AWS_PROFILE="s3events", AWS_EC2_METADATA_DISABLED="true",
    )

    bucket = f"landing-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    queue = sqs.create_queue(QueueName=bucket, Attributes={"VisibilityTimeout": "5"})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={"QueueConfigurations": [{
            "QueueArn": arn, "Events": ["s3:ObjectCreated:*"],
            "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "in/"}]}},  # not the tables' files
        }]},
    )
    metadata, target = f"s3://{bucket}/metadata", f"s3://{bucket}/tables/events"
    conf = {
        "s3events.aws.endpoint.url": endpoint.url,
        "s3events.aws.region": "us-east-1",
        "s3events.source.queue.url": queue,
        "s3events.source.queue.long.poll.wait": "1",
        "s3events.source.queue.visibility.timeout": "5",
        "s3events.metadata.table.path": metadata,
        "s3events.ingest.targets": "events",
        "s3events.ingest.target.events.path": target,
        "s3events.ingest.target.events.format": "json",
        "s3events.spark.master": "local[1]",
    }
    storage = {"AWS_ENDPOINT_URL": endpoint.url, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1", **admin}

    def put(files: range) -> None:
        for f in files:
            body = "".join(f'{{"f": {f}, "n": {n}}}\n' for n in range(LINES))
            s3.put_object(Bucket=bucket, Key=f"in/{f}.json", Body=body.encode())

    def captured() -> Counter[tuple[str]]:
        return counted_rows(metadata, storage, ("key",))

    def landed() -> Counter[tuple[int, int]]:
        return counted_rows(target, storage, ("f", "n"))

    def queued() -> int:
        depth = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
        return int(depth["ApproximateNumberOfMessages"]) + int(depth["ApproximateNumberOfMessagesNotVisible"])

    def lines(files: range) -> Counter[tuple[int, int]]:
        return Counter((f, n) for f in files for n in range(LINES))

    exe = str(Path(sys.executable).with_name("s3events"))
    args = [arg for k, v in conf.items() for arg in ("--conf", f"{k}={v}")]
    logs = {command: tmp_path / f"{command}.log" for command in ("capture", "ingest")}
    processes = {
        command: subprocess.Popen(
            [exe, command, "--continuous", "--min-sync-interval-seconds", "1", *args],
            stdout=subprocess.DEVNULL, stderr=log.open("wb"), env=env,
        )
        for command, log in logs.items()
    }
    wait: dict[str, Any] = {"processes": processes, "logs": logs}
    try:
        put(range(2))
        _wait_for(lambda: landed() == lines(range(2)), deadline_seconds=300, what="lines before", **wait)

        # The rotation, as a rotation script does it: a new key, into the file, the old key deleted.
        new = _keys(iam.create_access_key(UserName=name))
        _write_profile(credentials, new)
        iam.delete_access_key(UserName=name, AccessKeyId=old["AWS_ACCESS_KEY_ID"])
        put(range(2, 6))

        _wait_for(lambda: landed() == lines(range(6)), deadline_seconds=300, what="lines after", **wait)
        _wait_for(lambda: all(REFRESHED in log.read_text() for log in logs.values()), deadline_seconds=60,
                  what="a refresh line from each process", **wait)
        _wait_for(lambda: queued() == 0, deadline_seconds=120, what="an empty queue", **wait)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes = {command: process.wait(timeout=120) for command, process in processes.items()}

    texts = {command: log.read_text() for command, log in logs.items()}
    assert codes == {"capture": 0, "ingest": 0}, {command: text[-3000:] for command, text in texts.items()}
    assert captured() == Counter((f"in/{f}.json",) for f in range(6))  # every event once
    assert landed() == lines(range(6))  # every line once
    for command, text in texts.items():
        assert "fatal" not in text and "Traceback" not in text, (command, text[-5000:])
        refreshed = [line for line in text.splitlines() if REFRESHED in line]
        # The driver says it once; in ingest an executor whose read was refused too may say it as well.
        assert 1 <= len(refreshed) <= (1 if command == "capture" else 3), (command, refreshed)
        assert "shared-credentials-file" in refreshed[0], refreshed
        for secret in (*old.values(), *new.values()):
            assert secret not in text, (command, "key material in the log")
        print(f"\n{command}: {refreshed[0]}")
