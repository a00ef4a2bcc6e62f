"""Shared fixtures: one moto_server process and one Spark session per test process (each pytest-xdist
worker has its own), factories for notifying buckets and settings, and the test tiers' markers.

The tiers (docs/development.md): `integration` (a moto_server, sometimes Spark), and among those
`process` (runs s3events / spark-submit as child processes), `chaos` (faults injected: kills, outages,
lost answers, revoked credentials), `cluster` (spark-submit and a standalone cluster), `interop`
(delta-spark reads our tables). `long` marks tests that have a long-run size: `-m long` selects them and
runs them at that size; every other run uses the small one.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from s3events.dev import provision
from s3events.dev.fault_proxy import FaultProxy
from s3events.dev.local_endpoint import LOCAL_ENV, LocalEndpoint
from s3events.infra import aws
from tests.jvm import jvm_options, submit_options

REPO = Path(__file__).resolve().parent.parent
EVENTS_DIR = Path(__file__).resolve().parent / "events"

os.environ.update(LOCAL_ENV)  # moto's throwaway credentials; tests never see real ones
# Every JVM the tests start (each worker's session, `s3events` and spark-submit children, which inherit
# it) compiles with C1 only, evaluates SQL interpreted and maps Spark's classes from the virtualenv's
# archive (tests/jvm.py).
JVM_TEST_OPTIONS = jvm_options()  # what a Spark daemon or executor takes too
os.environ.setdefault("SPARK_SUBMIT_OPTS", submit_options())

_LONG_RUN: list[bool] = [False]


def pytest_configure(config: pytest.Config) -> None:
    # A mark expression that names `long` (not negated) selects the long run: `pytest -m long`.
    markexpr = config.getoption("markexpr", "") or ""
    _LONG_RUN[0] = re.search(r"(?<!not )\blong\b", markexpr) is not None


def long_run() -> bool:
    """Whether this run selected the `long` tier (`-m long`): tests marked `long` then use their long-run
    sizes. Known at collection, so a test module may size its constants with it."""
    return _LONG_RUN[0]


@pytest.fixture(scope="session")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEndpoint]:
    log_path = tmp_path_factory.mktemp("moto") / "moto_server.log"
    with LocalEndpoint(log_path=log_path) as ep:
        yield ep


@pytest.fixture
def aws_options(endpoint: LocalEndpoint) -> aws.AwsOptions:
    return aws.AwsOptions(region="us-east-1", endpoint_url=endpoint.url)


@pytest.fixture
def s3(aws_options: aws.AwsOptions) -> Any:
    return aws.client(aws_options, "s3")


@pytest.fixture
def sqs(aws_options: aws.AwsOptions) -> Any:
    return aws.client(aws_options, "sqs")


@dataclass
class Stack:
    bucket: str
    queue_url: str
    endpoint_url: str
    metadata_path: str

    def conf(self, **extra: object) -> list[str]:
        """`--conf` overrides for this stack; keyword names use '_' for '.' after `s3events.`."""
        base = {
            "s3events.aws.endpoint.url": self.endpoint_url,
            "s3events.aws.region": "us-east-1",
            "s3events.source.queue.url": self.queue_url,
            # Short polls: moto delivers a notification during its PUT, so a message is visible at once,
            # and a drained queue ends `capture --once` without a wait (a continuous run paces its idle
            # cycles itself).
            "s3events.source.queue.long.poll.wait": "0",
            "s3events.metadata.table.path": self.metadata_path,
        }
        base.update({"s3events." + k.replace("__", "."): str(v) for k, v in extra.items()})
        return [f"{k}={v}" for k, v in base.items()]


@pytest.fixture
def make_stack(aws_options: aws.AwsOptions, endpoint: LocalEndpoint, tmp_path: Path) -> Callable[..., Stack]:
    """A fresh bucket + queue + notification per call, and a metadata path of its own."""

    def make(*, via_sns: bool = False, metadata_on_s3: bool = False, **queue_attributes: str) -> Stack:
        suffix = uuid.uuid4().hex[:10]
        stack = provision.notifying_bucket(
            aws_options,
            bucket=f"landing-{suffix}",
            queue=f"events-{suffix}",
            via_sns=via_sns,
            queue_attributes=queue_attributes or None,
        )
        if metadata_on_s3:
            aws.client(aws_options, "s3").create_bucket(Bucket=f"lake-{suffix}")
            metadata_path = f"s3://lake-{suffix}/metadata"
        else:
            metadata_path = str(tmp_path / f"metadata-{suffix}")
        return Stack(stack.bucket, stack.queue_url, endpoint.url, metadata_path)

    return make


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def spark_env() -> dict[str, str]:
    """The environment of a child process that starts local Spark: the venv's python on both sides, and a
    local IP that resolves on any test machine."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    env.pop("PYSPARK_DRIVER_PYTHON", None)  # the driver must be the venv's python too
    return env


def run_cli(args: Sequence[str], *, timeout: float = 180, env: dict[str, str] | None = None) -> CliResult:
    """Run the real `s3events` console script in a child process; returns its true exit code."""
    exe = Path(sys.executable).with_name("s3events")
    proc = subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=timeout, env=env or os.environ.copy()
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


# Keys that need care at every boundary: spaces, '+', '%', '=', unicode, nested prefixes.
TRICKY_KEYS = [
    "plain.json",
    "with space/and more spaces.json",
    "plus+sign/a+b.json",
    "percent%25/100%.json",
    "equals/dt=2026-11-22/h=05/part=1.json",
    "ünïcødé/日本語/файл.json",
    "deeply/nested/prefix/a/b/c/d/e/f.json",
    "mixed + %2F literal/x=y&z.json",
    "trailing space .json",
    "emoji/🙂.json",
]


# Concurrent requests to the worker's moto_server when a test lands many objects: it serves them on
# threads, so 8 at a time take a fraction of the serial time (each PUT also delivers a notification).
_PARALLEL_REQUESTS = 8


def put_objects(s3: Any, bucket: str, bodies: Mapping[str, bytes]) -> None:
    """PUT every `key: body` of `bodies` into `bucket`, several at a time (boto3 clients are thread-safe).
    Each PUT delivers its notification as a serial PUT would; only their order among themselves varies."""
    with ThreadPoolExecutor(_PARALLEL_REQUESTS) as pool:
        for _ in pool.map(lambda kv: s3.put_object(Bucket=bucket, Key=kv[0], Body=kv[1]), bodies.items()):
            pass  # consumed, so a failed PUT raises here


def write_metadata_version(stack: Stack, keys: Sequence[str], s3: Any) -> int:
    """One metadata commit (one version) holding an event per key, as one capture batch would write it:
    each object's etag and size as S3 holds them now (an event stating fewer bytes than the object holds
    sends the file to the line path, as a forged event would)."""
    from datetime import UTC, datetime

    from deltalake import DeltaTable

    from s3events.events.model import ObjectEvent
    from s3events.events.record import EventRecord
    from s3events.metadata.table import MetadataTable

    now = datetime.now(UTC)
    with ThreadPoolExecutor(_PARALLEL_REQUESTS) as pool:
        heads = list(pool.map(lambda key: s3.head_object(Bucket=stack.bucket, Key=key), keys))
    records = []
    for key, head in zip(keys, heads, strict=True):
        event = ObjectEvent(
            bucket=stack.bucket,
            key=key,
            event_name="ObjectCreated:Put",
            event_time=now,
            size=head["ContentLength"],
            etag=head["ETag"].strip('"'),
        )
        records.append(EventRecord(event=event, source="sqs", captured_at=now, message_id=key))
    MetadataTable(stack.metadata_path, storage_options={}).commit(records, custom_metadata={})
    return DeltaTable(stack.metadata_path).version()


def read_table(path: str, storage_options: dict[str, str] | None = None) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return DeltaTable(path, storage_options=storage_options).to_pyarrow_table().to_pylist()


def counted_rows(
    path: str, storage_options: dict[str, str] | None, columns: Sequence[str]
) -> Counter[tuple[Any, ...]]:
    """The table's rows as `columns` tuples, counted (every line once means every count is 1); empty while
    the table cannot be read yet (not created yet)."""
    from deltalake import DeltaTable

    try:
        table = DeltaTable(path, storage_options=storage_options).to_pyarrow_table(columns=list(columns))
    except Exception:  # no table yet
        return Counter()
    return Counter(zip(*(table.column(name).to_pylist() for name in columns), strict=True))


def through_proxy(command: Sequence[str], stack: Stack, proxy: FaultProxy, **extra: object) -> list[str]:
    """`command` (with its flags) and `--conf` for `stack` with its endpoint the fault proxy: every AWS
    request of the run passes through the proxy. No long polls; startup retries for up to a minute."""
    conf = replace(stack, endpoint_url=proxy.url).conf(
        source__queue__long__poll__wait=0, aws__startup__timeout__seconds=60, **extra
    )
    return [*command, *(arg for kv in conf for arg in ("--conf", kv))]


_exit_status: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    # delta-rs/pyarrow readers can abort the interpreter during teardown (SIGABRT) after every test
    # passed; leave with pytest's own exit status instead (see ARCHITECTURE.md).
    if _exit_status and not hasattr(config, "workerinput"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[-1])


# delta-spark, the independent reader of what delta-rs writes (tests/interop): the JVM Delta Lake for
# pyspark 4.2.x, fetched from Maven Central into a git-ignored Ivy cache at the repo root (once).
DELTA_SPARK_PACKAGE = "io.delta:delta-spark_4.2_2.13:4.4.0"
# Its transitive dependencies that Spark already ships, newer: neither downloaded nor on the classpath twice.
_SHIPPED_WITH_SPARK = [
    "org.apache.hadoop:hadoop-client-api",
    "org.apache.hadoop:hadoop-client-runtime",
    "org.apache.parquet:parquet-column",
    "org.apache.parquet:parquet-common",
    "org.apache.parquet:parquet-encoding",
    "org.apache.parquet:parquet-format-structures",
    "org.apache.parquet:parquet-hadoop",
    "org.apache.parquet:parquet-jackson",
    "com.fasterxml.jackson.core:jackson-core",
    "com.fasterxml.jackson.core:jackson-databind",
    "com.fasterxml.jackson.core:jackson-annotations",
    "org.apache.logging.log4j:log4j-api",
    "org.apache.logging.log4j:log4j-core",
    "org.apache.logging.log4j:log4j-slf4j2-impl",
    "org.slf4j:slf4j-api",
    "org.xerial.snappy:snappy-java",
    "com.github.luben:zstd-jni",
    "org.roaringbitmap:RoaringBitmap",
    "io.airlift:aircompressor",
    "com.google.code.findbugs:jsr305",
    "org.locationtech.jts:jts-core",
]
DELTA_SPARK_CONF = {
    "spark.jars.packages": DELTA_SPARK_PACKAGE,
    "spark.jars.excludes": ",".join(_SHIPPED_WITH_SPARK),
    "spark.jars.ivy": str(REPO / ".ivy2"),
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Small tables: the log is replayed in 2 tasks, not the default 50 (seconds per read saved).
    "spark.databricks.delta.snapshotPartitions": "2",
}
# Filled at collection: whether interop tests run (the session then carries delta-spark), and why the
# session could not load it (the interop tests fail with that reason; every other test runs on).
DELTA_SPARK: dict[str, Any] = {"wanted": False, "error": None}


# The tiers whose tests take longest (child processes with JVMs of their own, delta-spark), first.
_LONGEST_FIRST = ("cluster", "process", "chaos", "interop", "integration")
# Modules whose tests share a module-scoped fixture that starts processes (a standalone cluster): run
# first and next to each other, so xdist's first hand-out (two tests per worker) gives them to one worker
# and the fixture starts once.
_TOGETHER_FIRST = ("tests/integration/test_standalone_cluster.py::",)
# Then the tests `--durations` shows slowest (an idle run's 25 slowest calls on 4 workers, then earlier
# runs'), by node id prefix, slowest first: started early they overlap the rest instead of ending the run
# alone. A test split into cases stands where one case would. docs/development.md's table says why each
# is slow.
_SLOWEST = (
    "tests/integration/test_ingest_processes.py::test_continuous_ingest_sigkilled_mid_run",
    "tests/integration/test_dispatch_transform.py::test_csv_files",
    "tests/integration/test_dispatch_whole_files.py::test_multi_line_csv",
    "tests/interop/test_interop_pipeline.py::",
    "tests/integration/test_dispatch.py::test_csv_files_give_the_same_rows",
    "tests/interop/test_interop_stats.py::test_filters_at_every_file_edge",
    "tests/integration/test_ingest_fast_path_formats.py::test_csv_fast_path",
    "tests/integration/test_ingest_bootstrap.py::test_rebuild_replaces",
    "tests/integration/test_dispatch.py::test_csv_hints",
    "tests/interop/test_interop_catalog_hive.py::",
    "tests/integration/test_object_lives.py::",
    "tests/integration/test_ingest_bootstrap.py::test_the_snapshot_way",
    "tests/integration/test_ingest_crash_points.py::",
    "tests/integration/test_dispatch.py::test_json_files_give_the_same_rows",
    "tests/integration/test_fault_rate.py::",
    "tests/integration/test_endpoint_outage.py::",
    "tests/integration/test_schema_modes_model.py::",
    "tests/integration/test_dispatch.py::test_csv_decimal_hints",
    "tests/integration/test_dispatch.py::test_json_decimal_hints",
    "tests/integration/test_demo.py::test_demo_runs_capture_backfill_and_ingest",
    "tests/integration/test_dispatch.py::test_json_hints",
    "tests/integration/test_dispatch_transform.py::test_json_files",
    "tests/integration/test_dispatch.py::test_json_names_differing_only_in_case",
    "tests/integration/test_lost_answers.py::",
    "tests/integration/test_prometheus.py::",
    "tests/integration/test_concurrent_writers.py::",
    "tests/integration/test_credentials_rotated.py::",
    "tests/integration/test_ingest_processes.py::test_two_ingest_processes_on_one_target",
    "tests/integration/test_ingest.py::test_one_version_of_500_files",
    "tests/integration/test_ingest_processes.py::test_stop_signal_finishes_the_batch_in_hand",
)


def _rank(item: pytest.Item, prefixes: Sequence[str]) -> int:
    """len(prefixes) for the first prefix of `item`'s node id, down to 1 for the last; 0 for none."""
    return next((len(prefixes) - n for n, prefix in enumerate(prefixes) if item.nodeid.startswith(prefix)), 0)


def _expected_length(item: pytest.Item) -> tuple[int, int, int]:
    tier = next(
        (len(_LONGEST_FIRST) - n for n, name in enumerate(_LONGEST_FIRST) if item.get_closest_marker(name)),
        0,
    )
    return (_rank(item, _TOGETHER_FIRST), _rank(item, _SLOWEST), tier)


def _longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """Longest first (a stable sort: every xdist worker collects the same order), each test of a tier in
    _LONGEST_FIRST followed by a unit test. A worker holds the test it runs and the next one
    (`--maxschedchunk 1`): that next one is then a unit test of milliseconds, not a second long test
    waiting for the first to end while another worker is idle."""
    ranked = sorted(items, key=_expected_length, reverse=True)
    together = [item for item in ranked if _rank(item, _TOGETHER_FIRST)]
    long = [item for item in ranked[len(together) :] if any(_expected_length(item))]
    short = [item for item in ranked[len(together) :] if not any(_expected_length(item))]
    paired = [item for pair in zip(long, short, strict=False) for item in pair]
    return together + paired + long[len(short) :] + short[len(long) :]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    DELTA_SPARK["wanted"] = any(item.get_closest_marker("interop") for item in items)
    if hasattr(config, "workerinput"):  # an xdist worker: `make test`'s schedule
        items[:] = _longest_first(items)
    else:  # one process: longest first; a module-scoped fixture starts once per module as before
        items.sort(key=_expected_length, reverse=True)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session per test process (~6 s to start, ~450 MB); with delta-spark loaded
    when interop tests were collected (a few seconds more to resolve the package from the Ivy cache)."""
    from s3events.infra.spark import get_spark

    conf = {"spark.sql.shuffle.partitions": "4"}
    session = None
    if DELTA_SPARK["wanted"]:
        ivy = Path(DELTA_SPARK_CONF["spark.jars.ivy"])
        ivy.mkdir(parents=True, exist_ok=True)
        # One Ivy resolution at a time: parallel workers share the cache (the first one downloads).
        with open(ivy / ".s3events-tests.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                session = get_spark(
                    master="local[2]", app_name="s3events-tests", conf={**conf, **DELTA_SPARK_CONF}
                )
            except Exception as exc:  # e.g. Maven Central unreachable: Ivy's report is on stderr
                DELTA_SPARK["error"] = f"{type(exc).__name__}: {exc}"
    if session is None:
        session = get_spark(master="local[2]", app_name="s3events-tests", conf=conf)
    yield session
    session.stop()


@contextmanager
def session_conf(spark: Any, conf: Mapping[str, str]) -> Iterator[Any]:
    """The session with `conf` set for the block; each key as it was afterwards."""
    before = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield spark
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
