"""The S3 event notification body S3 sends for one created object, for benchmarks that feed a queue
themselves (a local SQS that S3 cannot notify, or a queue filled ahead of a timed drain)."""

from __future__ import annotations

import json
from urllib.parse import quote_plus


def created(*, bucket: str, key: str, size: int, etag: str, sequencer: int, event_time: str) -> str:
    """`event_time` as S3 writes it, e.g. "2026-11-22T05:00:00.000Z"; the key URL-encoded as S3 does."""
    record = {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": "us-east-1",
        "eventTime": event_time,
        "eventName": "ObjectCreated:Put",
        "s3": {
            "s3SchemaVersion": "1.0",
            "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
            "object": {"key": quote_plus(key), "size": size, "eTag": etag, "sequencer": f"{sequencer:018X}"},
        },
    }
    return json.dumps({"Records": [record]})
