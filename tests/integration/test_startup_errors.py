"""Environment mistakes on the Delta side end at start-up in one actionable line and exit 3: a missing
bucket, an unreachable endpoint, an unwritable or occupied table location; even with nothing to do, and for
ingest before Spark starts. Where a table is opened later, delta-rs errors read the same way."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pytest

from s3events.dev.local_endpoint import LocalEndpoint, free_port
from s3events.errors import FatalError, TransientError
from s3events.infra import aws, delta
from tests.conftest import Stack, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.process]


def _args(command: str, stack: Stack, **extra: object) -> list[str]:
    return [command, "--once", *(arg for kv in stack.conf(**extra) for arg in ("--conf", kv))]


def _conf(stack: Stack, **extra: object) -> list[str]:
    return [arg for kv in stack.conf(**extra) for arg in ("--conf", kv)]


def _ingest_args(stack: Stack, target: str, **extra: object) -> list[str]:
    # No Java is needed: these runs must stop before Spark would start.
    return _args(
        "ingest", stack, ingest__targets="events", ingest__target__events__path=target,
        ingest__target__events__format="json", **extra,
    )


def _missing_bucket() -> str:
    return f"no-such-bucket-{uuid.uuid4().hex[:8]}"


def _one_fatal_line(result, *named: str) -> str:
    """Exit 3, exactly one line on stderr, no colour codes, naming everything in `named`."""
    assert result.returncode == 3, result.stderr
    assert "\x1b" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for name in named:
        assert name in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------------------------------- capture


def test_capture_with_the_metadata_table_in_a_missing_bucket_exits_3_though_the_queue_is_empty(make_stack):
    stack = make_stack()
    bucket = _missing_bucket()
    stack.metadata_path = f"s3://{bucket}/metadata"

    result = run_cli(_args("capture", stack))

    line = _one_fatal_line(result, stack.metadata_path, "s3events.metadata.table.path")
    assert f"the bucket {bucket} does not exist" in line


def test_capture_with_the_quarantine_table_in_a_missing_bucket_names_the_quarantine_key(make_stack):
    stack = make_stack()
    quarantine = f"s3://{_missing_bucket()}/quarantine"

    result = run_cli(_args("capture", stack, metadata__quarantine__table__path=quarantine))

    _one_fatal_line(result, quarantine, "s3events.metadata.quarantine.table.path", "quarantine table")
    assert not Path(stack.metadata_path).exists()  # nothing was created before the check


def test_capture_with_the_metadata_table_under_a_regular_file_exits_3(make_stack, tmp_path):
    stack = make_stack()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    stack.metadata_path = str(blocker / "metadata")

    result = run_cli(_args("capture", stack))

    _one_fatal_line(result, "cannot create the metadata table", str(blocker), "is a file, not a directory")


def test_capture_with_a_regular_file_where_the_metadata_table_should_be_exits_3(make_stack, tmp_path):
    stack = make_stack()
    occupied = tmp_path / "metadata"
    occupied.write_text("something that is not a Delta table")
    stack.metadata_path = str(occupied)

    result = run_cli(_args("capture", stack))

    _one_fatal_line(result, str(occupied), "not a Delta table directory")


def test_capture_with_an_unreachable_endpoint_exits_3_naming_the_endpoint_setting(make_stack):
    stack = make_stack()
    stack.endpoint_url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    stack.metadata_path = "s3://lake/metadata"

    result = run_cli(_args("capture", stack, aws__startup__timeout__seconds=0))

    _one_fatal_line(result, "cannot read the queue", "Could not connect", "s3events.aws.endpoint.url")


def test_capture_retries_an_unreachable_endpoint_for_the_startup_timeout_then_exits_3(make_stack):
    stack = make_stack()
    stack.endpoint_url = f"http://127.0.0.1:{free_port()}"  # nothing listens there

    result = run_cli(_args("capture", stack, aws__startup__timeout__seconds=2))

    assert result.returncode == 3, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "start-up check failed (attempt 1), retrying" in lines[0]  # it says so once per attempt
    assert lines[-1].startswith("s3events: fatal: cannot read the queue")
    assert "still failing after" in lines[-1] and "s3events.aws.endpoint.url" in lines[-1]
    assert "Traceback" not in result.stderr


def test_capture_without_any_credentials_exits_3_naming_the_credential_chain(make_stack, tmp_path):
    stack = make_stack()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_EC2_METADATA_DISABLED="true",
    )

    result = run_cli(_args("capture", stack), env=env)

    _one_fatal_line(result, "no AWS credentials found in the credential chain")


def test_capture_with_a_missing_queue_exits_3_naming_the_queue_key(make_stack):
    stack = make_stack()
    stack.queue_url = stack.queue_url.rsplit("/", 1)[0] + "/no-such-queue"

    result = run_cli(_args("capture", stack))

    _one_fatal_line(result, "no-such-queue", "s3events.source.queue.url")


def test_capture_with_the_metadata_path_holding_other_files_exits_3(make_stack, tmp_path):
    stack = make_stack()
    occupied = tmp_path / "metadata"
    occupied.mkdir()
    (occupied / "orders.csv").write_text("a,b\n")
    stack.metadata_path = str(occupied)

    result = run_cli(_args("capture", stack))

    _one_fatal_line(
        result, str(occupied), "'orders.csv'", "not a Delta table", "s3events.metadata.table.path"
    )


def test_capture_with_the_metadata_prefix_holding_other_objects_exits_3(make_stack, s3):
    stack = make_stack()
    s3.put_object(Bucket=stack.bucket, Key="lake/metadata/export.csv", Body=b"a,b\n")
    stack.metadata_path = f"s3://{stack.bucket}/lake/metadata"

    result = run_cli(_args("capture", stack))

    _one_fatal_line(result, stack.metadata_path, "'export.csv'", "not a Delta table")


def test_capture_on_a_directory_this_user_may_not_write_exits_3(make_stack, tmp_path):
    stack = make_stack()
    parent = tmp_path / "read-only"
    parent.mkdir()
    stack.metadata_path = str(parent / "metadata")
    with _unwritable(parent):
        result = run_cli(_args("capture", stack))

    _one_fatal_line(
        result, "cannot create the metadata table", "may not write", str(parent),
        "s3events.metadata.table.path",
    )


@contextlib.contextmanager
def _unwritable(directory: Path) -> Iterator[None]:
    """A directory this process's user may not create files in: mode 555, or for root (who may write
    anywhere) the immutable attribute, which binds root too."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(0o755)
        return
    if subprocess.run(["chattr", "+i", str(directory)], capture_output=True).returncode != 0:
        pytest.skip("running as root and chattr +i is not available: root may write anywhere")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True)


# -------------------------------------------------------------------------------------------- ingest


def test_ingest_with_a_target_in_a_missing_bucket_exits_3_before_spark_starts(make_stack):
    stack = make_stack()
    bucket = _missing_bucket()
    target = f"s3://{bucket}/events"

    result = run_cli(_ingest_args(stack, target))

    line = _one_fatal_line(result, target, "s3events.ingest.target.events.path", "target table of 'events'")
    assert f"the bucket {bucket} does not exist" in line


def test_ingest_with_the_error_table_in_a_missing_bucket_names_the_error_table_key(make_stack, tmp_path):
    stack = make_stack()
    errors = f"s3://{_missing_bucket()}/events_errors"

    result = run_cli(
        _ingest_args(stack, str(tmp_path / "events"), ingest__target__events__error__table__path=errors)
    )

    _one_fatal_line(result, errors, "s3events.ingest.target.events.error.table.path")


def test_ingest_with_the_metadata_table_in_a_missing_bucket_exits_3(make_stack, tmp_path):
    stack = make_stack()
    stack.metadata_path = f"s3://{_missing_bucket()}/metadata"

    result = run_cli(_ingest_args(stack, str(tmp_path / "events")))

    _one_fatal_line(result, "cannot read the metadata table", stack.metadata_path)


def test_ingest_with_a_target_under_a_regular_file_exits_3(make_stack, tmp_path):
    stack = make_stack()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    target = str(blocker / "events")

    result = run_cli(_ingest_args(stack, target))

    _one_fatal_line(result, target, "is a file, not a directory", "s3events.ingest.target.events.path")


# ---------------------------------------------------------------------------- backfill, status, maintain


def test_backfill_with_the_metadata_table_in_a_missing_bucket_exits_3(make_stack):
    stack = make_stack()
    stack.metadata_path = f"s3://{_missing_bucket()}/metadata"

    result = run_cli(["backfill", "--source", f"s3://{stack.bucket}", *_conf(stack)])

    _one_fatal_line(result, stack.metadata_path, "does not exist", "s3events.metadata.table.path")


def test_status_with_an_unreachable_endpoint_exits_3_at_once_naming_the_table(make_stack):
    stack = make_stack()
    stack.endpoint_url = f"http://127.0.0.1:{free_port()}"
    stack.metadata_path = "s3://lake/metadata"

    result = run_cli(["status", *_conf(stack)])  # a health check does not wait for the endpoint

    _one_fatal_line(result, "cannot reach S3", stack.metadata_path, "s3events.aws.endpoint.url")


def test_maintain_with_a_target_in_a_missing_bucket_exits_3(make_stack, tmp_path):
    stack = make_stack()
    target = f"s3://{_missing_bucket()}/events"
    conf = _conf(
        stack, ingest__targets="events", ingest__target__events__path=target,
        ingest__target__events__format="json",
    )

    result = run_cli(["maintain", "--table", "target:events", *conf])

    _one_fatal_line(result, target, "does not exist", "s3events.ingest.target.events.path")


@pytest.mark.parametrize("command", ["ingest", "backfill", "maintain"])
def test_every_command_with_an_unreachable_endpoint_exits_3_in_one_line(command, make_stack, tmp_path):
    stack = make_stack()
    bucket = stack.bucket
    stack.endpoint_url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    stack.metadata_path = f"s3://{bucket}/metadata"
    conf = _conf(
        stack, aws__startup__timeout__seconds=0, ingest__targets="events",
        ingest__target__events__path=str(tmp_path / "events"), ingest__target__events__format="json",
    )
    extra = {"ingest": ["--once"], "backfill": ["--source", f"s3://{bucket}"], "maintain": []}[command]

    result = run_cli([command, *extra, *conf])

    _one_fatal_line(result, "cannot reach S3", stack.metadata_path, "s3events.aws.endpoint.url")


def test_status_on_a_metadata_table_of_a_newer_schema_version_exits_3(make_stack, tmp_path):
    stack = make_stack()
    stack.metadata_path = str(tmp_path / "metadata")
    delta.open_or_create(stack.metadata_path, SCHEMA, kind="metadata", schema_version=99, storage_options={})

    result = run_cli(["status", *_conf(stack)])

    _one_fatal_line(result, stack.metadata_path, "schema version 99", "upgrade s3events")


# ------------------------------------------------------------ tables opened later: the same one line

SCHEMA = pa.schema([("a", pa.int64())])


def test_creating_a_table_in_a_missing_bucket_is_fatal_in_one_line(aws_options):
    path = f"s3://{_missing_bucket()}/t"
    with pytest.raises(FatalError) as raised:
        delta.open_or_create(
            path, SCHEMA, kind="metadata", schema_version=1,
            storage_options=aws.delta_storage_options(aws_options),
        )
    message = str(raised.value)
    assert message.startswith(f"cannot open the metadata table at {path}: the bucket ")
    assert "\x1b" not in message and "\n" not in message


def test_creating_a_table_under_a_regular_file_is_fatal_in_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    path = str(blocker / "t")
    with pytest.raises(FatalError) as raised:
        delta.open_or_create(path, SCHEMA, kind="target", schema_version=1, storage_options={})
    message = str(raised.value)
    assert message.startswith(f"cannot create the target table at {path}: a parent of the path is a file")
    assert "\n" not in message


def test_opening_a_table_on_a_refused_endpoint_is_transient_in_one_line(aws_options):
    options = {**aws.delta_storage_options(aws_options), "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}
    options["max_retries"] = "0"  # object_store's own retries would only make the test slower
    with pytest.raises(TransientError) as raised:
        delta.open_table("s3://lake/t", options, kind="target")
    message = str(raised.value)
    assert "Connection refused" in message and "s3events.aws.endpoint.url" in message
    assert "\x1b" not in message and "\n" not in message


# ------------------------------------------------------- access denied: moto enforcing IAM policies

_IAM_SETUP_ACTIONS = 3  # create_user, put_user_policy, create_access_key; every later request is checked


@pytest.fixture(scope="module")
def iam_endpoint() -> Iterator[tuple[LocalEndpoint, dict[str, str]]]:
    """A moto server of its own that enforces IAM once an admin user exists; yields the admin's keys."""
    with LocalEndpoint(env={"INITIAL_NO_AUTH_ACTION_COUNT": str(_IAM_SETUP_ACTIONS)}).start() as endpoint:
        iam = boto3.client("iam", endpoint_url=endpoint.url, region_name="us-east-1")
        iam.create_user(UserName="admin")
        iam.put_user_policy(UserName="admin", PolicyName="all", PolicyDocument=_allow(["*"]))
        yield endpoint, _keys(iam.create_access_key(UserName="admin"))


def _allow(actions: list[str]) -> str:
    statement = {"Effect": "Allow", "Action": actions, "Resource": "*"}
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def _keys(created: dict[str, Any]) -> dict[str, str]:
    key = created["AccessKey"]
    return {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}


def _client(service: str, endpoint: LocalEndpoint, keys: dict[str, str]) -> Any:
    return boto3.client(
        service, endpoint_url=endpoint.url, region_name="us-east-1",
        aws_access_key_id=keys["AWS_ACCESS_KEY_ID"], aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"],
    )


def _user_with(endpoint: LocalEndpoint, admin: dict[str, str], actions: list[str]) -> dict[str, str]:
    """The environment of a process whose credentials allow `actions` on S3 (and SQS) only."""
    iam = _client("iam", endpoint, admin)
    name = f"capture-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName="s3", PolicyDocument=_allow(actions))
    iam.put_user_policy(UserName=name, PolicyName="sqs", PolicyDocument=_allow(["sqs:*"]))
    return {**os.environ, **_keys(iam.create_access_key(UserName=name))}


def _iam_stack(endpoint: LocalEndpoint, admin: dict[str, str]) -> list[str]:
    """`capture --once` arguments for a fresh bucket and queue on the IAM-enforcing endpoint."""
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    _client("s3", endpoint, admin).create_bucket(Bucket=bucket)
    queue = _client("sqs", endpoint, admin).create_queue(QueueName=bucket)["QueueUrl"]
    conf = {
        "s3events.aws.endpoint.url": endpoint.url,
        "s3events.aws.region": "us-east-1",
        "s3events.source.queue.url": queue,
        "s3events.source.queue.long.poll.wait": "0",
        "s3events.metadata.table.path": f"s3://{bucket}/metadata",
    }
    return ["capture", "--once", *(arg for k, v in conf.items() for arg in ("--conf", f"{k}={v}"))]


def test_capture_with_credentials_that_may_not_write_the_table_prefix_exits_3(iam_endpoint):
    endpoint, admin = iam_endpoint
    env = _user_with(endpoint, admin, ["s3:ListBucket", "s3:GetObject"])

    result = run_cli(_iam_stack(endpoint, admin), env=env)

    line = _one_fatal_line(result, "cannot write the metadata table", "access denied", "s3:PutObject")
    assert "s3events.metadata.table.path" in line


def test_capture_with_credentials_that_may_not_list_the_table_prefix_exits_3(iam_endpoint):
    endpoint, admin = iam_endpoint
    env = _user_with(endpoint, admin, ["s3:GetObject", "s3:PutObject"])

    result = run_cli(_iam_stack(endpoint, admin), env=env)

    _one_fatal_line(result, "cannot list the metadata table", "access denied", "s3:ListBucket")
