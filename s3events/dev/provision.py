"""Create a bucket, a queue and the S3→SQS (optionally S3→SNS→SQS) notification between them.

Used by the local demo, the tests, the benchmarks and docker-compose's one-shot setup service
(`python -m s3events.dev.provision`). Production paths are made by `s3events setup` (s3events/setup/), whose
notification rules (event types, key filter) this module uses too.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from s3events.infra import aws
from s3events.setup.notifications import ALL_OBJECT_EVENTS, key_filter


@dataclass(frozen=True, slots=True)
class Provisioned:
    bucket: str
    queue_url: str
    queue_arn: str


def _ensure_bucket(s3: Any, bucket: str) -> None:
    try:
        s3.head_bucket(Bucket=bucket)
    except s3.exceptions.ClientError:
        s3.create_bucket(Bucket=bucket)


def create_queue(
    options: aws.AwsOptions, name: str, *, attributes: dict[str, str] | None = None
) -> tuple[str, str]:
    sqs = aws.client(options, "sqs")
    url = sqs.create_queue(QueueName=name, Attributes=attributes or {})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def notifying_bucket(
    options: aws.AwsOptions,
    *,
    bucket: str,
    queue: str,
    prefix: str | None = None,
    via_sns: bool = False,
    queue_attributes: dict[str, str] | None = None,
) -> Provisioned:
    """A bucket whose object events reach the queue, directly or through an SNS topic."""
    s3 = aws.client(options, "s3")
    _ensure_bucket(s3, bucket)
    queue_url, queue_arn = create_queue(options, queue, attributes=queue_attributes)
    rule: dict[str, Any] = {"Events": list(ALL_OBJECT_EVENTS)}
    filter_ = key_filter(prefix or "")
    if filter_:
        rule["Filter"] = filter_
    if via_sns:
        sns = aws.client(options, "sns")
        topic_arn = sns.create_topic(Name=f"{queue}-topic")["TopicArn"]
        sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=queue_arn)
        config = {"TopicConfigurations": [{"TopicArn": topic_arn, **rule}]}
    else:
        config = {"QueueConfigurations": [{"QueueArn": queue_arn, **rule}]}
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration=config)
    return Provisioned(bucket=bucket, queue_url=queue_url, queue_arn=queue_arn)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Create a notifying bucket and its queue (local stacks).")
    parser.add_argument("--endpoint-url", required=True)
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--queue", required=True)
    parser.add_argument("--prefix")
    parser.add_argument("--metadata-bucket", help="also create this bucket (for the Delta tables)")
    args = parser.parse_args(argv)
    options = aws.AwsOptions(region=args.region, endpoint_url=args.endpoint_url)
    result = notifying_bucket(options, bucket=args.bucket, queue=args.queue, prefix=args.prefix)
    if args.metadata_bucket:
        _ensure_bucket(aws.client(options, "s3"), args.metadata_bucket)
    print(json.dumps({"bucket": result.bucket, "queue_url": result.queue_url}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
