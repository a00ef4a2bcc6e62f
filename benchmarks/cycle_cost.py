"""Cost of discovering the new files of one ingest cycle as the bucket grows: ours against listing.

    .venv/bin/python benchmarks/cycle_cost.py [--sizes 10000,25000,50000,100000] [--new 1000]
        [--rounds 3] [--quick] [--dlt-python PATH | --no-dlt] [--stock-moto]

One bucket grows through `--sizes` (objects already in it, which arrived long ago: their LastModified
is weeks back and the metadata table already holds their rows); at each size `--new` objects arrive, each
firing a real S3 notification into SQS, and each contender discovers exactly those:

- **ours** = **capture** (what `s3events capture --once` runs: `build_capture` → `Capture.run_once`
  until an empty receive → `close`; it drains the notifications from SQS, MERGEs the events into the
  metadata Delta table and deletes the messages) + **plan** (what one ingest cycle does before reading
  any file: a fresh `MetadataFeed` reads the metadata table's change data feed after the checkpoint, and
  `plan` turns it into the batch of `FileRef`s). No Spark; no file is read. The metadata table is local
  (as in the other benchmarks) and holds one row per object in the bucket, written in commits of
  `--commit-chunk` rows (capture's default batch cap), so it grows with the bucket as it would in use.
- **listing baseline** = what dlt's filesystem source and Glue job bookmarks do: ListObjectsV2 over the
  whole bucket with a paginator (1000 keys a page), keeping objects whose LastModified is after the
  cursor saved by the previous run (LastModified has one-second resolution, so, as dlt does, objects at
  exactly the cursor are kept unless the previous run already saw their key), then moving the cursor.
- **dlt** itself, when a Python with `dlt[s3]` is available: `dlt.sources.filesystem.filesystem`
  (fsspec/s3fs, `file_glob="**"`) with `dlt.sources.incremental("modification_date")`, one
  `pipeline.run` into a local `filesystem` destination (jsonl) per cycle; so extract (list + filter) +
  normalize + load of the new file items and the pipeline state. Each run is a child process (a fresh
  s3fs, whose listing cache would otherwise answer the second run); the time is taken inside it around
  `pipeline.run`, so interpreter start and imports are not counted. dlt works against moto unchanged.
  It cannot go into our `.venv`: `dlt[s3]` pulls s3fs → aiobotocore, which pins an older botocore than
  our boto3 needs, so it lives in a virtualenv of its own:

      python3.11 -m venv /tmp/dlt-venv && /tmp/dlt-venv/bin/pip install 'dlt[s3]'
      .venv/bin/python benchmarks/cycle_cost.py --dlt-python /tmp/dlt-venv/bin/python

  Without `--dlt-python` it is used only if `import dlt` works here; otherwise skipped, with a note.

First one untimed cycle of a few objects (where the listing cursor and dlt's pipeline state start),
then per size `--rounds` timed cycles, whose medians are printed; the contenders' order alternates
between rounds. Every cycle is checked: each contender must find exactly the new objects. The bucket
keeps the new objects, so a size's later rounds list up to `rounds x new` more objects.

**The local endpoint.** moto_server (started through `LocalEndpoint`) has costs that real S3 and SQS
do not, and they would decide the curve: every request pays several ms of dispatch, so 100k PUTs would
take ~10 minutes on two cores; ListObjectsV2 copies and sorts the whole bucket on *every page*, so one
listing costs O(n^2) (~15 s for 20k objects, minutes for 100k); and a ReceiveMessage recounts the whole
queue ~30 times through naive-datetime arithmetic, so draining 1000 notifications costs minutes. So by
default the moto_server child runs with these changes, in that process only (`MOTO_BOOT` below):
(1) for unversioned buckets without a delimiter, ListObjectsV2 pages come from a sorted key index kept
up to date on every PUT/DELETE, so a page costs O(page size) as on S3 (the same keys, order and
continuation tokens; other listings go to moto's own code); (2) SQS computes "now" with time.time() and
reads the retention period directly (the same values); (3) a `/_bench/bulk-put` route runs moto's own
`put_object` (what a PUT request runs) for thousands of keys per request: for the objects already in the
bucket with the notification off and LastModified backdated, for the new ones with the notification
moto sends on a PUT. Everything else is moto's own. What remains is moto's per-request cost: about
0.4 s of CPU per listed page of 1000 keys here (part of it boto3 parsing the page, as it does against
S3), and about 2 s to receive and delete 1000 messages, most of it in moto.
`--stock-moto` runs plain moto_server instead (objects PUT through the S3 API in threads, the existing
ones while the bucket's notification is switched off, so not backdated: every size starts with an
untimed cycle): only sensible for small sizes.

Prints per size the medians of wall seconds and of CPU seconds (this process, all its threads, plus
the moto_server process; for dlt its child process around `pipeline.run` plus the moto_server) and the
ratios baseline/ours, then how much each contender grew from the smallest to the largest size, and
whether ours stayed flat (grew under 1.5x). On a shared machine wall times are noisy, ours' most (a
cycle of ours lasts ~2 s, a listing of 100k objects ~45 s): read the ratios and the CPU table. Progress
goes to stderr; the default run takes 10-12 minutes on two busy cores, `--quick` under one.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import Measure, Run, add_common, cpu_by_process, median, smoke
from benchmarks.harness import load_text as load
from benchmarks.harness.endpoints import LOCAL_ENV, LocalEndpoint, PatchedMotoServer
from benchmarks.harness.metadata import write_created_events
from s3events.capture.service import build_capture
from s3events.config import Settings, load_settings
from s3events.dev import provision
from s3events.infra import aws
from s3events.ingest.feed import MetadataFeed
from s3events.ingest.model import Batch, Checkpoint, Limits
from s3events.ingest.plan import Route, plan

BUCKET = "bench-cycle-cost"
QUEUE = "bench-cycle-cost-events"
DEFAULT_SIZES = "10000,25000,50000,100000"
QUICK_SIZES = "1000,2000,4000"
WARM_UP_OBJECTS = 10
FLAT = 1.5  # "flat": ours grew less than this from the smallest to the largest bucket ("nearly": 2x)

# Run as `python -c MOTO_BOOT -H 127.0.0.1 -p PORT` in place of the moto_server script (see the docstring).
MOTO_BOOT = r"""
import bisect, gc, hashlib, json, sys, threading, time
from datetime import UTC, datetime

from moto.core import DEFAULT_ACCOUNT_ID
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.s3 import models
from moto.s3.utils import _VersionedKeyStore
from moto.server import main
from moto.sqs import models as sqs_models

_lock = threading.RLock()


def _sorted_names(store):
    names = store.__dict__.get("_bench_names")
    if names is None or len(names) != dict.__len__(store):
        names = store._bench_names = sorted(dict.keys(store))
    return names


def _adding(method):
    def wrapper(self, key, *args, **kwargs):
        with _lock:
            names = self.__dict__.get("_bench_names")
            if names is not None and not dict.__contains__(self, key):
                bisect.insort(names, key)
            return method(self, key, *args, **kwargs)
    return wrapper


def _removing(method):
    def wrapper(self, key, *args, **kwargs):
        with _lock:
            result = method(self, key, *args, **kwargs)
            names = self.__dict__.get("_bench_names")
            if names is not None and not dict.__contains__(self, key):
                i = bisect.bisect_left(names, key)
                if i < len(names) and names[i] == key:
                    del names[i]
            return result
    return wrapper


_VersionedKeyStore.__setitem__ = _adding(_VersionedKeyStore.__setitem__)
_VersionedKeyStore.setlist = _adding(_VersionedKeyStore.setlist)
_VersionedKeyStore.pop = _removing(_VersionedKeyStore.pop)
_VersionedKeyStore.__delitem__ = _removing(dict.__delitem__)
_stock_list_v2 = models.S3Backend.list_objects_v2


def list_objects_v2(self, bucket, prefix, delimiter, continuation_token, start_after, max_keys):
    if delimiter or type(bucket) is not models.FakeBucket or bucket.is_versioned or max_keys <= 0:
        return _stock_list_v2(self, bucket, prefix, delimiter, continuation_token, start_after, max_keys)
    after = self._pagination_tokens.get(continuation_token) if continuation_token else start_after
    page = []
    with _lock:
        names = _sorted_names(bucket.keys)
        i = bisect.bisect_left(names, prefix) if prefix else 0
        if after:
            i = max(i, bisect.bisect_right(names, after))
        while i < len(names) and len(page) <= max_keys:
            name = names[i]
            i += 1
            if prefix and not name.startswith(prefix):
                break
            key = bucket.keys.get(name)
            if key is not None and not isinstance(key, models.FakeDeleteMarker):
                page.append(key)
    if len(page) <= max_keys:
        return page, False, None
    page = page[:max_keys]
    token = hashlib.md5(page[-1].name.encode("utf-8")).hexdigest()
    self._pagination_tokens[token] = page[-1].name
    return page, True, token


models.S3Backend.list_objects_v2 = list_objects_v2

# SQS: moto computes "now" through naive datetimes for every message it scans, and every received message
# reads the queue's attributes, which counts the whole queue three times: a receive from a queue of n
# messages costs ~30 n datetime computations. The same values: "now" from time.time(), and the retention
# period read directly (no recount), so a receive scans the queue once.
_unix_time, _unix_time_millis = sqs_models.unix_time, sqs_models.unix_time_millis
sqs_models.unix_time = lambda dt=None: time.time() if dt is None else _unix_time(dt)
sqs_models.unix_time_millis = lambda dt=None: time.time() * 1000.0 if dt is None else _unix_time_millis(dt)


def is_message_valid_based_on_retention_period(self, queue_name, message):
    retention = float(self.get_queue(queue_name).message_retention_period)
    return retention + message.sent_timestamp / 1000 > time.time()


sqs_models.SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period
_stock_call = DomainDispatcherApplication.__call__


def _answer(start_response, document):
    body = json.dumps(document).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def __call__(self, environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/_bench/status":
        return _answer(start_response, {"indexed_listing": True, "bulk_put": True})
    if path == "/_bench/bulk-put":
        # moto's own put_object, as a PUT request runs it (notification included unless "notify" is off);
        # "last_modified" (epoch seconds, one per key) backdates objects that arrived long ago.
        request = json.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)))
        backend = models.s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        times = request.get("last_modified") or [None] * len(request["keys"])
        etags = []
        for key, body, when in zip(request["keys"], request["bodies"], times):
            made = backend.put_object(
                request["bucket"], key, body.encode(), disable_notification=not request["notify"]
            )
            if when is not None:
                made.last_modified = datetime.fromtimestamp(when, UTC).replace(tzinfo=None)
            etags.append(made.etag.strip('"'))
        # Keep the cyclic GC from re-scanning the stored objects on later requests (its full passes
        # would otherwise cost every request, SQS ones too, more the bigger the bucket).
        gc.freeze()
        return _answer(start_response, etags)
    return _stock_call(self, environ, start_response)


DomainDispatcherApplication.__call__ = __call__
sys.exit(main(sys.argv[1:]))
"""

# Run as `DLT_PYTHON -c DLT_CHILD '{json arguments}'`; prints one JSON line.
DLT_CHILD = r"""
import json, os, sys, time
from datetime import datetime

os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
args = json.loads(sys.argv[1])
import dlt
from dlt.common.configuration.specs import AwsCredentials
from dlt.sources.filesystem import filesystem

credentials = AwsCredentials(
    aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1",
    endpoint_url=args["endpoint"],
)
files = filesystem(bucket_url="s3://" + args["bucket"], credentials=credentials, file_glob="**")
files.apply_hints(incremental=dlt.sources.incremental(
    "modification_date", initial_value=datetime.fromisoformat(args["initial_value"])))
pipeline = dlt.pipeline(
    pipeline_name=args["name"], pipelines_dir=args["pipelines_dir"], dataset_name="files",
    destination=dlt.destinations.filesystem(bucket_url=args["destination"]),
)
started, cpu = time.perf_counter(), time.process_time()
pipeline.run(files.with_name("files"), loader_file_format="jsonl")
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
trace = pipeline.last_trace
steps = {step.step: (step.finished_at - step.started_at).total_seconds() for step in trace.steps}
rows = trace.last_normalize_info.row_counts.get("files", 0) if trace.last_normalize_info else 0
print(json.dumps({"seconds": seconds, "cpu": cpu, "extract": steps.get("extract"), "rows": rows}))
"""

_STARTED = time.perf_counter()


def progress(message: str) -> None:
    print(f"[{time.perf_counter() - _STARTED:6.0f}s] {message}", file=sys.stderr, flush=True)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


@dataclass(frozen=True, slots=True)
class Cost:
    wall: float
    cpu: float  # CPU seconds of this process (every thread, delta-rs's too) + the moto_server process


class Meter:
    """Wall and CPU seconds of this process (every thread, delta-rs's too) and the moto_server."""

    def moto_cpu(self) -> float:
        """CPU seconds the moto_server has used so far (0.0 where /proc is missing)."""
        return cpu_by_process()["moto"]

    def measure(self, fn: Callable[[], Any]) -> tuple[Cost, Any]:
        with Measure() as measured:
            result = fn()
        return Cost(measured.wall, measured.split["driver"] + measured.split["moto"]), result


# -- the bucket ---------------------------------------------------------------------------------------------


def key_name(n: int) -> str:
    return f"landing/batch={n // 1000:05d}/part-{n:07d}.json"


def body(n: int) -> str:
    return f'{{"n": {n}}}\n'


class Bucket:
    """The growing bucket: objects already there are old and quiet, new ones fire real notifications."""

    def __init__(self, s3: Any, endpoint_url: str, *, stock: bool) -> None:
        self.s3 = s3
        self.endpoint_url = endpoint_url
        self.stock = stock
        self.count = 0
        self.backdate_from = time.time() - 30 * 86400  # existing object n: LastModified = this + n s

    def grow_quietly(self, total: int) -> list[tuple[str, str, int]]:
        """Add objects, without notifications, until the bucket holds `total`; (key, etag, size) each.
        Backdated (not with --stock-moto): they arrived before any cursor, as in a bucket in use."""
        numbers = range(self.count, max(total, self.count))
        if self.stock:
            made = self._put_without_notification(numbers)
        else:
            made = self._bulk_put(numbers, notify=False, backdate=True)
        self.count += len(numbers)
        return made

    def put_notified(self, count: int) -> list[str]:
        """`count` new objects, each firing an S3 notification into the queue. Their keys."""
        numbers = range(self.count, self.count + count)
        if self.stock:
            self._put(numbers)
        else:
            self._bulk_put(numbers, notify=True, backdate=False)
        self.count += count
        return [key_name(n) for n in numbers]

    def _put(self, numbers: Iterable[int]) -> list[tuple[str, str, int]]:
        def one(n: int) -> tuple[str, str, int]:
            data = body(n).encode()
            etag = self.s3.put_object(Bucket=BUCKET, Key=key_name(n), Body=data)["ETag"].strip('"')
            return key_name(n), etag, len(data)

        with ThreadPoolExecutor(8) as pool:
            return list(pool.map(one, numbers))

    def _put_without_notification(self, numbers: range) -> list[tuple[str, str, int]]:
        saved = self.s3.get_bucket_notification_configuration(Bucket=BUCKET)
        saved.pop("ResponseMetadata", None)
        self.s3.put_bucket_notification_configuration(Bucket=BUCKET, NotificationConfiguration={})
        try:
            return self._put(numbers)
        finally:
            self.s3.put_bucket_notification_configuration(Bucket=BUCKET, NotificationConfiguration=saved)

    def _bulk_put(
        self, numbers: range, *, notify: bool, backdate: bool, chunk: int = 5000
    ) -> list[tuple[str, str, int]]:
        made: list[tuple[str, str, int]] = []
        for start in range(numbers.start, numbers.stop, chunk):
            part = range(start, min(start + chunk, numbers.stop))
            bodies = [body(n) for n in part]
            document = {
                "bucket": BUCKET,
                "keys": [key_name(n) for n in part],
                "bodies": bodies,
                "notify": notify,
                "last_modified": [self.backdate_from + n for n in part] if backdate else None,
            }
            request = urllib.request.Request(
                f"{self.endpoint_url}/_bench/bulk-put",
                data=json.dumps(document).encode(),
                method="POST",
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=600) as answer:
                etags = json.loads(answer.read())
            made.extend(
                (key_name(n), etag, len(b.encode())) for n, etag, b in zip(part, etags, bodies, strict=True)
            )
        return made


def write_metadata_rows(path: str, objects: list[tuple[str, str, int]], chunk: int) -> None:
    """The rows capture would have written for objects that arrived earlier (30 days ago, as their
    LastModified says), one commit per `chunk`."""
    arrived = datetime.now(UTC) - timedelta(days=30)
    write_created_events(
        path,
        BUCKET,
        objects,
        chunk=chunk,
        at=arrived,
        seconds_apart=1.0,
        message_prefix="earlier-",
        custom_metadata={"s3events.writer": "capture"},
    )


# -- ours ---------------------------------------------------------------------------------------------------


def capture_cycle(settings: Settings) -> tuple[int, float]:
    """What `s3events capture --once` runs. Returns (events written, seconds in metadata commits)."""
    capture = build_capture(settings)
    written, commit_seconds = 0, 0.0
    try:
        while (result := capture.run_once()).received:
            written += result.written
            commit_seconds += result.commit_seconds
    finally:
        capture.close()
    return written, commit_seconds


def plan_cycle(metadata_path: str, checkpoint: Checkpoint) -> Batch | None:
    """One ingest cycle's planning: the change feed after the checkpoint → the batch of FileRefs."""
    feed = MetadataFeed(metadata_path, storage_options={})  # fresh, as `s3events ingest --once` opens it
    latest = feed.latest_version()
    assert latest is not None
    changes = feed.changes_after(checkpoint.version, up_to=latest)
    rows = [r for r in changes.rows if r.commit_version > checkpoint.version]
    return plan(
        checkpoint, rows, route=Route(bucket=BUCKET), limits=Limits(), latest_version=changes.latest_version
    )


# -- the listing baseline -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cursor:
    """A saved LastModified cursor, and the keys seen at exactly that second (dlt's boundary dedup)."""

    value: datetime | None = None
    keys_at_value: frozenset[str] = frozenset()


@dataclass(slots=True)
class Listing:
    new: list[dict[str, Any]]
    cursor: Cursor
    pages: int
    listed: int


def listing_cycle(s3: Any, cursor: Cursor) -> Listing:
    new: list[dict[str, Any]] = []
    pages = listed = 0
    newest, at_newest = cursor.value, set(cursor.keys_at_value)
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, PaginationConfig={"PageSize": 1000}
    ):
        pages += 1
        for item in page.get("Contents", []):
            listed += 1
            modified = item["LastModified"]
            if cursor.value is not None and (
                modified < cursor.value or (modified == cursor.value and item["Key"] in cursor.keys_at_value)
            ):
                continue
            new.append(item)
            if newest is None or modified > newest:
                newest, at_newest = modified, {item["Key"]}
            elif modified == newest:
                at_newest.add(item["Key"])
    return Listing(new, Cursor(newest, frozenset(at_newest)), pages, listed)


# -- dlt ----------------------------------------------------------------------------------------------------


def find_dlt_python(args: argparse.Namespace) -> tuple[str | None, str]:
    """The interpreter to run dlt with, or None and why not."""
    if args.no_dlt:
        return None, "--no-dlt"
    python = args.dlt_python or (sys.executable if importlib.util.find_spec("dlt") else None)
    if python is None:
        return None, (
            "dlt is not installed here (it cannot share our .venv: dlt[s3] needs an older botocore); "
            "create a venv with `pip install 'dlt[s3]'` and pass --dlt-python"
        )
    check = subprocess.run(
        [
            python,
            "-c",
            "import dlt, s3fs; from dlt.sources.filesystem import filesystem; print(dlt.__version__)",
        ],
        capture_output=True,
        text=True,
    )
    if check.returncode != 0:
        return None, f"{python} cannot import dlt[s3]: {check.stderr.strip().splitlines()[-1:]}"
    return python, f"dlt {check.stdout.strip()} ({python})"


@dataclass
class DltRunner:
    python: str
    endpoint_url: str
    work: Path
    name: str = ""
    initial_value: str = ""

    def start(self, name: str, initial_value: datetime) -> None:
        """The pipeline's name and where its incremental starts (used by its first run only)."""
        self.name, self.initial_value = name, initial_value.isoformat()

    def run(self, meter: Meter) -> dict[str, Any]:
        """One pipeline run in a child process; its own wall and CPU time around `pipeline.run`, plus
        the moto_server's CPU time meanwhile."""
        moto = meter.moto_cpu()
        arguments = {
            "endpoint": self.endpoint_url,
            "bucket": BUCKET,
            "name": self.name,
            "initial_value": self.initial_value,
            "pipelines_dir": str(self.work / "dlt-pipelines"),
            "destination": str(self.work / "dlt-destination"),
        }
        done = subprocess.run(
            [self.python, "-c", DLT_CHILD, json.dumps(arguments)],
            capture_output=True,
            text=True,
            env={**os.environ, **LOCAL_ENV},
        )
        if done.returncode != 0:
            raise SystemExit(f"dlt run failed:\n{done.stderr[-3000:]}")
        outcome = dict(json.loads(done.stdout.strip().splitlines()[-1]))
        outcome["cost"] = Cost(outcome["seconds"], outcome["cpu"] + meter.moto_cpu() - moto)
        return outcome


# -- one size -----------------------------------------------------------------------------------------------


@dataclass
class Point:
    size: int
    capture: list[Cost] = field(default_factory=list)
    plan: list[Cost] = field(default_factory=list)
    listing: list[Cost] = field(default_factory=list)
    dlt: list[Cost] = field(default_factory=list)
    merge: list[float] = field(default_factory=list)  # capture's seconds in metadata commits (MERGE)
    pages: list[int] = field(default_factory=list)
    listed: list[int] = field(default_factory=list)
    dlt_extract: list[float] = field(default_factory=list)

    @property
    def ours(self) -> list[Cost]:
        return [Cost(c.wall + p.wall, c.cpu + p.cpu) for c, p in zip(self.capture, self.plan, strict=True)]


def wall(costs: list[Cost]) -> float:
    return median(c.wall for c in costs)


def cpu(costs: list[Cost]) -> float:
    return median(c.cpu for c in costs)


class Bench:
    def __init__(
        self,
        args: argparse.Namespace,
        endpoint: LocalEndpoint | PatchedMotoServer,
        work: Path,
        dlt_python: str | None,
    ) -> None:
        self.args = args
        options = aws.AwsOptions(region="us-east-1", endpoint_url=endpoint.url)
        made = provision.notifying_bucket(options, bucket=BUCKET, queue=QUEUE)
        self.s3 = aws.client(options, "s3")
        self.bucket = Bucket(self.s3, endpoint.url, stock=args.stock_moto)
        self.meter = Meter()
        self.metadata = str(work / "metadata")
        self.settings = load_settings(
            None,
            [
                f"s3events.aws.endpoint.url={endpoint.url}",
                "s3events.aws.region=us-east-1",
                f"s3events.source.queue.url={made.queue_url}",
                "s3events.source.queue.long.poll.wait=0",  # --once ends on an empty receive; no 20 s wait
                f"s3events.metadata.table.path={self.metadata}",
                "s3events.log.level=WARNING",
            ],
        )
        self.settings.validate_for("capture")
        self.cursor = Cursor()
        self.warm = True
        self.dlt = DltRunner(dlt_python, endpoint.url, work) if dlt_python else None
        if self.dlt is not None:  # one pipeline, whose incremental starts at the first warm-up
            self.dlt.start("cycle_cost", datetime.now(UTC).replace(microsecond=0))

    def grow(self, size: int) -> None:
        seconds, objects = timed(lambda: self.bucket.grow_quietly(size))
        progress(f"size {size}: {len(objects)} objects added quietly in {seconds:.1f} s")
        if objects:
            seconds, _ = timed(lambda: write_metadata_rows(self.metadata, objects, self.args.commit_chunk))
            progress(f"size {size}: their metadata rows written in {seconds:.1f} s")

    def cycle(self, point: Point | None, new: int, order: int) -> None:
        """PUT `new` objects, then let every contender discover them; record the costs unless warm-up."""
        checkpoint = Checkpoint(MetadataFeed(self.metadata, storage_options={}).latest_version() or 0, 0)
        keys = set(self.bucket.put_notified(new))
        results: dict[str, Any] = {}

        def run_ours() -> None:
            results["capture"] = self.meter.measure(lambda: capture_cycle(self.settings))
            results["plan"] = self.meter.measure(lambda: plan_cycle(self.metadata, checkpoint))

        def run_listing() -> None:
            results["listing"] = self.meter.measure(lambda: listing_cycle(self.s3, self.cursor))

        def run_dlt() -> None:
            if self.dlt is not None:
                results["dlt"] = self.dlt.run(self.meter)

        steps = (run_ours, run_listing, run_dlt)
        for step in steps if order % 2 == 0 else reversed(steps):
            step()

        capture, (written, merge_s) = results["capture"]
        plan_cost, batch = results["plan"]
        listing_cost, listing = results["listing"]
        found = {f.key for f in batch.files} if batch else set()
        if written != new or found != keys:
            raise SystemExit(f"ours: captured {written}, planned {len(found)} of the {new} new objects")
        listed_keys = {item["Key"] for item in listing.new}
        # A warm-up cycle may also find objects the bucket grew by; a timed cycle, exactly the new ones.
        if listed_keys != keys and not (point is None and keys <= listed_keys):
            raise SystemExit(f"listing baseline: found {len(listing.new)} objects, not the {new} new ones")
        self.cursor = listing.cursor
        dlt_run = results.get("dlt")
        if dlt_run is not None and point is not None and dlt_run["rows"] != new:
            raise SystemExit(f"dlt: loaded {dlt_run['rows']} file items, not the {new} new ones")
        if point is None:
            return
        point.capture.append(capture)
        point.plan.append(plan_cost)
        point.listing.append(listing_cost)
        point.merge.append(merge_s)
        point.pages.append(listing.pages)
        point.listed.append(listing.listed)
        dlt_text = ""
        if dlt_run is not None:
            point.dlt.append(dlt_run["cost"])
            point.dlt_extract.append(dlt_run["extract"] or float("nan"))
            dlt_text = f", dlt {dlt_run['cost'].wall:.2f} s (cpu {dlt_run['cost'].cpu:.2f})"
        progress(
            f"size {point.size} round {len(point.capture)}: ours {capture.wall:.2f} + {plan_cost.wall:.3f} "
            f"s (cpu {capture.cpu + plan_cost.cpu:.2f}, merge {merge_s:.2f} s), listing "
            f"{listing_cost.wall:.2f} s (cpu {listing_cost.cpu:.2f}, {listing.pages} pages){dlt_text}"
        )

    def point(self, size: int) -> Point:
        self.grow(size)
        # An untimed cycle first: the listing baseline's cursor and dlt's pipeline state start there (and
        # imports, first connections). Later sizes need none: the objects the bucket grew by are older
        # than every cursor; except with --stock-moto, which cannot backdate them.
        if self.warm or self.bucket.stock:
            self.cycle(None, WARM_UP_OBJECTS, 0)
            self.warm = False
        point = Point(size)
        for r in range(self.args.rounds):
            self.cycle(point, self.args.new, r)
        return point


# -- report -------------------------------------------------------------------------------------------------


def cost_row(p: Point, measure: Callable[[list[Cost]], float], with_dlt: bool) -> list[str]:
    """Size, ours (capture, plan, total), the listing baseline and dlt with their ratios to ours."""
    ours = measure(p.ours)
    row = [f"{p.size:,}", f"{measure(p.capture):.3f}", f"{measure(p.plan):.3f}", f"{ours:.3f}"]
    row += [f"{measure(p.listing):.3f}", f"{measure(p.listing) / ours:.2f}"]
    row += [f"{measure(p.dlt):.3f}", f"{measure(p.dlt) / ours:.2f}"] if with_dlt else []
    return row


def table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(" | ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    print("-|-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))


def report(points: list[Point], args: argparse.Namespace, dlt_note: str, with_dlt: bool) -> None:
    endpoint = "stock moto_server" if args.stock_moto else "moto_server with indexed ListObjectsV2"
    print(
        f"cycle cost: {args.new} new objects per cycle, medians of {args.rounds} rounds; {endpoint}; {load()}"
    )
    print(f"dlt: {dlt_note}")
    print("wall seconds:")
    header = ["existing objects", "ours capture s", "ours plan s", "ours total s", "listing baseline s"]
    header += ["ratio baseline/ours"] + (["dlt run s", "ratio dlt/ours"] if with_dlt else [])
    header += ["listed (pages)", "capture MERGE s"] + (["dlt extract s"] if with_dlt else [])
    rows = []
    for p in points:
        row = cost_row(p, wall, with_dlt)
        row += [f"{int(median(p.listed)):,} ({int(median(p.pages))})", f"{median(p.merge):.3f}"]
        row += [f"{median(p.dlt_extract):.3f}"] if with_dlt else []
        rows.append(row)
    table(header, rows)
    print("CPU seconds (this process + moto_server; dlt: its process around pipeline.run + moto_server):")
    header = ["existing objects", "ours capture", "ours plan", "ours total", "listing baseline"]
    header += ["ratio baseline/ours"] + (["dlt run", "ratio dlt/ours"] if with_dlt else [])
    table(header, [cost_row(p, cpu, with_dlt) for p in points])
    if len(points) < 2:
        return
    first, last = points[0], points[-1]

    def growth(measure: Callable[[list[Cost]], float], costs: Callable[[Point], list[Cost]]) -> str:
        return f"{measure(costs(last)) / measure(costs(first)):.2f}x"

    print(
        f"largest/smallest bucket ({last.size:,} / {first.size:,} = {last.size / first.size:.1f}x the "
        "objects), wall / CPU:"
    )
    lines = [
        ("ours total", lambda p: p.ours),
        ("  ours capture", lambda p: p.capture),
        ("  ours plan", lambda p: p.plan),
        ("listing baseline", lambda p: p.listing),
    ] + ([("dlt", lambda p: p.dlt)] if with_dlt else [])
    for label, costs in lines:
        print(f"  {label:18s} {growth(wall, costs):>7s} / {growth(cpu, costs):>7s}")
    merge = median(last.merge) / median(first.merge)
    print(
        f"  capture's metadata MERGE {median(first.merge):.3f} -> {median(last.merge):.3f} s ({merge:.2f}x): "
        "it reads only rows captured within s3events.metadata.dedupe.window.days (older rows: skipped)"
    )

    def slope(values: Callable[[Point], float]) -> float:
        """Seconds added per 10,000 more objects: least squares over the sizes' medians."""
        xs, ys = [p.size / 10_000 for p in points], [values(p) for p in points]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)

    slopes = [
        ("ours", lambda p: p.ours),
        ("listing baseline", lambda p: p.listing),
    ] + ([("dlt", lambda p: p.dlt)] if with_dlt else [])

    def added(costs: Callable[[Point], list[Cost]]) -> str:
        return f"{slope(lambda p: wall(costs(p))):+.3f} / {slope(lambda p: cpu(costs(p))):+.3f} s"

    added_text = ", ".join(f"{label} {added(costs)}" for label, costs in slopes)
    print(f"added cost per 10,000 more objects (least squares), wall / CPU: {added_text}")
    print(f"  (of ours: capture's MERGE {slope(lambda p: median(p.merge)):+.3f} s wall)")
    ours_wall = wall(last.ours) / wall(first.ours)
    ours_cpu = cpu(last.ours) / cpu(first.ours)
    verdict = (
        "stayed flat" if ours_cpu < FLAT else "stayed nearly flat" if ours_cpu < 2 else "did NOT stay flat"
    )
    listing_cpu = cpu(last.listing) / cpu(first.listing)
    listing_wall = wall(last.listing) / wall(first.listing)
    print(
        f"ours {verdict}: it grew {ours_cpu:.2f}x in CPU seconds ({ours_wall:.2f}x wall; flat = under "
        f"{FLAT}x, nearly = under 2x) while the bucket grew {last.size / first.size:.0f}x and the listing "
        f"baseline {listing_cpu:.2f}x ({listing_wall:.2f}x wall)"
    )


# -- main ---------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument(
        "--sizes", help=f"objects already in the bucket, comma-separated (default {DEFAULT_SIZES})"
    )
    parser.add_argument("--new", type=int, help="new objects per cycle (default 1000; --quick 200)")
    parser.add_argument("--rounds", type=int, help="timed cycles per size (default 3; --quick 2)")
    parser.add_argument("--quick", action="store_true", help=f"smoke run: sizes {QUICK_SIZES}, 200 new")
    parser.add_argument(
        "--commit-chunk", type=int, default=1000, help="metadata rows per commit for existing objects"
    )
    parser.add_argument("--dlt-python", help="a Python with dlt[s3] installed (default: this one, if it has)")
    parser.add_argument("--no-dlt", action="store_true", help="skip dlt")
    parser.add_argument(
        "--stock-moto", action="store_true", help="plain moto_server (O(n^2) listing, slow PUTs): small sizes"
    )
    add_common(parser)
    args = parser.parse_args()
    smoke(args, sizes="100,200", new=10, rounds=1, no_dlt=True)
    run = Run.start("cycle_cost", smoke=args.smoke)
    args.sizes = sorted(
        int(s) for s in (args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)).split(",")
    )
    args.new = args.new or (200 if args.quick else 1000)
    args.rounds = args.rounds or (2 if args.quick else 3)
    logging.basicConfig(level=logging.WARNING)
    os.environ.update(LOCAL_ENV)
    dlt_python, dlt_note = find_dlt_python(args)
    progress(f"dlt: {dlt_note}" + ("" if dlt_python else " -> skipped"))
    # moto_server, unless --stock-moto, with the changes of MOTO_BOOT (indexed listing, fast PUTs)
    server = LocalEndpoint() if args.stock_moto else PatchedMotoServer(MOTO_BOOT)
    with server as endpoint, tempfile.TemporaryDirectory(prefix="cycle-cost-") as tmp:
        if not args.stock_moto:
            with urllib.request.urlopen(f"{endpoint.url}/_bench/status", timeout=10) as answer:
                assert json.loads(answer.read())["indexed_listing"]
        bench = Bench(args, endpoint, Path(tmp), dlt_python)
        points = []
        for size in args.sizes:
            points.append(bench.point(size))
        progress(f"done in {time.perf_counter() - _STARTED:.0f} s")
        report(points, args, dlt_note if dlt_python else f"skipped: {dlt_note}", dlt_python is not None)
        for p in points:
            figures = {"ours_s": round(wall(p.ours), 3), "ours_cpu_s": round(cpu(p.ours), 3)}
            figures |= {"listing_s": round(wall(p.listing), 3), "listing_cpu_s": round(cpu(p.listing), 3)}
            figures |= {"ours_vs_listing_cpu_x": round(cpu(p.listing) / cpu(p.ours), 2)}
            if p.dlt:
                figures |= {"dlt_s": round(wall(p.dlt), 3), "dlt_cpu_s": round(cpu(p.dlt), 3)}
            params = {
                "objects": p.size,
                "new": args.new,
                "rounds": args.rounds,
                "stock_moto": args.stock_moto,
            }
            run.add(f"{p.size:,} objects, {args.new:,} new", params=params, figures=figures)
        run.save()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown (delta-rs readers can abort there)


if __name__ == "__main__":
    main()
