"""Chaos: continuous capture and ingest through a fault proxy, SIGKILLed at random and restarted, while
files keep landing; at the end every line must have landed exactly once.

    .venv/bin/python benchmarks/chaos.py --minutes 20 [--rate 0.05] [--seed 1] [--kill-every 3,12]
        [--files-per-second 2] [--lines 5] [--drain-minutes 10]

A moto server (the local endpoint) holds the bucket, the queue and the tables; every AWS request of the
two processes passes through `s3events.dev.fault_proxy` with `--rate` of them failing (503, connection cut
before the request, answer lost after it was served), seeded. A putter PUTs JSON Lines files straight to
the endpoint (`--files-per-second`); a killer picks capture or ingest at random intervals (`--kill-every`
MIN,MAX seconds, seeded), SIGKILLs its process group (the ingest driver's JVM too) and starts it again at
once. After `--minutes` the putting and killing stop, the faults stop, and the script waits until the
target holds every line or `--drain-minutes` pass. It prints kills survived, faults injected, and lines
expected / landed / lost / duplicated, and exits 1 when any line was lost or duplicated.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import Run, add_common, smoke
from benchmarks.harness.endpoints import LOCAL_ENV, LocalEndpoint
from s3events.dev import provision
from s3events.dev.fault_proxy import FaultProxy
from s3events.infra import aws

EXE = str(Path(sys.executable).with_name("s3events"))


class Process:
    """One command, restarted after every kill; its stderr appended to one log."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.args, self.env, self.log = name, args, env, log
        self.popen: subprocess.Popen[bytes] | None = None
        self.kills = 0
        self.unexpected_exits: list[int] = []

    def start(self) -> None:
        with self.log.open("ab") as log:
            # A session of its own: a kill takes the whole group (ingest's JVM too), as a container's would.
            self.popen = subprocess.Popen(
                [EXE, self.name, *self.args],
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=self.env,
                start_new_session=True,
            )

    def check(self) -> None:
        """Restart it if it ended on its own (that is news: recorded with its exit code)."""
        assert self.popen is not None
        code = self.popen.poll()
        if code is not None:
            self.unexpected_exits.append(code)
            self.start()

    def kill(self) -> None:
        assert self.popen is not None
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.kills += 1
        self.popen.wait()
        self.start()

    def stop(self) -> int:
        assert self.popen is not None
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            return self.popen.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            return self.popen.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/chaos.py")
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kill-every", default="3,12", help="MIN,MAX seconds between kills")
    parser.add_argument("--files-per-second", type=float, default=2.0)
    parser.add_argument("--lines", type=int, default=5)
    parser.add_argument("--drain-minutes", type=float, default=10.0)
    add_common(parser)
    args = parser.parse_args(argv)
    smoke(args, minutes=0.25, kill_every="6,10", files_per_second=1.0, drain_minutes=3.0)
    run = Run.start("chaos", smoke=args.smoke)
    kill_min, kill_max = (float(x) for x in args.kill_every.split(","))
    os.environ.update(LOCAL_ENV)
    work = Path(tempfile.mkdtemp(prefix="s3events-chaos-"))

    with LocalEndpoint(log_path=work / "moto.log") as endpoint:
        options = aws.AwsOptions(region="us-east-1", endpoint_url=endpoint.url)
        suffix = uuid.uuid4().hex[:8]
        stack = provision.notifying_bucket(
            options,
            bucket=f"landing-{suffix}",
            queue=f"events-{suffix}",
            queue_attributes={"VisibilityTimeout": "10"},
        )
        s3 = aws.client(options, "s3")
        s3.create_bucket(Bucket=f"lake-{suffix}")
        target = f"s3://lake-{suffix}/events"
        storage = aws.delta_storage_options(options)  # the script reads the endpoint directly

        with FaultProxy(endpoint.url, rate=args.rate, seed=args.seed) as proxy:
            conf = {
                "s3events.aws.endpoint.url": proxy.url,
                "s3events.aws.region": "us-east-1",
                "s3events.aws.startup.timeout.seconds": "120",
                "s3events.source.queue.url": stack.queue_url,
                "s3events.source.queue.long.poll.wait": "1",
                "s3events.source.queue.visibility.timeout": "10",
                "s3events.metadata.table.path": f"s3://lake-{suffix}/metadata",
                "s3events.ingest.targets": "events",
                "s3events.ingest.target.events.path": target,
                "s3events.ingest.target.events.format": "json",
                "s3events.spark.master": "local[1]",
            }
            common = [arg for k, v in conf.items() for arg in ("--conf", f"{k}={v}")]
            continuous = ["--continuous", "--min-sync-interval-seconds", "1"]
            env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
            env.pop("PYSPARK_DRIVER_PYTHON", None)
            processes = [
                Process(name, [*continuous, *common], env, work / f"{name}.log")
                for name in ("capture", "ingest")
            ]
            for process in processes:
                process.start()

            expected: Counter[tuple[int, int]] = Counter()
            stop_putting = threading.Event()

            def put() -> None:
                f = 0
                while not stop_putting.wait(1.0 / args.files_per_second):
                    body = "".join(f'{{"f": {f}, "n": {n}}}\n' for n in range(args.lines))
                    s3.put_object(Bucket=stack.bucket, Key=f"in/{f // 100}/{f}.json", Body=body.encode())
                    expected.update((f, n) for n in range(args.lines))
                    f += 1

            putter = threading.Thread(target=put, name="putter")
            putter.start()
            chaos = random.Random(args.seed)
            started = time.monotonic()
            end = started + args.minutes * 60
            try:
                while (now := time.monotonic()) < end:
                    time.sleep(min(chaos.uniform(kill_min, kill_max), max(0.0, end - now)))
                    for process in processes:
                        process.check()
                    if time.monotonic() < end:
                        chaos.choice(processes).kill()
                        kills = sum(p.kills for p in processes)
                        if kills % 10 == 0:
                            print(
                                f"{time.monotonic() - started:7.0f}s  kills={kills}  files="
                                f"{len(expected) // args.lines}  faults={len(proxy.injected)}",
                                flush=True,
                            )
            finally:
                stop_putting.set()
                putter.join()
            proxy.rate = 0.0  # the drain: no faults, no kills, the same processes
            total = sum(expected.values())
            drain_started = time.monotonic()
            deadline = drain_started + args.drain_minutes * 60
            landed: Counter[tuple[int, int]] = Counter()
            while time.monotonic() < deadline:
                for process in processes:
                    process.check()
                landed = _lines(target, storage)
                if sum(landed.values()) >= total and set(landed) >= set(expected):
                    break
                time.sleep(2)  # polling the target, with a deadline
            drained_in = time.monotonic() - drain_started
            codes = [process.stop() for process in processes]
            landed = _lines(target, storage)
            commits = {
                path.rsplit("/", 1)[-1]: _version(path, storage) + 1
                for path in (conf["s3events.metadata.table.path"], target)
            }

    lost = sum((expected - landed).values())
    duplicated = sum(count - 1 for count in landed.values() if count > 1)
    unexpected = sum(count for key, count in landed.items() if key not in expected)
    kinds = Counter(i.kind for i in proxy.injected)
    print(
        f"\nchaos: {args.minutes:g} min, fault rate {args.rate:g}, seed {args.seed}, kills every "
        f"{kill_min:g}-{kill_max:g}s, {args.files_per_second:g} files/s of {args.lines} lines"
    )
    print(f"  work dir              {work}")
    print(
        f"  kills survived        {sum(p.kills for p in processes)}  "
        + "  ".join(f"{p.name} {p.kills}" for p in processes)
    )
    print("  exits on their own    " + "  ".join(f"{p.name} {p.unexpected_exits}" for p in processes))
    requests = len(proxy.injected) + proxy.forwarded
    print(f"  faults injected       {sum(kinds.values())} of {requests} requests {dict(kinds)}")
    print(f"  Delta versions        {commits}")
    print(f"  files PUT             {len({f for f, _ in expected})}")
    print(f"  lines expected        {total}")
    print(f"  lines landed          {sum(landed.values())}  (drained in {drained_in:.0f}s after the chaos)")
    print(f"  lines lost            {lost}")
    print(f"  lines duplicated      {duplicated}")
    print(f"  lines not expected    {unexpected}")
    print(f"  final SIGTERM exits   {codes}")
    params = {
        "minutes": args.minutes,
        "fault_rate": args.rate,
        "seed": args.seed,
        "kill_every_s": args.kill_every,
    }
    params |= {"files_per_second": args.files_per_second, "lines": args.lines}
    figures = {"kills": sum(p.kills for p in processes), "faults": sum(kinds.values()), "requests": requests}
    figures |= {"lines_expected": total, "lines_lost": lost, "lines_duplicated": duplicated}
    figures |= {"lines_unexpected": unexpected, "drained_in_s": round(drained_in)}
    run.add(
        f"{args.minutes:g} min, fault rate {args.rate:g}, seed {args.seed}", params=params, figures=figures
    )
    run.save()
    return 1 if lost or duplicated or unexpected else 0


def _version(path: str, storage: dict[str, str]) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(path, storage_options=storage).version())


def _lines(target: str, storage: dict[str, str]) -> Counter[tuple[int, int]]:
    from deltalake import DeltaTable

    try:
        table: Any = DeltaTable(target, storage_options=storage).to_pyarrow_table(columns=["f", "n"])
    except Exception:  # no target table yet
        return Counter()
    return Counter(zip(table.column("f").to_pylist(), table.column("n").to_pylist(), strict=True))


if __name__ == "__main__":
    raise SystemExit(main())
