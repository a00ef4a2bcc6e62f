"""Capture throughput (events/s) against a plain receive+delete loop on the same moto endpoint.

    .venv/bin/python benchmarks/capture_throughput.py [--messages 200] [--rounds 10]

moto's SQS costs O(queue depth) per call, so each round fills the queue with `--messages` S3
notifications and then drains it; only the drains are timed. The baseline does ReceiveMessage(10) +
DeleteMessageBatch sequentially; ours parses, deduplicates, commits to a local metadata Delta table
(one commit per batch) and deletes. Rounds alternate between the two; medians and the ratio are printed.

moto also scans in-flight messages on every receive, so holding a batch until its commit (which the
exactly-once order requires) costs more per receive here than on real SQS; the default batch of 50
keeps that artifact small. Real deployments use the larger default (1000) to amortise S3 commits.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from s3events.capture.service import build_capture
from s3events.config import load_settings
from s3events.dev import provision
from s3events.dev.local_endpoint import LOCAL_ENV, LocalEndpoint
from s3events.infra import aws


def notification(key: str, n: int) -> str:
    record = {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": "us-east-1",
        "eventTime": "2026-11-22T05:00:00.000Z",
        "eventName": "ObjectCreated:Put",
        "s3": {
            "s3SchemaVersion": "1.0",
            "bucket": {"name": "bench", "arn": "arn:aws:s3:::bench"},
            "object": {
                "key": quote_plus(key),
                "size": 100 + n,
                "eTag": f"{n:032x}",
                "sequencer": f"{n:018X}",
            },
        },
    }
    return json.dumps({"Records": [record]})


def fill(sqs: Any, queue_url: str, count: int, round_no: int) -> None:
    bodies = [notification(f"round-{round_no}/part {i}.json", round_no * count + i) for i in range(count)]
    for start in range(0, count, 10):
        entries = [{"Id": str(j), "MessageBody": b} for j, b in enumerate(bodies[start : start + 10])]
        sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)


def drain_baseline(sqs: Any, queue_url: str) -> tuple[int, float]:
    started, done = time.perf_counter(), 0
    while True:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return done, time.perf_counter() - started
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
        )
        done += len(messages)


def drain_capture(capture: Any) -> tuple[int, float]:
    started, done = time.perf_counter(), 0
    while (result := capture.run_once()).received:
        done += result.written
        if os.environ.get("BENCH_VERBOSE"):
            print("   ", result.log_line())
    return done, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=200, help="queue depth per round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=50, help="s3events.source.queue.max.messages.per.batch")
    parser.add_argument(
        "--concurrency", type=int, default=1, help="s3events.source.queue.receive.concurrency"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.update(LOCAL_ENV)
    with LocalEndpoint() as endpoint, tempfile.TemporaryDirectory() as tmp:
        options = aws.AwsOptions(region="us-east-1", endpoint_url=endpoint.url)
        sqs = aws.client(options, "sqs")
        base_q, _ = provision.create_queue(options, "bench-baseline")
        ours_q, _ = provision.create_queue(options, "bench-ours")
        settings = load_settings(
            None,
            [
                f"s3events.aws.endpoint.url={endpoint.url}",
                "s3events.aws.region=us-east-1",
                f"s3events.source.queue.url={ours_q}",
                "s3events.source.queue.long.poll.wait=0",  # the baseline does not long-poll either
                f"s3events.metadata.table.path={tmp}/metadata",
                f"s3events.source.queue.max.messages.per.batch={args.batch}",
                f"s3events.source.queue.receive.concurrency={args.concurrency}",
            ],
        )
        capture = build_capture(settings)
        plain, ours = [], []
        for r in range(args.rounds):
            fill(sqs, base_q, args.messages, r)
            n, seconds = drain_baseline(sqs, base_q)
            plain.append(n / seconds)
            fill(sqs, ours_q, args.messages, r)
            n, seconds = drain_capture(capture)
            assert n == args.messages, f"round {r}: captured {n} of {args.messages}"
            ours.append(n / seconds)
            print(f"round {r + 1:2d}: baseline {plain[-1]:7.0f} msg/s   capture {ours[-1]:7.0f} events/s")
        capture.close()
        base, mine = statistics.median(plain), statistics.median(ours)
        print(f"median baseline receive+delete: {base:7.0f} msg/s")
        print(
            f"median s3events capture:        {mine:7.0f} events/s  (parse + dedupe + Delta commit + delete)"
        )
        print(f"ratio capture/baseline:         {mine / base:7.2f}")
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (delta-rs readers can abort there)


if __name__ == "__main__":
    main()
