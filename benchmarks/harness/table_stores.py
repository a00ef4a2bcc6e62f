"""Where a benchmark keeps its Delta tables: a local directory, moto_server or gofakes3, optionally with
each table's S3 requests counted by a proxy in a process of its own."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from benchmarks.harness.endpoints import LOCAL_ENV, LocalEndpoint
from benchmarks.harness.gofakes3 import CLIENT_ENV, GoFakeS3
from s3events.dev.fault_proxy import ProxyProcess, proxy_process
from s3events.infra import aws


@dataclass
class Store:
    """Where a run keeps its tables: `path(variant, table)`, with delta storage options and AwsOptions;
    `counter` counts the tables' S3 requests (--count-requests)."""

    root: str
    storage: dict[str, str]
    options: aws.AwsOptions
    counter: ProxyProcess | None = None
    bucket_per_table: bool = False

    def path(self, variant: str, table: str) -> str:
        if not self.bucket_per_table:
            return f"{self.root}/{variant}/{table}"
        # one bucket per table: a listing never passes another table's keys, whatever the stand-in's LIST
        bucket = f"long-run-{variant}-{table}".lower()
        aws.client(self.options, "s3").create_bucket(Bucket=bucket)
        return f"s3://{bucket}/table"


@contextmanager
def endpoint_for(kind: str, *, count_requests: bool = False) -> Iterator[Store]:
    """The store of a local directory, the moto endpoint or gofakes3; with `count_requests`, table I/O
    goes through a counting proxy in a process of its own."""
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "local":
            yield Store(tmp, {}, aws.AwsOptions())
            return
        os.environ.update(LOCAL_ENV | (CLIENT_ENV if kind == "gofakes3" else {}))
        server = GoFakeS3() if kind == "gofakes3" else LocalEndpoint()
        with server as endpoint:
            upstream = aws.AwsOptions(region="us-east-1", endpoint_url=endpoint.url)
            if kind == "moto":
                aws.client(upstream, "s3").create_bucket(Bucket="lake")
            separate = kind == "gofakes3"
            if not count_requests:
                yield Store("s3://lake", aws.delta_storage_options(upstream), upstream, None, separate)
                return
            with proxy_process(endpoint.url) as proxy:
                options = aws.AwsOptions(region="us-east-1", endpoint_url=proxy.url)
                yield Store("s3://lake", aws.delta_storage_options(options), options, proxy, separate)
