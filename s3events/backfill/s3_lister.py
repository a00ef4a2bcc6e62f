"""Listing S3 objects for backfill, through boto3: one page (up to 1000 keys) per call.

Unversioned buckets are listed with ListObjectsV2. Versioned buckets (versioning Enabled or Suspended)
are listed with ListObjectVersions and only the latest version of each key is kept; delete markers and
noncurrent versions are skipped. Each page call is retried on transient errors (throttling, 5xx, dropped
connections) with its own continuation marker, so a retry never repeats or skips a page. Keys come back
URL-decoded exactly once (botocore asks for `EncodingType=url` and decodes the answer).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from s3events.backfill.model import ListedObject, Page
from s3events.events.model import bare_etag
from s3events.infra import aws

MAX_PAGE_SIZE = 1000


class S3Lister:
    """Lists objects under `s3://bucket/prefix`. Thread-safe: one boto3 client shared by the workers."""

    def __init__(self, options: aws.AwsOptions, *, page_size: int = MAX_PAGE_SIZE) -> None:
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be 1-{MAX_PAGE_SIZE}, got {page_size}")
        self._s3 = aws.client(options, "s3")
        self._page_size = page_size
        self._versioned: dict[str, bool] = {}
        self._lock = threading.Lock()

    def is_versioned(self, bucket: str) -> bool:
        """Whether versioning is, or once was, on (Enabled or Suspended). Asked once per bucket."""
        with self._lock:
            known = self._versioned.get(bucket)
        if known is not None:
            return known
        answer = _retrying_call(
            f"read the versioning state of bucket {bucket}", self._s3.get_bucket_versioning, Bucket=bucket
        )
        versioned = answer.get("Status") in ("Enabled", "Suspended")
        with self._lock:
            self._versioned[bucket] = versioned
        return versioned

    def pages(self, bucket: str, prefix: str = "", *, delimiter: str | None = None) -> Iterator[Page]:
        """The objects under the prefix, page by page. With a delimiter: only the objects directly under
        the prefix, plus the common prefixes one level down (to list each of those separately)."""
        if self.is_versioned(bucket):
            yield from self._version_pages(bucket, prefix, delimiter)
        else:
            yield from self._object_pages(bucket, prefix, delimiter)

    def _object_pages(self, bucket: str, prefix: str, delimiter: str | None) -> Iterator[Page]:
        params: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": self._page_size}
        if delimiter:
            params["Delimiter"] = delimiter
        action = f"list s3://{bucket}/{prefix}"
        while True:
            answer = _retrying_call(action, self._s3.list_objects_v2, **params)
            objects = [_listed(bucket, item, None) for item in answer.get("Contents", [])]
            yield Page(objects, _prefixes(answer))
            token = answer.get("NextContinuationToken")
            if not answer.get("IsTruncated") or not token:
                return
            params["ContinuationToken"] = token

    def _version_pages(self, bucket: str, prefix: str, delimiter: str | None) -> Iterator[Page]:
        params: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": self._page_size}
        if delimiter:
            params["Delimiter"] = delimiter
        action = f"list the versions in s3://{bucket}/{prefix}"
        while True:
            answer = _retrying_call(action, self._s3.list_object_versions, **params)
            objects = [
                _listed(bucket, item, item.get("VersionId"))
                for item in answer.get("Versions", [])
                if item.get("IsLatest")
            ]
            yield Page(objects, _prefixes(answer))
            if not answer.get("IsTruncated"):
                return
            params["KeyMarker"] = answer.get("NextKeyMarker", "")
            if answer.get("NextVersionIdMarker"):
                params["VersionIdMarker"] = answer["NextVersionIdMarker"]
            else:
                params.pop("VersionIdMarker", None)


def _retrying_call(action: str, fn: Any, /, **params: Any) -> Any:
    @aws.retrying()
    def attempt() -> Any:
        return aws.call(action, fn, **params)

    return attempt()


def _prefixes(answer: dict[str, Any]) -> list[str]:
    return [p["Prefix"] for p in answer.get("CommonPrefixes", []) if "Prefix" in p]


def _listed(bucket: str, item: dict[str, Any], version_id: str | None) -> ListedObject:
    etag = bare_etag(str(item.get("ETag", "")))
    modified: datetime = item["LastModified"]
    return ListedObject(
        bucket=bucket,
        key=item["Key"],
        size=int(item.get("Size", 0)),
        etag=etag,
        last_modified=modified.astimezone(UTC),
        version_id=version_id,
    )
