"""`MetadataFeed.has_version`, what an idle ingest checks between cycles to start a batch right after
capture's commit: a HEAD of the next log entry on S3 (moto), a stat on a local table, both agreeing with
the versions the table really has."""

from __future__ import annotations

import pytest

from s3events.capture.service import run_capture
from s3events.config import load_settings
from s3events.infra import aws
from s3events.ingest.feed import MetadataFeed
from tests.conftest import Stack

pytestmark = pytest.mark.integration


def captured(stack: Stack, s3, count: int) -> None:
    for n in range(count):
        s3.put_object(Bucket=stack.bucket, Key=f"in/{n}.json", Body=b"{}\n")
    settings = load_settings(None, stack.conf())
    settings.validate_for("capture")
    run_capture(settings, once=True)


@pytest.mark.parametrize("on_s3", [False, True], ids=["local", "s3"])
def test_has_version_is_true_for_committed_versions_only(make_stack, s3, aws_options, on_s3):
    stack = make_stack(metadata_on_s3=on_s3)
    captured(stack, s3, 2)
    storage = aws.FreshStorageOptions(aws_options)
    feed = MetadataFeed(stack.metadata_path, storage_options=storage, aws_options=aws_options)
    latest = feed.latest_version()
    assert latest is not None and latest >= 1

    assert all(feed.has_version(v) for v in range(latest + 1))
    assert not feed.has_version(latest + 1)

    captured(stack, s3, 1)  # capture commits again: the check sees it before any listing
    assert feed.has_version(latest + 1)


def test_without_aws_options_an_s3_table_is_checked_by_listing(make_stack, s3, aws_options):
    stack = make_stack(metadata_on_s3=True)
    captured(stack, s3, 1)
    feed = MetadataFeed(stack.metadata_path, storage_options=aws.FreshStorageOptions(aws_options))
    latest = feed.latest_version()
    assert latest is not None

    assert feed.has_version(latest)
    assert not feed.has_version(latest + 1)
