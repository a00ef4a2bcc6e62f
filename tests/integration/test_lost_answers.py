"""Requests that succeed but whose answer is lost: the caller sees a failure of something that happened.
The fault proxy (s3events.dev.fault_proxy) sits between the real commands and the local endpoint and
cuts the connection after the endpoint answered. Nothing may be lost or duplicated."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from deltalake import DeltaTable

from s3events.dev.fault_proxy import Fault, FaultProxy
from s3events.infra import aws
from tests.conftest import Stack, run_cli, spark_env, through_proxy

pytestmark = [pytest.mark.integration, pytest.mark.process, pytest.mark.chaos]

VERSION = r"/_delta_log/{:020d}\.json"


@pytest.fixture
def proxy(endpoint) -> Iterator[FaultProxy]:
    with FaultProxy(endpoint.url) as running:
        yield running


def _capture(stack: Stack, proxy: FaultProxy) -> list[str]:
    return through_proxy(["capture", "--once"], stack, proxy)


def _rows(stack: Stack, aws_options: aws.AwsOptions) -> list[str]:
    table = DeltaTable(stack.metadata_path, storage_options=aws.delta_storage_options(aws_options))
    return [str(key) for key in table.to_pyarrow_table(columns=["key"]).column("key").to_pylist()]


def test_a_metadata_commit_whose_answer_is_lost_is_neither_lost_nor_duplicated(
    make_stack, s3, proxy, aws_options
):
    stack = make_stack(metadata_on_s3=True)
    keys = [f"in/{n}.json" for n in range(3)]
    for key in keys:
        s3.put_object(Bucket=stack.bucket, Key=key, Body=b'{"a": 1}\n')
    # Version 0 creates the table; version 1 is the MERGE of the events: its PUT lands, its answer is lost.
    proxy.add(Fault("drop_after", VERSION.format(1), method="PUT"))

    first = run_cli(_capture(stack, proxy))
    second = run_cli(_capture(stack, proxy))  # whatever the first left in the queue

    assert [i.kind for i in proxy.injected] == ["drop_after"], proxy.injected
    assert first.returncode in (0, 1), first.stderr
    assert second.returncode == 0, second.stderr
    assert Counter(_rows(stack, aws_options)) == Counter(keys)


def test_a_delete_whose_answer_is_lost_adds_no_row_when_the_messages_come_back(
    make_stack, s3, sqs, proxy, aws_options
):
    stack = make_stack(metadata_on_s3=True, VisibilityTimeout="1")
    keys = [f"in/{n}.json" for n in range(3)]
    for key in keys:
        s3.put_object(Bucket=stack.bucket, Key=key, Body=b'{"a": 1}\n')
    # Every DeleteMessageBatch lands but its answer is lost: capture believes the delete failed.
    proxy.add(Fault("drop_after", operation="DeleteMessageBatch", times=1_000))

    first = run_cli(_capture(stack, proxy))

    assert any(i.operation == "DeleteMessageBatch" for i in proxy.injected), proxy.injected
    assert first.returncode == 0, first.stderr  # a failed delete is harmless: the events are committed
    assert Counter(_rows(stack, aws_options)) == Counter(keys)
    depth = sqs.get_queue_attributes(QueueUrl=stack.queue_url, AttributeNames=["All"])["Attributes"]
    in_queue = (depth["ApproximateNumberOfMessages"], depth["ApproximateNumberOfMessagesNotVisible"])
    assert in_queue == ("0", "0")


@pytest.mark.parametrize("version", [0, 1], ids=["the-commit-creating-the-target", "a-later-commit"])
def test_an_ingest_commit_whose_answer_is_lost_lands_its_lines_exactly_once(
    version, make_stack, s3, proxy, aws_options
):
    stack = make_stack(metadata_on_s3=True)
    lake = stack.metadata_path.rsplit("/", 1)[0]
    for n in range(2):
        body = f'{{"n": {n}}}\n{{"n": {n + 10}}}\n'.encode()
        s3.put_object(Bucket=stack.bucket, Key=f"in/{n}.json", Body=body)
    assert run_cli(_capture(stack, proxy)).returncode == 0
    target = f"{lake}/events"
    conf = {
        "ingest__targets": "events",
        "ingest__target__events__path": target,
        "ingest__target__events__format": "json",
        "ingest__target__events__max__files__per__batch": 1,
        "spark__master": "local[1]",
    }
    args = through_proxy(["ingest", "--once"], stack, proxy, **conf)
    # One file per batch: version 0 creates the target with the first file, version 1 adds the second.
    proxy.add(Fault("drop_after", "/events" + VERSION.format(version), method="PUT"))

    first = run_cli(args, env=spark_env(), timeout=300)
    second = run_cli(args, env=spark_env(), timeout=300)  # whatever the first left to do

    assert [i.kind for i in proxy.injected] == ["drop_after"], (proxy.injected, first.stderr)
    assert first.returncode in (0, 1), first.stderr
    assert second.returncode == 0, second.stderr
    table = DeltaTable(target, storage_options=aws.delta_storage_options(aws_options))
    assert Counter(table.to_pyarrow_table(columns=["n"]).column("n").to_pylist()) == Counter([0, 10, 1, 11])
