"""The fault proxy forwards what it does not break unchanged: readers behind it see the objects as stored."""

from __future__ import annotations

import boto3
import pyarrow.fs as pafs
import pytest

from s3events.dev.fault_proxy import FaultProxy
from s3events.dev.local_endpoint import LOCAL_ENV

pytestmark = pytest.mark.integration


def test_a_head_through_the_proxy_reports_the_objects_length(endpoint) -> None:
    """pyarrow sizes a file from HEAD: a HEAD answer of length 0 made it read checkpoints as empty."""
    with FaultProxy(endpoint.url) as proxy:
        s3 = boto3.client(
            "s3",
            endpoint_url=proxy.url,
            region_name=LOCAL_ENV["AWS_REGION"],
            aws_access_key_id=LOCAL_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=LOCAL_ENV["AWS_SECRET_ACCESS_KEY"],
        )
        s3.create_bucket(Bucket="proxied-head")
        s3.put_object(Bucket="proxied-head", Key="part.parquet", Body=b"x" * 1234)

        assert s3.head_object(Bucket="proxied-head", Key="part.parquet")["ContentLength"] == 1234
        fs = pafs.S3FileSystem(
            endpoint_override=proxy.url,
            scheme="http",
            region=LOCAL_ENV["AWS_REGION"],
            access_key=LOCAL_ENV["AWS_ACCESS_KEY_ID"],
            secret_key=LOCAL_ENV["AWS_SECRET_ACCESS_KEY"],
        )
        assert fs.get_file_info("proxied-head/part.parquet").size == 1234
        with fs.open_input_file("proxied-head/part.parquet") as f:
            assert f.read() == b"x" * 1234
