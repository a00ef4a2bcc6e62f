"""Capture throughput (events/s) and client CPU against plain receive+delete loops on the same SQS
endpoint, and capture's memory while it drains a large backlog.

    .venv/bin/python benchmarks/capture_throughput.py [--messages 200] [--rounds 10] [--batch 50]
    .venv/bin/python benchmarks/capture_throughput.py --messages 1000 --batch 1000 --batch-seconds 600
    .venv/bin/python benchmarks/capture_throughput.py --sqs elasticmq --messages 5000 --rounds 3 --batch 1000
    .venv/bin/python benchmarks/capture_throughput.py --sqs elasticmq --backlog 100000 --batch 1000
    (--maintenance: maintenance between cycles; --backlog takes --metadata DIR too; --ids-in-memory false:
    every commit a MERGE, s3events.metadata.dedupe.ids.in.memory=false, to compare in one session)

`--sqs moto` (the default) runs moto_server; `--sqs elasticmq` runs ElasticMQ, a JVM SQS server that
answers in milliseconds at any queue depth (benchmarks/elasticmq.py fetches it with mvn on first use into
the git-ignored .elasticmq/; Java 17+ and mvn needed). Capture here touches only SQS and a local metadata
directory, never S3, so s3events.aws.endpoint.url (one endpoint for every service) names that one server.

moto's SQS costs O(queue depth) per call, so each round fills the queue with `--messages` S3
notifications and then drains it; only the drains are timed. The baseline does ReceiveMessage(10) +
DeleteMessageBatch sequentially; ours parses, deduplicates, commits to a local metadata Delta table
(one commit per batch) and deletes. Rounds alternate between the two; medians and the ratio are printed.

moto also scans in-flight messages on every receive, so holding a batch until its commit (which the
exactly-once order requires) costs more per receive here than on real SQS; the default batch of 50
keeps that artifact small. Real deployments use the larger default (1000) to amortise S3 commits.

Two baselines, so the comparison does not hinge on moto's cost per message in flight:
- **plain**: ReceiveMessage(10) + DeleteMessageBatch at once, 10 messages in flight;
- **held**: receives until `--batch` messages are in hand, then deletes them (the same messages in
  flight as capture, which holds a batch until its commit).
Client CPU (this process's user+system time, every thread: parsing, the Delta commit in delta-rs's
threads, boto3) per 1,000 messages is endpoint-independent: moto runs in a process of its own. What it
does depend on is how many messages one commit holds. moto answers a receive in O(queue depth) (0.4 s
per call at 1,000 messages waiting, against tens of milliseconds on SQS), so with the default 10 s
gathering budget a moto batch holds 100-300 messages where SQS would fill it to 1,000 in a second or
two, and capture pays several commits (and visibility extensions) per 1,000 messages. `--batch-seconds`
(s3events.source.queue.max.batch.seconds, with a visibility timeout above it) lets batches fill to
`--batch` as they would on SQS: the CPU per message then compares like with like.

`--backlog N` fills the queue with N notifications first, then lets capture drain it, sampling this
process's resident memory every 50 ms: peak RSS before and while draining, and the batch cap honoured
(the most messages one cycle held), with a progress line (cycle time, table version, RSS) every tenth of
the expected cycles. It needs ElasticMQ at 100,000 (moto takes 0.4 s per receive at 1,000 waiting).
`--maintenance` runs table maintenance between cycles as `s3events capture --continuous` does
(compaction of crowded identity buckets about every 30 s); without it every commit leaves up to 64 more
small files for the duplicate check to read, and memory and cycle time follow that file count.
`--metadata DIR` keeps the metadata table in DIR across runs (a fresh process against a grown table).

Results: benchmarks/results/capture_throughput.jsonl; the current ones in docs/performance.md#capture.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import notifications
from benchmarks.harness import MemorySampler, Run, add_common, median, rss_bytes, smoke
from benchmarks.harness.baselines import sqs_drain
from benchmarks.harness.elasticmq import ElasticMQ
from benchmarks.harness.endpoints import LOCAL_ENV, LocalEndpoint
from s3events.capture.service import build_capture
from s3events.config import load_settings
from s3events.dev import provision
from s3events.infra import aws
from s3events.maintenance.service import PeriodicMaintenance, capture_tables


def notification(key: str, n: int) -> str:
    return notifications.created(
        bucket="bench",
        key=key,
        size=100 + n,
        etag=f"{n:032x}",
        sequencer=n,
        event_time="2026-11-22T05:00:00.000Z",
    )


def fill(sqs: Any, queue_url: str, count: int, round_no: int) -> None:
    bodies = [notification(f"round-{round_no}/part {i}.json", round_no * count + i) for i in range(count)]
    for start in range(0, count, 10):
        entries = [{"Id": str(j), "MessageBody": b} for j, b in enumerate(bodies[start : start + 10])]
        sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)


def drain_capture(capture: Any, on_cycle: Any = None) -> tuple[int, float]:
    """Capture cycles until one receives nothing; `on_cycle(result, seconds)` after each that did."""
    started, done = time.perf_counter(), 0
    cycle_started = started
    while (result := capture.run_once()).received:
        done += result.written
        now = time.perf_counter()
        if on_cycle is not None:
            on_cycle(result, now - cycle_started)  # its own time (maintenance) counts in the drain
        cycle_started = time.perf_counter()
        if os.environ.get("BENCH_VERBOSE"):
            print("   ", result.log_line())
    return done, time.perf_counter() - started


def cpu_ms_per_1000(drain: Callable[[], tuple[int, float]]) -> tuple[int, float, float]:
    """(messages, seconds, client CPU ms per 1,000 messages) of one drain."""
    cpu = time.process_time()
    n, seconds = drain()
    return n, seconds, (time.process_time() - cpu) * 1000 / max(n, 1) * 1000


def rss_mib() -> float:
    return rss_bytes() / 2**20


def backlog_run(
    sqs: Any,
    queue_url: str,
    capture: Any,
    count: int,
    batch: int,
    server: LocalEndpoint | ElasticMQ,
    maintenance: Any = None,
) -> dict[str, float]:
    """`maintenance`: a PeriodicMaintenance run between cycles, as `s3events capture --continuous` does."""
    started = time.perf_counter()
    for part in range(0, count, 10_000):
        fill(sqs, queue_url, min(10_000, count - part), part // 10_000)
    waiting = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
    print(
        f"filled {count} messages in {time.perf_counter() - started:.0f} s "
        f"({waiting['Attributes']['ApproximateNumberOfMessages']} waiting); RSS {rss_mib():.0f} MiB"
        + (f", ElasticMQ's JVM {server.rss_mib():.0f} MiB" if isinstance(server, ElasticMQ) else "")
    )
    largest, cycles, compactions = [0], [0], [0]
    every = max(1, count // batch // 10)  # a progress line every tenth of the expected cycles

    def on_cycle(result: Any, seconds: float) -> None:
        largest[0] = max(largest[0], result.received)
        cycles[0] += 1
        if maintenance is not None:
            compactions[0] += len(maintenance.run_if_due())
        if cycles[0] == 1 or cycles[0] % every == 0:
            print(
                f"  cycle {cycles[0]:4d}: {result.received} messages in {seconds:.1f} s, "
                f"table version {result.table_version}, RSS {rss_mib():.0f} MiB (peak so far "
                f"{sampler.peak() / 2**20:.0f})" + (f", {compactions[0]} compactions" if maintenance else ""),
                flush=True,
            )

    before = rss_mib()
    with MemorySampler() as sampler:
        n, seconds = drain_capture(capture, on_cycle)
    peak = sampler.peak() / 2**20
    print(
        f"drained {n} events in {seconds:.0f} s ({n / seconds:.0f}/s); RSS before draining {before:.0f} MiB, "
        f"peak while draining {peak:.0f} MiB (+{peak - before:.0f}); "
        f"largest cycle {largest[0]} messages (batch cap {batch})"
    )
    if largest[0] > batch:
        print(f"BATCH CAP BROKEN: a cycle held {largest[0]} messages, above the cap of {batch}")
    return {
        "events": n,
        "seconds": round(seconds, 1),
        "events_per_s": round(n / seconds),
        "rss_before_mib": round(before),
        "rss_peak_mib": round(peak),
        "largest_cycle": largest[0],
        "batch_cap": batch,
        "compactions": compactions[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=200, help="queue depth per round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=50, help="s3events.source.queue.max.messages.per.batch")
    parser.add_argument(
        "--concurrency", type=int, default=1, help="s3events.source.queue.receive.concurrency"
    )
    parser.add_argument("--backlog", type=int, default=0, help="drain a backlog of this many messages")
    parser.add_argument(
        "--batch-seconds",
        type=float,
        default=10.0,
        help="s3events.source.queue.max.batch.seconds (the product default: 10; 600 fills batches on moto)",
    )
    parser.add_argument(
        "--sqs",
        choices=("moto", "elasticmq"),
        default="moto",
        help="the SQS server: moto_server (O(queue depth) per receive) or ElasticMQ (fetched with mvn)",
    )
    parser.add_argument(
        "--metadata",
        help="the metadata table's directory, kept after the run (default: a temporary one, removed)",
    )
    parser.add_argument(
        "--maintenance",
        action="store_true",
        help="table maintenance between cycles, as `s3events capture --continuous` runs it",
    )
    parser.add_argument(
        "--ids-in-memory",
        choices=("true", "false"),
        default="true",
        help="s3events.metadata.dedupe.ids.in.memory: false makes every commit a MERGE (the earlier design)",
    )
    add_common(parser)
    args = parser.parse_args()
    smoke(args, messages=30, rounds=1, batch=10, backlog=min(args.backlog, 100))
    run = Run.start("capture_throughput", smoke=args.smoke)
    logging.basicConfig(level=logging.WARNING)
    os.environ.update(LOCAL_ENV)
    # Capture here touches SQS and a local metadata directory, never S3, so one server is all it needs:
    # s3events.aws.endpoint.url (one endpoint for every service) names whichever serves SQS.
    server: LocalEndpoint | ElasticMQ = ElasticMQ() if args.sqs == "elasticmq" else LocalEndpoint()
    with server as endpoint, tempfile.TemporaryDirectory() as tmp:
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
                f"s3events.metadata.table.path={args.metadata or f'{tmp}/metadata'}",
                f"s3events.source.queue.max.messages.per.batch={args.batch}",
                f"s3events.source.queue.receive.concurrency={args.concurrency}",
                f"s3events.source.queue.max.batch.seconds={args.batch_seconds}",
                # above the gathering budget, as the key's documentation asks
                f"s3events.source.queue.visibility.timeout={max(30, int(args.batch_seconds * 2))}",
                f"s3events.metadata.dedupe.ids.in.memory={args.ids_in_memory}",
            ],
        )
        capture = build_capture(settings)
        tables = capture_tables(settings)
        periodic = PeriodicMaintenance.from_settings(settings, tables) if args.maintenance else None
        # maintenance between cycles, as `capture --continuous` runs it: its CPU counts as capture's
        between = None if periodic is None else (lambda *_: periodic.run_if_due())
        if args.backlog:
            drained = backlog_run(sqs, ours_q, capture, args.backlog, args.batch, server, periodic)
            params = {"backlog": args.backlog, "batch": args.batch, "sqs": args.sqs}
            run.add(
                f"backlog of {args.backlog}, {args.sqs}",
                params=params | {"maintenance": args.maintenance},
                figures=drained,
            )
            run.save()
            capture.close()
            server.stop()
            sys.stdout.flush()
            os._exit(0)
        held_q, _ = provision.create_queue(options, "bench-held")
        rates: dict[str, list[float]] = {"plain": [], "held": [], "ours": []}
        cpu: dict[str, list[float]] = {"plain": [], "held": [], "ours": []}
        for r in range(args.rounds):
            fill(sqs, base_q, args.messages, r)
            n, seconds, ms = cpu_ms_per_1000(lambda: sqs_drain(sqs, base_q))
            rates["plain"].append(n / seconds)
            cpu["plain"].append(ms)
            fill(sqs, held_q, args.messages, r)
            n, seconds, ms = cpu_ms_per_1000(lambda: sqs_drain(sqs, held_q, hold=args.batch))
            rates["held"].append(n / seconds)
            cpu["held"].append(ms)
            fill(sqs, ours_q, args.messages, r)
            n, seconds, ms = cpu_ms_per_1000(lambda: drain_capture(capture, between))
            assert n == args.messages, f"round {r}: captured {n} of {args.messages}"
            rates["ours"].append(n / seconds)
            cpu["ours"].append(ms)
            print(
                f"round {r + 1:2d}: "
                + "   ".join(f"{k} {rates[k][-1]:6.0f}/s {cpu[k][-1]:5.0f} CPU ms/1k" for k in rates)
            )
        capture.close()
        rate = {k: median(v) for k, v in rates.items()}
        cpu_ms = {k: median(v) for k, v in cpu.items()}
        names = {
            "plain": "plain receive+delete (10 in flight)",
            "held": f"held loop ({args.batch} in flight)",
            "ours": "s3events capture (commit included)",
        }
        print(
            f"medians over {args.rounds} rounds of {args.messages} messages, batch {args.batch}, "
            f"SQS on {args.sqs}:"
        )
        for k, name in names.items():
            print(f"  {name:38s} {rate[k]:6.0f} msg/s  {cpu_ms[k]:5.0f} CPU ms per 1,000 messages")
        for k in ("plain", "held"):
            print(
                f"  capture / {k}: throughput {rate['ours'] / rate[k]:.2f}, "
                f"CPU per message {cpu_ms['ours'] / cpu_ms[k]:.2f}x"
            )
        params = {"messages": args.messages, "rounds": args.rounds, "batch": args.batch, "sqs": args.sqs}
        params |= {"batch_seconds": args.batch_seconds, "maintenance": args.maintenance}
        params |= {"ids_in_memory": args.ids_in_memory == "true"}
        figures: dict[str, float] = {f"{k}_cpu_ms_per_1000": round(cpu_ms[k]) for k in cpu_ms}
        figures |= {f"{k}_msg_per_s": round(rate[k]) for k in rate}
        figures |= {f"ours_vs_{k}_cpu_x": round(cpu_ms["ours"] / cpu_ms[k], 2) for k in ("plain", "held")}
        run.add(
            f"{args.sqs}, batch {args.batch}" + (", maintenance" if args.maintenance else ""),
            params=params,
            figures=figures,
        )
        run.save()
    server.stop()
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (delta-rs readers can abort there)


if __name__ == "__main__":
    main()
