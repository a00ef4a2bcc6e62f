"""`s3events demo`: the pipeline end to end on an embedded local endpoint, nothing to set up.

A moto server on 127.0.0.1, a bucket with an S3→SQS notification, sample files PUT (keys that need
decoding, a multipart upload whose two events are one object), a redelivered message and a poison
message, then capture until drained and a short summary.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from s3events.adapters import aws, provision
from s3events.adapters.metadata_table import MetadataTable
from s3events.capture.service import run_capture
from s3events.config import load_settings
from s3events.errors import FatalError
from s3events.local_endpoint import LOCAL_ENV, LocalEndpoint

_MARKER = ".s3events-demo"
SAMPLE_KEYS = [
    "events/2026/11/22/orders {i}.json",
    "events/dt=2026-11-22/a+b=c%d {i}.json",
    "events/ünïcødé/{i}/nested/deeper.json",
]


def _fresh_data_dir(data_dir: Path) -> None:
    if data_dir.exists():
        if not (data_dir / _MARKER).exists():
            raise FatalError(f"{data_dir} exists and was not made by the demo; choose another --data-dir")
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)
    (data_dir / _MARKER).write_text("made by s3events demo; deleted by the next demo run\n")


def run_demo(*, data_dir: str = "demo-data", files: int = 20) -> None:
    root = Path(data_dir).resolve()
    _fresh_data_dir(root)
    os.environ.update(LOCAL_ENV)  # the local endpoint's throwaway credentials, this process only
    with LocalEndpoint(log_path=root / "moto_server.log") as endpoint:
        options = aws.AwsOptions(region="us-east-1", endpoint_url=endpoint.url)
        print(f"local S3/SQS endpoint: {endpoint.url}")
        stack = provision.notifying_bucket(options, bucket="s3events-demo-landing", queue="s3events-demo")
        s3 = aws.client(options, "s3")
        sqs = aws.client(options, "sqs")
        for i in range(files):
            key = SAMPLE_KEYS[i % len(SAMPLE_KEYS)].format(i=i)
            body = "".join(f'{{"order": {i}, "line": {n}}}\n' for n in range(10)).encode()
            s3.put_object(Bucket=stack.bucket, Key=key, Body=body)
        # A multipart upload: moto sends both Put and CompleteMultipartUpload for one object.
        upload = s3.create_multipart_upload(Bucket=stack.bucket, Key="events/big/multipart.json")
        part = s3.upload_part(
            Bucket=stack.bucket,
            Key="events/big/multipart.json",
            UploadId=upload["UploadId"],
            PartNumber=1,
            Body=b'{"big": true}\n',
        )
        s3.complete_multipart_upload(
            Bucket=stack.bucket,
            Key="events/big/multipart.json",
            UploadId=upload["UploadId"],
            MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
        )
        # A redelivered notification (same body again) and a poison message.
        peeked = sqs.receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        event_body = next(m["Body"] for m in peeked["Messages"] if '"Records"' in m["Body"])
        sqs.send_message(QueueUrl=stack.queue_url, MessageBody=event_body)
        sqs.send_message(QueueUrl=stack.queue_url, MessageBody="this is not an S3 event")

        settings = load_settings(
            None,
            [
                f"s3events.aws.endpoint.url={endpoint.url}",
                "s3events.aws.region=us-east-1",
                f"s3events.source.queue.url={stack.queue_url}",
                "s3events.source.queue.long.poll.wait=1",
                f"s3events.metadata.table.path={root / 'metadata'}",
            ],
        )
        settings.validate_for("capture")
        totals = run_capture(settings, once=True)
        metadata = MetadataTable(str(root / "metadata"), storage_options={})
        print()
        print("s3events demo summary")
        print(f"  files PUT                 {files + 1}")
        print(f"  messages received         {totals.received}")
        print(f"  events captured           {totals.written}")
        print(f"  duplicates dropped        {totals.duplicates}")
        print(f"  poison quarantined        {totals.poison}")
        print(f"  metadata table            {root / 'metadata'}")
        print(f"  metadata table version    {metadata.version()}")
        print(f"  metadata table rows       {metadata.row_count()}")
