"""Backfill against a moto_server process and real delta-rs tables: objects whose notification never
arrived are found by listing, written once with capture's identity, and never duplicated — also while a
capture process commits live traffic at the same time."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from s3events.backfill.model import (
    APP_ID,
    BackfillOptions,
    ListedObject,
    Source,
    TimeWindow,
    backfill_event,
    distinct_sources,
    parse_time,
)
from s3events.backfill.run import run_backfill
from s3events.capture.service import run_capture
from s3events.config import load_settings
from s3events.dev import provision
from s3events.dev.local_endpoint import LocalEndpoint
from s3events.infra import aws
from s3events.ingest.feed import MetadataFeed
from tests.conftest import TRICKY_KEYS, Stack, read_table, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture
def filtered_stack(aws_options: aws.AwsOptions, endpoint: LocalEndpoint, tmp_path: Path) -> Stack:
    """A bucket whose notification covers only `notified/`: objects under `quiet/` reach no queue."""
    suffix = uuid.uuid4().hex[:10]
    made = provision.notifying_bucket(
        aws_options, bucket=f"landing-{suffix}", queue=f"events-{suffix}", prefix="notified/"
    )
    return Stack(made.bucket, made.queue_url, endpoint.url, str(tmp_path / f"metadata-{suffix}"))


@pytest.fixture
def plain_stack(s3: Any, sqs: Any, endpoint: LocalEndpoint, tmp_path: Path) -> Stack:
    """A bucket with no notification at all (PUTs into it are several times faster in moto)."""
    suffix = uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=f"quiet-{suffix}")
    queue_url = sqs.create_queue(QueueName=f"unused-{suffix}")["QueueUrl"]
    return Stack(f"quiet-{suffix}", queue_url, endpoint.url, str(tmp_path / f"metadata-{suffix}"))


def conf(stack: Stack, **extra: object) -> list[str]:
    return [arg for kv in stack.conf(**extra) for arg in ("--conf", kv)]


def settings_for(stack: Stack, **extra: object) -> Any:
    return load_settings(None, stack.conf(**extra))


def put(s3: Any, bucket: str, keys: list[str], *, workers: int = 8) -> None:
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=k.encode()), keys))


def rows_of(stack: Stack) -> list[dict[str, Any]]:
    return read_table(stack.metadata_path)


def table_version(stack: Stack) -> int:
    from deltalake import DeltaTable

    return DeltaTable(stack.metadata_path).version()


def recorded_pass(stack: Stack) -> int | None:
    """The pass recorded in the metadata table; None also before the table's first commit is in place (a
    process creating it makes the directory first)."""
    from deltalake import DeltaTable

    if not Path(stack.metadata_path, "_delta_log", "00000000000000000000.json").exists():
        return None
    return DeltaTable(stack.metadata_path).transaction_version(APP_ID)


def log_versions(stack: Stack) -> list[int]:
    return sorted(int(p.stem) for p in Path(stack.metadata_path, "_delta_log").glob("*.json"))


def counts(stdout: str) -> dict[str, int]:
    """The numbers of the summary's first line (`backfill: listed=… already_known=… injected=…`)."""
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)\b", stdout.splitlines()[0])}


def wait_for(condition: Callable[[], bool], *, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds}s waiting for {what}")
        time.sleep(0.2)  # polling a condition with a deadline


def capture_once(stack: Stack) -> Any:
    settings = settings_for(stack)
    settings.validate_for("capture")
    return run_capture(settings, once=True)


def capture_until_recorded(stack: Stack, key: str, kind: str, deadline: float = 60.0) -> None:
    """capture --once until the metadata table's latest row of `key` is of `kind`: a short poll can end
    a run before the notification of the last request is visible on a loaded machine."""
    give_up = time.monotonic() + deadline
    while True:
        capture_once(stack)
        rows = sorted((r for r in rows_of(stack) if r["key"] == key), key=lambda r: r["event_time"])
        if rows and rows[-1]["event_kind"] == kind:
            return
        assert time.monotonic() < give_up, f"{key}: no {kind} row after {deadline:.0f}s; rows {rows}"


def s3events_exe() -> str:
    return str(Path(sys.executable).with_name("s3events"))


# ------------------------------------------------------------------------------------ finding objects


@pytest.mark.process
def test_objects_outside_the_notification_filter_are_backfilled_exactly_once(filtered_stack, s3):
    stack = filtered_stack
    notified = [f"notified/{k}" for k in TRICKY_KEYS]
    quiet = [f"quiet/{k}" for k in TRICKY_KEYS]
    put(s3, stack.bucket, notified + quiet)
    assert capture_once(stack).written == len(notified)

    first = run_cli(["backfill", *conf(stack), "--source", f"s3://{stack.bucket}"])
    second = run_cli(["backfill", *conf(stack), "--source", f"s3://{stack.bucket}"])

    assert first.returncode == 0, first.stderr
    first_counts = counts(first.stdout)
    n = len(TRICKY_KEYS)
    assert first_counts["listed"] == 2 * n and first_counts["injected"] == n
    assert first_counts["already_known"] == n  # the captured ones: the same identity as capture's
    assert f"s3://{stack.bucket}: listed={2 * n}" in first.stdout
    assert "\r" not in first.stderr + first.stdout  # no progress counter when stderr is not a terminal
    assert second.returncode == 0, second.stderr
    assert counts(second.stdout)["injected"] == 0 and counts(second.stdout)["already_known"] == 2 * n
    rows = rows_of(stack)
    assert Counter(r["key"] for r in rows) == Counter(notified + quiet)
    backfilled = {r["key"]: r for r in rows if r["event_source"] == "backfill"}
    assert sorted(backfilled) == sorted(quiet)
    for key, row in backfilled.items():
        head = s3.head_object(Bucket=stack.bucket, Key=key)
        assert row["etag"] == head["ETag"].strip('"') and row["size"] == len(key.encode())
        assert row["event_name"] == "ObjectCreated:Put" and row["event_kind"] == "created"
        assert row["event_time"] == head["LastModified"].astimezone(UTC)
        assert row["message_id"] is None and row["sequencer"] is None and row["version_id"] is None


def test_object_uploaded_again_after_a_removal_whose_notification_was_lost_is_backfilled_as_recreated(
    filtered_stack, s3, sqs
):
    stack = filtered_stack
    key = "notified/again.json"
    s3.put_object(Bucket=stack.bucket, Key=key, Body=b"same")
    capture_until_recorded(stack, key, "created")
    s3.delete_object(Bucket=stack.bucket, Key=key)
    capture_until_recorded(stack, key, "removed")
    # "Again" means later than the removal by more than the listing's whole-second LastModified can
    # blur (metadata/table.py, _refresh_floor): an upload in the same second is not told apart.
    removed_at = max(r["event_time"] for r in rows_of(stack) if r["key"] == key)
    while datetime.now(UTC) < removed_at + timedelta(seconds=2):
        time.sleep(0.1)  # waiting for the wall clock itself, which is the scenario's condition
    s3.put_object(Bucket=stack.bucket, Key=key, Body=b"same")
    sqs.purge_queue(QueueUrl=stack.queue_url)  # its notification is lost
    before = table_version(stack)

    report = run_backfill(settings_for(stack), sources=[f"s3://{stack.bucket}/notified/"])

    assert report.injected == 1
    feed = MetadataFeed(stack.metadata_path, storage_options={})
    (change,) = feed.changes_after(before, up_to=table_version(stack)).rows
    assert change.key == key and change.recreated and change.event_kind == "created"
    again = run_backfill(settings_for(stack), sources=[f"s3://{stack.bucket}/notified/"])
    assert again.injected == 0


@pytest.mark.parametrize(("recorded_days_ago", "injected"), [(5, 0), (30, 1)])
def test_the_same_bytes_listed_later_than_the_dedupe_window_after_their_known_upload_are_a_new_upload(
    plain_stack, s3, recorded_days_ago, injected
):
    # Capture's rule, followed by backfill: the same content uploaded again within the window is the same
    # upload; after it, a new one (capture would record it as one too: its duplicate check reads the window).
    from s3events.events.model import ObjectEvent
    from s3events.events.record import EventRecord
    from s3events.metadata.table import MetadataTable

    stack = plain_stack
    key = "again/same.json"
    s3.put_object(Bucket=stack.bucket, Key=key, Body=b"same bytes")  # LastModified: now
    etag = s3.head_object(Bucket=stack.bucket, Key=key)["ETag"].strip('"')
    long_ago = datetime.now(UTC) - timedelta(days=recorded_days_ago)
    event = ObjectEvent(
        bucket=stack.bucket, key=key, event_name="ObjectCreated:Put", event_time=long_ago, size=10, etag=etag
    )
    MetadataTable(stack.metadata_path, storage_options={}).commit(
        [EventRecord(event=event, source="sqs", captured_at=long_ago, message_id="first")], custom_metadata={}
    )

    report = run_backfill(settings_for(stack), sources=[f"s3://{stack.bucket}/again/"])

    assert report.injected == injected
    rows = [r for r in rows_of(stack) if r["key"] == key]
    assert len(rows) == 1 + injected and len({r["event_id"] for r in rows}) == 1
    again = run_backfill(settings_for(stack), sources=[f"s3://{stack.bucket}/again/"])
    assert again.injected == 0  # the new upload is known now


def test_versioned_bucket_is_backfilled_by_latest_version_without_delete_markers(plain_stack, s3):
    stack = plain_stack
    s3.put_bucket_versioning(Bucket=stack.bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=stack.bucket, Key="data/a.json", Body=b"1")
    latest = s3.put_object(Bucket=stack.bucket, Key="data/a.json", Body=b"22")["VersionId"]
    s3.put_object(Bucket=stack.bucket, Key="data/gone.json", Body=b"x")
    s3.delete_object(Bucket=stack.bucket, Key="data/gone.json")  # latest is now a delete marker

    report = run_backfill(settings_for(stack), sources=[f"s3://{stack.bucket}/data/"])

    (row,) = rows_of(stack)
    assert (row["key"], row["version_id"], row["size"]) == ("data/a.json", latest, 2)
    head = s3.head_object(Bucket=stack.bucket, Key="data/a.json")
    expected = backfill_event(
        ListedObject(stack.bucket, "data/a.json", 2, head["ETag"].strip('"'), head["LastModified"], latest)
    )
    assert row["event_id"] == expected.event_id
    assert (report.listed, report.injected) == (1, 1)
    assert run_backfill(settings_for(stack), sources=[f"s3://{stack.bucket}/data/"]).injected == 0


def test_many_prefixes_and_pages_are_listed_completely_in_chunked_commits(plain_stack, s3):
    stack = plain_stack
    keys = [f"p{i % 15:02d}/sub/{i}.json" for i in range(1200)] + [f"top-{i}.json" for i in range(30)]
    put(s3, stack.bucket, keys, workers=16)
    options = BackfillOptions(page_size=100, diff_chunk=250, commit_chunk=400)

    report = run_backfill(settings_for(stack), sources=[f"s3://{stack.bucket}"], options=options)

    rows = rows_of(stack)
    assert Counter(r["key"] for r in rows) == Counter(keys)
    assert (report.listed, report.injected, report.already_known) == (len(keys), len(keys), 0)
    assert len(log_versions(stack)) >= 1 + len(keys) // 400  # create + one commit per chunk


def test_overlapping_sources_list_each_object_once(plain_stack, s3):
    stack = plain_stack
    put(s3, stack.bucket, ["a/1.json", "a/b/2.json", "c/3.json"])

    report = run_backfill(
        settings_for(stack),
        sources=[f"s3://{stack.bucket}/a/b/", f"s3://{stack.bucket}/a/", f"s3://{stack.bucket}/a/"],
    )

    assert list(report.sources) == [f"s3://{stack.bucket}/a/"]
    assert (report.listed, report.injected) == (2, 2)


# --------------------------------------------------------------------------------------- concurrency


@pytest.mark.process
def test_backfill_concurrent_with_capture_on_live_traffic_loses_and_duplicates_nothing(filtered_stack, s3):
    stack = filtered_stack
    source = f"s3://{stack.bucket}"
    args = conf(stack, backfill__sources=source)
    env = os.environ.copy()
    capture = subprocess.Popen(
        [s3events_exe(), "capture", "--continuous", "--min-sync-interval-seconds", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    notified = ["notified/warm-up.json"] + [f"notified/{i}.json" for i in range(150)]
    quiet = [f"quiet/{i}.json" for i in range(150)]
    passes: list[Any] = []
    try:
        put(s3, stack.bucket, notified[:1])
        wait_for(lambda: Path(stack.metadata_path).exists(), seconds=60, what="capture to be up")
        # Live traffic: PUTs in waves while backfill passes run as CLI processes at the same time.
        waves = 10
        putting = threading.Thread(
            target=lambda: [
                put(s3, stack.bucket, notified[1 + i :: waves] + quiet[i::waves], workers=4)
                for i in range(waves)
            ]
        )
        putting.start()
        while putting.is_alive():
            passes.append(run_cli(["backfill", *args]))
        putting.join()
        passes.append(run_cli(["backfill", *args]))  # after the last PUT: every quiet object is listed
        wanted = set(notified + quiet)
        wait_for(lambda: wanted <= {r["key"] for r in rows_of(stack)}, seconds=90, what="every object")
    finally:
        capture.send_signal(signal.SIGTERM)
        _, capture_err = capture.communicate(timeout=60)

    assert capture.returncode == 0, capture_err
    assert all(p.returncode == 0 for p in passes), [p.stderr for p in passes if p.returncode]
    assert len(passes) >= 2
    rows = rows_of(stack)
    assert Counter(r["key"] for r in rows) == Counter(notified + quiet)  # none lost, none twice
    assert len({r["event_id"] for r in rows}) == len(rows)
    assert {r["key"] for r in rows if r["event_source"] == "backfill"} >= set(quiet)
    assert "notified/warm-up.json" in {r["key"] for r in rows if r["event_source"] == "sqs"}
    versions = log_versions(stack)
    assert versions == list(range(len(versions)))  # contiguous: every commit landed exactly once
    assert sum(counts(p.stdout)["injected"] for p in passes) == sum(
        r["event_source"] == "backfill" for r in rows
    )


# -------------------------------------------------------------------------------- dry run and window


@pytest.mark.process
def test_dry_run_prints_the_keys_and_writes_nothing(filtered_stack, s3):
    stack = filtered_stack
    put(s3, stack.bucket, ["notified/seen.json"])
    capture_once(stack)
    version = table_version(stack)
    quiet = ["quiet/one.json", "quiet/two words.json", "quiet/ünï.json"]
    put(s3, stack.bucket, quiet)

    result = run_cli(["backfill", *conf(stack), "--source", f"s3://{stack.bucket}", "--dry-run"])

    assert result.returncode == 0, result.stderr
    assert "dry run, nothing written" in result.stdout
    found = counts(result.stdout)
    assert (found["listed"], found["already_known"], found["would_inject"]) == (4, 1, 3)
    listed_keys = [line.strip() for line in result.stdout.splitlines() if line.startswith("  s3://")]
    assert sorted(listed_keys[1:]) == sorted(f"s3://{stack.bucket}/{k}" for k in quiet)
    assert table_version(stack) == version
    assert [r["key"] for r in rows_of(stack)] == ["notified/seen.json"]


@pytest.mark.process
def test_since_and_until_reach_the_pass_and_filter_by_last_modified(plain_stack, s3):
    stack = plain_stack
    keys = [f"w/{i}.json" for i in range(4)]
    put(s3, stack.bucket, keys)
    # The window is half-open [since, until): at the objects' own LastModified (whole seconds), --since
    # takes every one of them and --until none. The boundaries themselves are unit-tested below.
    newest = max(s3.head_object(Bucket=stack.bucket, Key=k)["LastModified"] for k in keys)
    oldest = min(s3.head_object(Bucket=stack.bucket, Key=k)["LastModified"] for k in keys)
    source = ["--source", f"s3://{stack.bucket}"]

    before = run_cli(["backfill", *conf(stack), *source, "--until", oldest.strftime("%Y-%m-%dT%H:%M:%SZ")])
    after = run_cli(["backfill", *conf(stack), *source, "--since", oldest.strftime("%Y-%m-%dT%H:%M:%S")])
    beyond = run_cli(
        ["backfill", *conf(stack), *source, "--since", (newest + timedelta(seconds=1)).isoformat()]
    )

    assert before.returncode == 0 and after.returncode == 0 and beyond.returncode == 0, before.stderr
    assert counts(before.stdout)["injected"] == 0 and counts(before.stdout)["outside_window"] == 4
    assert counts(after.stdout)["injected"] == 4 and counts(after.stdout)["outside_window"] == 0
    assert counts(beyond.stdout)["outside_window"] == 4
    assert sorted(r["key"] for r in rows_of(stack)) == sorted(keys)
    assert recorded_pass(stack) is None  # a windowed or --source pass is not the periodic full pass


# ---------------------------------------------------------------------------------- periodic in capture


@pytest.mark.process
def test_periodic_pass_in_capture_records_its_time_and_a_restart_does_not_rerun_it(filtered_stack, s3):
    stack = filtered_stack
    args = conf(stack, backfill__sources=f"s3://{stack.bucket}", backfill__interval__seconds=3600)
    put(s3, stack.bucket, ["notified/a.json", "quiet/first.json"])
    started = int(time.time())

    first = run_cli(["capture", "--once", *args])

    assert first.returncode == 0, first.stderr
    recorded = recorded_pass(stack)
    assert recorded is not None and started <= recorded <= int(time.time())
    assert {r["key"]: r["event_source"] for r in rows_of(stack)} == {
        "notified/a.json": "sqs",
        "quiet/first.json": "backfill",
    }
    put(s3, stack.bucket, ["quiet/second.json"])
    version = table_version(stack)

    restarted = run_cli(["capture", "--once", *args])

    assert restarted.returncode == 0, restarted.stderr
    assert "next pass in 3" in restarted.stderr  # ~3600 s away, read back from the table
    assert recorded_pass(stack) == recorded and table_version(stack) == version
    assert "quiet/second.json" not in {r["key"] for r in rows_of(stack)}


@pytest.mark.process
def test_periodic_pass_runs_again_once_its_interval_has_passed(filtered_stack, s3):
    stack = filtered_stack
    args = conf(stack, backfill__sources=f"s3://{stack.bucket}", backfill__interval__seconds=1)
    capture = subprocess.Popen(
        [s3events_exe(), "capture", "--continuous", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(
            lambda: Path(stack.metadata_path).exists() and recorded_pass(stack) is not None,
            seconds=60,
            what="the first periodic pass",
        )
        first = recorded_pass(stack)
        put(s3, stack.bucket, ["quiet/later.json"])
        wait_for(
            lambda: "quiet/later.json" in {r["key"] for r in rows_of(stack)}, seconds=60, what="a later pass"
        )
    finally:
        capture.send_signal(signal.SIGTERM)
        _, err = capture.communicate(timeout=60)
    assert capture.returncode == 0, err
    assert (recorded_pass(stack) or 0) > (first or 0)
    (row,) = [r for r in rows_of(stack) if r["key"] == "quiet/later.json"]
    assert row["event_source"] == "backfill"


# ------------------------------------------------------------------------------------------ usage errors


@pytest.mark.process
@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--since", "yesterday"], "--since"),
        (["--until", "2026-13-01"], "--until"),
        (["--since", "2026-02-01", "--until", "2026-01-01"], "--until"),
        (["--source", "gs://bucket/prefix"], "--source"),
        (["--source", "/local/path"], "--source"),
        ([], "s3events.backfill.sources"),
    ],
)
def test_bad_backfill_arguments_exit_2_naming_the_option(plain_stack, extra, named):
    stack = plain_stack

    result = run_cli(["backfill", *conf(stack), *extra])

    assert result.returncode == 2, result.stderr
    assert named in result.stderr
    assert not Path(stack.metadata_path).exists()


@pytest.mark.process
def test_a_missing_source_bucket_is_fatal_and_named(plain_stack):
    stack = plain_stack

    result = run_cli(["backfill", *conf(stack), "--source", "s3://no-such-bucket-here/x/"])

    assert result.returncode == 3, result.stderr
    assert "no-such-bucket-here" in result.stderr and "does not exist" in result.stderr


# ------------------------------------------------------------------------------- the small pure pieces


def test_times_without_an_offset_are_utc_and_the_window_is_half_open():
    assert parse_time("2026-03-01T10:00:00") == datetime(2026, 3, 1, 10, tzinfo=UTC)
    assert parse_time("2026-03-01T12:00:00+02:00") == datetime(2026, 3, 1, 10, tzinfo=UTC)
    assert parse_time("2026-03-01T10:00:00Z") == datetime(2026, 3, 1, 10, tzinfo=UTC)
    window = TimeWindow(since=parse_time("2026-03-01"), until=parse_time("2026-03-02"))
    assert window.contains(parse_time("2026-03-01T00:00:00"))
    assert not window.contains(parse_time("2026-03-02T00:00:00"))
    with pytest.raises(ValueError):
        parse_time("yesterday")


def test_sources_covered_by_another_are_dropped():
    sources = [Source.parse(u) for u in ("s3://b/a/x/", "s3://b/a/", "s3://c", "s3://b/a/", "s3://c/z")]
    assert [s.uri for s in distinct_sources(sources)] == ["s3://b/a/", "s3://c"]
