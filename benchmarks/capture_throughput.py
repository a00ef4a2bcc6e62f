"""Capture throughput (events/s) against a plain receive+delete loop on the same moto endpoint.

    .venv/bin/python benchmarks/capture_throughput.py [--messages 5000] [--rounds 3]

Both sides drain a queue filled with the same number of S3 notification messages. The baseline does
only ReceiveMessage(10) + DeleteMessageBatch, sequentially; ours parses, deduplicates, commits to a
local metadata Delta table, then deletes. Rounds alternate; medians and their ratio are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from s3events.adapters import aws, provision
from s3events.capture.service import run_capture
from s3events.config import load_settings
from s3events.local_endpoint import LOCAL_ENV, LocalEndpoint


def notification(bucket: str, key: str, n: int) -> str:
    return json.dumps(
        {
            "Records": [
                {
                    "eventVersion": "2.1",
                    "eventSource": "aws:s3",
                    "awsRegion": "us-east-1",
                    "eventTime": "2026-11-22T05:00:00.000Z",
                    "eventName": "ObjectCreated:Put",
                    "s3": {
                        "s3SchemaVersion": "1.0",
                        "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
                        "object": {
                            "key": quote_plus(key),
                            "size": 100 + n,
                            "eTag": f"{n:032x}",
                            "sequencer": f"{n:018X}",
                        },
                    },
                }
            ]
        }
    )


def fill(sqs: Any, queue_url: str, count: int, round_no: int) -> None:
    bodies = [notification("bench", f"round-{round_no}/part {i}.json", i) for i in range(count)]

    def send(start: int) -> None:
        entries = [{"Id": str(j), "MessageBody": body} for j, body in enumerate(bodies[start : start + 10])]
        sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(send, range(0, count, 10)))


def baseline(sqs: Any, queue_url: str, count: int) -> float:
    started = time.perf_counter()
    done = 0
    while done < count:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        )
        if not messages:
            break
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
        )
        done += len(messages)
    return done / (time.perf_counter() - started)


def ours(endpoint_url: str, queue_url: str, table: str, count: int) -> float:
    settings = load_settings(
        None,
        [
            f"s3events.aws.endpoint.url={endpoint_url}",
            "s3events.aws.region=us-east-1",
            f"s3events.source.queue.url={queue_url}",
            "s3events.source.queue.long.poll.wait=1",
            f"s3events.metadata.table.path={table}",
        ],
    )
    started = time.perf_counter()
    totals = run_capture(settings, once=True)
    elapsed = time.perf_counter() - started
    assert totals.written == count, f"captured {totals.written} of {count}"
    return totals.received / elapsed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.update(LOCAL_ENV)
    with LocalEndpoint() as endpoint, tempfile.TemporaryDirectory() as tmp:
        options = aws.AwsOptions(region="us-east-1", endpoint_url=endpoint.url)
        sqs = aws.client(options, "sqs")
        base_q, _ = provision.create_queue(options, "bench-baseline")
        ours_q, _ = provision.create_queue(options, "bench-ours")
        plain, captured = [], []
        for r in range(args.rounds):
            fill(sqs, base_q, args.messages, r)
            plain.append(baseline(sqs, base_q, args.messages))
            fill(sqs, ours_q, args.messages, r)
            captured.append(ours(endpoint.url, ours_q, f"{tmp}/metadata", args.messages))
            print(f"round {r + 1}: baseline {plain[-1]:8.0f} msg/s   capture {captured[-1]:8.0f} events/s")
        b, c = statistics.median(plain), statistics.median(captured)
        print(f"median baseline receive+delete: {b:8.0f} msg/s")
        print(f"median s3events capture:        {c:8.0f} events/s")
        print(f"ratio capture/baseline:         {c / b:8.2f}")
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (delta-rs readers can abort there)


if __name__ == "__main__":
    main()
