"""Freshness: PUT -> row visible in the metadata table, and PUT -> row visible in the target table.

    .venv/bin/python benchmarks/freshness.py [--rates 1,10,100] [--seconds 30] [--rounds 3] [--sync 1]
    .venv/bin/python benchmarks/freshness.py --s3 gofakes3 --sqs elasticmq --rates 100,200,300 --rounds 1 \
        --seconds 300 --drain 180

Both processes run continuously, as an operator runs them: the real console script in two child
processes, `s3events capture --continuous` and `s3events ingest --continuous`, each with
`--min-sync-interval-seconds --sync` (default 1), every other key at its default (a 20 s long poll,
batches of up to 1000 messages, table maintenance between cycles). They talk to a moto_server
(`LocalEndpoint`) that delivers real S3->SQS notifications for a bucket; the tables are local paths.

Set-up (not timed): endpoint, bucket, queue and notification; both children started; three warm-up
files PUT and waited for in the target (this includes Spark's start in the ingest child). Then, per
round and per rate, this process PUTs small JSON Lines files (5 lines each, ~300 bytes) at that rate for
`--seconds` seconds, on a fixed schedule from a small thread pool (a slow PUT does not delay the next),
waits until every file is in the target table, and computes for each file:

- **PUT -> metadata**: the PUT's answer received (the object exists) -> the metadata table commit that
  first holds the file's row became visible;
- **PUT -> target**: the same PUT -> the target commit that first holds the file's rows became visible.

"Visible" is the modification time of the commit's `_delta_log/<version>.json` (delta-rs publishes a
local commit by moving a finished file into place), so nothing polls the tables while files are being
PUT. After each phase the new log entries are read once: each add action's Parquet file gives the
objects it holds (`bucket`/`key` in the metadata table, `_source_file` in the target) and the smallest
version holding an object is the one that made it visible.

The rows carry two more instants, which split the time into stages (medians printed per rate):
`captured_at` (capture parsed the message: after receive and batch gathering) and `_ingested_at`
(ingest started reading the batch: after its wait, the change-feed read and the plan). So
receive = PUT -> captured_at (notification, long-poll return, batch gathering, a cycle waiting its turn),
capture commit = captured_at -> metadata visible, ingest wait = metadata visible -> _ingested_at,
ingest read+commit = _ingested_at -> target visible (reading the files, the commit).

`--sqs elasticmq` takes moto's SQS out of the path: at 100 files a second moto's SQS, which scans its
whole queue on every receive, is what falls behind first. Capture then polls an ElasticMQ queue
(benchmarks/elasticmq.py: a JVM SQS server fetched with mvn) and ingest reads the files from moto's S3;
moto's S3 cannot notify ElasticMQ, so this process sends each object's notification itself right after
its PUT is answered: the S3 event JSON S3 sends (`ObjectCreated:Put`, the PUT's ETag, size and a
sequencer). The time S3 itself takes to deliver a notification (typically under a second) is not in
these figures.

`--s3 gofakes3` puts the landing bucket in gofakes3 (benchmarks/harness/gofakes3.py, our LIST over its
memory backend, built with `go build` on first use) instead of moto; it notifies no one, so it goes
with `--sqs elasticmq`.

For sustained rates each phase also prints, from the first PUT until every file is in the target: the
CPU cores used by capture (its process), ingest (its process with the Spark JVM and Python workers), the
servers and this process (the PUTs and notifications); the PUT rate held; files per target commit
(batch); and the backlog over time, files PUT and not yet in the target every `--backlog-every`
seconds, computed afterwards from the PUT and commit times.

Per round and rate it prints p50/p99 of both; at the end the medians over rounds and the load average
during each phase (other work on a shared machine moves these figures).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import notifications
from benchmarks.harness import Run, add_common, median, percentile, smoke
from benchmarks.harness.elasticmq import ElasticMQ
from benchmarks.harness.endpoints import LOCAL_ENV, LocalEndpoint
from benchmarks.harness.freshness_phase import Phase, measure, sustained, sustained_figures, sustained_text
from benchmarks.harness.gofakes3 import CLIENT_ENV, GoFakeS3
from benchmarks.harness.table_watch import TableWatch
from benchmarks.harness.usage import Usage
from s3events.dev import provision
from s3events.infra import aws

BUCKET = "fresh-landing"
QUEUE = "fresh-events"
LINES = 5


# -- the run -------------------------------------------------------------------------------------------


def file_body(n: int) -> bytes:
    return "".join(
        json.dumps({"id": n * LINES + i, "file": n, "line": i, "note": "fresh" * 8}) + "\n"
        for i in range(LINES)
    ).encode()


class Notifier:
    """Sends the notification S3 would send for an object just PUT (`--sqs elasticmq`).

    A sender thread takes each notification as soon as its PUT is answered and sends it together with any
    others already waiting, up to SQS's 10 per `SendMessageBatch`: the queue holds the same messages, one
    per object, as S3's delivery would make, for a tenth of this process's CPU per file at high rates
    (the load generator shares the two cores with the processes it measures)."""

    def __init__(self, sqs: Any, queue_url: str) -> None:
        self.sqs, self.queue_url = sqs, queue_url
        self.waiting: queue.Queue[str | None] = queue.Queue()
        self.sender = threading.Thread(target=self._send, name="notify", daemon=True)
        self.sender.start()

    def created(self, key: str, size: int, etag: str, n: int) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        body = notifications.created(
            bucket=BUCKET, key=key, size=size, etag=etag, sequencer=n, event_time=now
        )
        self.waiting.put(body)

    def close(self) -> None:
        """Sends what is waiting, then stops the sender."""
        self.waiting.put(None)
        self.sender.join()

    def _send(self) -> None:
        done = False
        while not done:
            bodies = [self.waiting.get()]
            while len(bodies) < 10:
                try:
                    bodies.append(self.waiting.get_nowait())
                except queue.Empty:
                    break
            if None in bodies:
                done, bodies = True, [b for b in bodies if b is not None]
            if bodies:
                entries = [{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies)]
                answer = self.sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
                if answer.get("Failed"):
                    raise RuntimeError(f"SendMessageBatch failed: {answer['Failed']}")


class PlainPut:
    """PUTs an object to gofakes3 with one unsigned HTTP request per object (gofakes3 checks no
    signatures), so the load generator's own CPU per file stays small beside the processes it measures;
    boto3 signs, checksums and parses, about a millisecond of CPU per call. Answers as put_object does."""

    def __init__(self, endpoint_url: str) -> None:
        self.netloc = urlsplit(endpoint_url).netloc
        self.local = threading.local()

    def put_object(self, *, Bucket: str, Key: str, Body: bytes) -> dict[str, str]:
        connection = getattr(self.local, "connection", None)
        if connection is None:
            connection = self.local.connection = http.client.HTTPConnection(self.netloc, timeout=60)
        connection.request(
            "PUT", f"/{Bucket}/{quote(Key)}", body=Body, headers={"Content-Length": str(len(Body))}
        )
        answer = connection.getresponse()
        answer.read()
        if answer.status != 200:
            raise RuntimeError(f"PUT {Key}: HTTP {answer.status}")
        return {"ETag": answer.getheader("ETag") or ""}


def put_at_rate(
    s3: Any, prefix: str, rate: float, seconds: float, first: int, notifier: Notifier | None = None
) -> dict[str, float]:
    """PUT `rate` files a second for `seconds`, on a fixed schedule; uri -> when its PUT was answered."""
    count = max(1, round(rate * seconds))
    done: dict[str, float] = {}

    def put(n: int) -> None:
        key = f"{prefix}/{n:07d}.json"
        body = file_body(n)
        answer = s3.put_object(Bucket=BUCKET, Key=key, Body=body)
        done[f"s3://{BUCKET}/{key}"] = time.time()
        if notifier is not None:
            notifier.created(key, len(body), answer["ETag"].strip('"'), n)

    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="put") as pool:
        start = time.monotonic()
        for i in range(count):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # the PUT schedule, not a wait on a condition
            pool.submit(put, first + i)
    return done


def wait_for(
    uris: set[str],
    watches: list[TableWatch],
    *,
    timeout: float,
    children: list[Any],
    fall_behind: bool = False,
) -> set[str]:
    """Until every object of `uris` is in the last watch's table; the ones still missing after `timeout`
    seconds are returned with `fall_behind` (a sustained rate the services did not keep up with),
    otherwise the run stops."""
    deadline = time.monotonic() + timeout
    while True:
        for watch in watches:
            watch.refresh()
        missing = [u for u in uris if u not in watches[-1].seen]
        if not missing:
            return set()
        for child in children:
            if child.poll() is not None:
                raise SystemExit(f"a child exited with code {child.returncode}; see its log")
        if time.monotonic() > deadline:
            if fall_behind:
                return set(missing)
            raise SystemExit(f"{len(missing)} files not in the target after {timeout:.0f}s: {missing[:3]}")
        time.sleep(0.5)


def write_props(path: Path, endpoint: str, queue_url: str, data: Path, extra: list[str]) -> None:
    lines = [
        f"s3events.aws.endpoint.url={endpoint}",
        "s3events.aws.region=us-east-1",
        f"s3events.source.queue.url={queue_url}",
        f"s3events.metadata.table.path={data}/metadata",
        "s3events.ingest.targets=fresh",
        f"s3events.ingest.target.fresh.path={data}/fresh",
        "s3events.ingest.target.fresh.format=json",
        "s3events.ingest.target.fresh.glob=**/*.json",
        "s3events.spark.master=local[2]",
        *extra,
    ]
    path.write_text("\n".join(lines) + "\n")


def start_child(command: str, props: Path, sync: float, log_path: Path) -> subprocess.Popen[bytes]:
    exe = Path(sys.executable).with_name("s3events")
    env = {**os.environ, **LOCAL_ENV, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    with open(log_path, "ab") as out:
        return subprocess.Popen(
            [
                str(exe),
                command,
                "--props",
                str(props),
                "--continuous",
                "--min-sync-interval-seconds",
                str(sync),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


def stop_child(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def summary(phases: list[Phase], rates: list[float], run: Run, args: argparse.Namespace) -> None:
    rates = [r for r in rates if any(p.rate == r for p in phases)]  # a phase that fell behind ends a run
    print()
    print(
        f"{'rate':>8} {'rounds':>6} | {'PUT->metadata p50':>17} {'p99':>6} "
        f"| {'PUT->target p50':>15} {'p99':>6}"
    )
    for rate in rates:
        mine = [p for p in phases if p.rate == rate]
        mp50 = median(percentile(p.meta, 0.5) for p in mine)
        mp99 = median(percentile(p.meta, 0.99) for p in mine)
        tp50 = median(percentile(p.target, 0.5) for p in mine)
        tp99 = median(percentile(p.target, 0.99) for p in mine)
        print(f"{rate:>6g}/s {len(mine):>6} | {mp50:>16.2f}s {mp99:>5.2f}s | {tp50:>14.2f}s {tp99:>5.2f}s")
        stages = {
            f"{n.replace(' ', '_').replace('+', '_')}_s": round(
                median(v for p in mine for v in p.stages[n]), 3
            )
            for n in mine[0].stages
        }
        params = {
            "rate": rate,
            "seconds": args.seconds,
            "rounds": len(mine),
            "sqs": args.sqs,
            "s3": args.s3,
            "sync": args.sync,
            "drain": args.drain,
        }
        figures = {"files": sum(p.files for p in mine), "metadata_p50_s": round(mp50, 3)}
        figures |= {
            "metadata_p99_s": round(mp99, 3),
            "target_p50_s": round(tp50, 3),
            "target_p99_s": round(tp99, 3),
        }
        stores = args.sqs if args.s3 == "moto" else f"{args.s3} + {args.sqs}"
        figures |= stages | sustained_figures(mine)
        run.add(f"{rate:g} file{'' if rate == 1 else 's'}/s, {stores}", params=params, figures=figures)
    print("\nstages, median seconds over all files of the rate (see the docstring):")
    names = list(phases[0].stages)
    print(f"{'rate':>8} | " + " | ".join(f"{n:>18}" for n in names))
    for rate in rates:
        mine = [p for p in phases if p.rate == rate]
        cells = [median([v for p in mine for v in p.stages[n]] or [float("nan")]) for n in names]
        print(f"{rate:>6g}/s | " + " | ".join(f"{c:>17.2f}s" for c in cells))
    loads = [v for p in phases for v in p.load]
    print(
        f"\nload average (1 min) during the phases: {min(loads):.2f}-{max(loads):.2f} "
        f"on {os.cpu_count()} cores"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="1,10,100", help="files per second, comma-separated")
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds of PUTs per rate and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sync", type=float, default=1.0, help="--min-sync-interval-seconds of both")
    parser.add_argument("--conf", action="append", default=[], help="extra KEY=VALUE for both children")
    parser.add_argument("--keep", metavar="DIR", help="keep tables and the children's logs in DIR")
    parser.add_argument(
        "--sqs",
        choices=("moto", "elasticmq"),
        default="moto",
        help="moto: S3 notifies moto's SQS; elasticmq: capture polls ElasticMQ, notified by this process",
    )
    parser.add_argument(
        "--s3",
        choices=("moto", "gofakes3"),
        default="moto",
        help="the landing bucket's S3: moto_server, or gofakes3 (needs --sqs elasticmq: it notifies no one)",
    )
    parser.add_argument(
        "--drain",
        type=float,
        default=300.0,
        help="seconds after a phase's last PUT for every file to be in the target; a phase still short "
        "then is recorded as fallen behind and ends the run",
    )
    parser.add_argument(
        "--backlog-every", type=float, default=10.0, help="seconds between the backlog figures printed"
    )
    add_common(parser)
    args = parser.parse_args()
    if args.s3 == "gofakes3" and args.sqs != "elasticmq":
        parser.error("--s3 gofakes3 sends no S3 notifications: use it with --sqs elasticmq")
    smoke(args, rates="2", seconds=2.0, rounds=1, backlog_every=1.0)
    return args


def main() -> int:
    args = parse_args()
    run = Run.start("freshness", smoke=args.smoke)
    rates = [float(r) for r in args.rates.split(",")]
    logging.basicConfig(level=logging.WARNING)
    os.environ.update(LOCAL_ENV | (CLIENT_ENV if args.s3 == "gofakes3" else {}))
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="s3events-fresh-"))
    if args.keep and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    children: list[subprocess.Popen[bytes]] = []
    phases: list[Phase] = []
    server = GoFakeS3() if args.s3 == "gofakes3" else LocalEndpoint(log_path=work / "moto.log")
    try:
        with server as endpoint, contextlib.ExitStack() as stack:
            options = aws.AwsOptions(region="us-east-1", endpoint_url=endpoint.url)
            s3 = aws.client(options, "s3")
            putter = PlainPut(endpoint.url) if args.s3 == "gofakes3" else s3
            props = work / "fresh.properties"
            capture_props = props
            notifier = None
            if args.sqs == "elasticmq":
                # capture talks to SQS only (its tables are local), ingest to S3 only: one endpoint each
                sqs_server = stack.enter_context(ElasticMQ())
                sqs_options = aws.AwsOptions(region="us-east-1", endpoint_url=sqs_server.url)
                queue_url, _ = provision.create_queue(sqs_options, QUEUE)
                s3.create_bucket(Bucket=BUCKET)
                notifier = Notifier(aws.client(sqs_options, "sqs"), queue_url)
                capture_props = work / "capture.properties"
                write_props(capture_props, sqs_server.url, queue_url, work, args.conf)
                write_props(props, endpoint.url, queue_url, work, args.conf)
            else:
                made = provision.notifying_bucket(options, bucket=BUCKET, queue=QUEUE)
                write_props(props, endpoint.url, made.queue_url, work, args.conf)
            children.append(start_child("capture", capture_props, args.sync, work / "capture.log"))
            children.append(start_child("ingest", props, args.sync, work / "ingest.log"))
            roles = {"capture": children[0].pid, "ingest": children[1].pid}
            meta = TableWatch(work / "metadata", ("bucket", "key", "captured_at"))
            target = TableWatch(work / "fresh", ("_source_file", "_ingested_at"))
            warm = put_at_rate(putter, "warmup", 2.0, 1.5, 0, notifier)
            wait_for(set(warm), [meta, target], timeout=300, children=children)
            print(f"warm: both processes running (logs in {work}); load {os.getloadavg()[0]:.2f}")
            n = 1000
            for round_no in range(1, args.rounds + 1):
                for rate in rates:
                    load0, started = os.getloadavg()[0], time.time()
                    with Usage(roles) as usage:
                        put = put_at_rate(
                            putter, f"r{round_no}/rate{rate:g}", rate, args.seconds, n, notifier
                        )
                        missing = wait_for(
                            set(put), [meta, target], timeout=args.drain, children=children, fall_behind=True
                        )
                    n += len(put)
                    arrived = {u: t for u, t in put.items() if u not in missing and u in meta.seen}
                    phase = measure(arrived, meta, target, rate, (load0, os.getloadavg()[0]))
                    phase.cores, phase.cpu_seconds = usage.cores(), usage.seconds
                    phase.files, phase.missing = len(put), len(put) - len(arrived)
                    sustained(phase, put, target, started, args.backlog_every)
                    phases.append(phase)
                    print(
                        f"round {round_no} {rate:>5g} files/s ({phase.files} files): "
                        f"PUT->metadata p50 {percentile(phase.meta, 0.5):.2f}s "
                        f"p99 {percentile(phase.meta, 0.99):.2f}s | "
                        f"PUT->target p50 {percentile(phase.target, 0.5):.2f}s "
                        f"p99 {percentile(phase.target, 0.99):.2f}s "
                        f"| load {load0:.2f}\n{sustained_text(phase)}",
                        flush=True,
                    )
                    if phase.missing:
                        print(
                            f"  fell behind: {phase.missing} of {len(put)} files not in the target "
                            f"{args.drain:.0f} s after the PUTs; the higher rates are not run",
                            flush=True,
                        )
                        break
                else:
                    continue
                break
            if notifier is not None:
                notifier.close()
            for child in children:
                stop_child(child)
        summary(phases, rates, run, args)
        run.save()
    finally:
        for child in children:
            stop_child(child)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (delta-rs / pyarrow readers can abort there)


if __name__ == "__main__":
    main()
