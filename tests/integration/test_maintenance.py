"""Table maintenance against moto_server, local Spark and real delta-rs tables: compaction never makes ingest
lose or repeat a line, a dry run changes nothing, lagging targets keep the change feed they need, a killed
pass or a writer's orphan file costs nothing, and compaction beside a live capture loses or duplicates no
event. Days pass through `run_maintenance(now=...)`; only where delta-rs itself ages a file by its own
clock (vacuum of untracked files) does the file's modification time carry the days instead.

The tests that count the metadata table's compactions run on a table of the unpartitioned layout that
s3events wrote before identity buckets (still served, and maintained the same way): a few dozen events
spread over 256 buckets leave nothing to compact. test_metadata_layout.py covers the bucketed layout."""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from s3events.capture.service import run_capture
from s3events.config import load_settings
from s3events.ingest.cycle import Ingest
from s3events.ingest.feed import MetadataFeed
from s3events.ingest.service import ingest_ports, run_ingest
from s3events.maintenance.model import APP_ID, COMPACT_CHECK_SECONDS, TableReport, TableToMaintain
from s3events.maintenance.service import PeriodicMaintenance, run_maintenance, select_tables
from tests.conftest import Stack, read_table, run_cli
from tests.integration.test_ingest import capture, jsonl, settings_for, target_conf
from tests.legacy_layout import create_legacy_metadata_table

pytestmark = pytest.mark.integration

LINES_PER_FILE = 3
# The smallest compaction target the key allows: every file these tests write is "small".
MAINTENANCE = {"maintenance__target__file__bytes": 1 << 20, "maintenance__checkpoint__interval__commits": 10}
# Short polling: a `--once` capture of one PUT's event takes milliseconds instead of a 1 s empty long poll
# (moto delivers the notification before PutObject returns, so nothing is missed).
FAST_CAPTURE = {"source__queue__long__poll__wait": 0}
HOUR = timedelta(hours=1)


# ------------------------------------------------------------------------------------------------ helpers


def settings_of(stack: Stack, targets: dict[str, dict[str, object]]) -> Any:
    """One configuration for capture, ingest and maintenance, as a shared properties file would be."""
    return settings_for(stack, targets, **MAINTENANCE, **FAST_CAPTURE)


def put_and_capture_each(stack: Stack, s3: Any, settings: Any, files: Sequence[int]) -> None:
    """PUT each file and capture it in a capture run of its own: one small metadata commit per file."""
    for i in files:
        body = jsonl([{"f": i, "n": n} for n in range(LINES_PER_FILE)])
        s3.put_object(Bucket=stack.bucket, Key=f"in/{i:03d}.json", Body=body)
        assert run_capture(settings, once=True).written == 1


def ingest(settings: Any, spark: Any, *targets: str) -> None:
    totals = run_ingest(settings, once=True, targets=tuple(targets), spark=spark)
    assert not totals.failed, totals.failed


def every_line_once(files: Sequence[int]) -> Counter[tuple[int, int]]:
    return Counter({(i, n): 1 for i in files for n in range(LINES_PER_FILE)})


def lines_of(target: str) -> Counter[tuple[int, int]]:
    return Counter((r["f"], r["n"]) for r in read_table(target))


def metadata_rows(stack: Stack) -> list[dict[str, Any]]:
    return sorted(read_table(stack.metadata_path), key=lambda r: r["event_id"])


def version(path: str) -> int:
    return int(DeltaTable(path).version())


def referenced_files(path: str) -> set[str]:
    return set(DeltaTable(path).file_uris())


def tree(path: str) -> dict[str, int]:
    """Every file under the table's directory (data, change data, log) with its size."""
    root = Path(path)
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def log_versions(path: str) -> list[int]:
    return sorted(int(p.stem) for p in Path(path, "_delta_log").glob("*.json"))


def maintenance_commits(path: str, after: int, up_to: int) -> list[str]:
    """Operations of the commits in versions (after, up_to] that maintenance wrote."""
    return [
        h["operation"]
        for h in DeltaTable(path).history()
        if after < h["version"] <= up_to and h.get("s3events.writer") == "maintenance"
    ]


def transaction(path: str, app_id: str) -> int | None:
    """The app transaction version stored in the table at `path` (None: none, or no table yet)."""
    return DeltaTable(path).transaction_version(app_id) if Path(path, "_delta_log").exists() else None


def report_of(reports: Sequence[TableReport], label: str) -> TableReport:
    (report,) = [r for r in reports if r.label == label]
    assert report.error is None, report.error
    return report


def conf_args(stack: Stack, **extra: object) -> list[str]:
    return [arg for kv in stack.conf(**extra) for arg in ("--conf", kv)]


def s3events_exe() -> str:
    return str(Path(sys.executable).with_name("s3events"))


def wait_for(condition: Callable[[], bool], *, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds}s waiting for {what}")
        time.sleep(0.005)  # polling a condition with a deadline


# ------------------------------------------------------------------------- compaction and exactly-once ingest


def test_ingest_lands_every_line_once_across_compactions_of_the_metadata_and_target_tables(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    create_legacy_metadata_table(stack.metadata_path)  # bucketed ones: test_metadata_layout.py
    target = str(tmp_path / "t")
    settings = settings_of(stack, {"t": target_conf("t", target, "json", max__files__per__batch=4)})

    put_and_capture_each(stack, s3, settings, range(12))
    ingest(settings, spark)  # three batches: three small target files
    put_and_capture_each(stack, s3, settings, range(12, 20))  # captured, not yet ingested
    rows = metadata_rows(stack)
    checkpoint = DeltaTable(target).transaction_version("s3events.ingest/t")

    first = run_maintenance(settings, select_tables(settings, "all"))

    meta = report_of(first, "metadata")
    assert meta.files_before == 20 and meta.files_after < meta.files_before
    assert meta.compacted_from == 20 and meta.compacted_into == 1
    assert meta.version_after == version(stack.metadata_path) and meta.checkpoint
    assert "OPTIMIZE" in maintenance_commits(stack.metadata_path, meta.version_before, meta.version_after)
    assert metadata_rows(stack) == rows  # the same rows, in fewer files
    # The change feed over the pass's own commits is empty: compaction is dataChange=false.
    feed = MetadataFeed(stack.metadata_path, storage_options={})
    assert feed.changes_after(meta.version_before, up_to=meta.version_after).rows == []
    tgt = report_of(first, "target:t")
    assert tgt.files_before >= 3 and tgt.files_after < tgt.files_before
    assert DeltaTable(target).transaction_version("s3events.ingest/t") == checkpoint  # survives compaction
    assert lines_of(target) == every_line_once(range(12))

    put_and_capture_each(stack, s3, settings, range(20, 25))
    ingest(settings, spark)  # the 8 files captured before the compaction and the 5 after it
    assert lines_of(target) == every_line_once(range(25))

    rows = metadata_rows(stack)
    second = run_maintenance(settings, select_tables(settings, "metadata"))
    meta = report_of(second, "metadata")
    assert meta.files_after < meta.files_before
    assert "OPTIMIZE" in maintenance_commits(stack.metadata_path, meta.version_before, meta.version_after)
    assert metadata_rows(stack) == rows
    target_pass = run_maintenance(settings, select_tables(settings, "target:t"))
    assert [r.label for r in target_pass] == ["target:t", "errors:t"]
    tgt = report_of(target_pass, "target:t")
    assert tgt.files_after < tgt.files_before and tgt.files_after == 1
    assert "OPTIMIZE" in maintenance_commits(target, tgt.version_before, tgt.version_after)

    put_and_capture_each(stack, s3, settings, range(25, 30))
    ingest(settings, spark)
    ingest(settings, spark)  # and a run that finds nothing new

    assert lines_of(target) == every_line_once(range(30))
    assert Counter(r["_source_file"] for r in read_table(target)) == Counter(
        {f"s3://{stack.bucket}/in/{i:03d}.json": LINES_PER_FILE for i in range(30)}
    )
    assert Counter(r["key"] for r in read_table(stack.metadata_path)) == Counter(
        f"in/{i:03d}.json" for i in range(30)
    )


# ---------------------------------------------------------------------------------------- the CLI, dry run


@pytest.mark.process
def test_maintain_dry_run_through_the_cli_changes_nothing_and_names_every_table(
    make_stack, s3, sqs, spark, tmp_path
):
    stack = make_stack()
    create_legacy_metadata_table(stack.metadata_path)  # bucketed ones: test_metadata_layout.py
    target = str(tmp_path / "t")
    conf = target_conf("t", target, "json", max__files__per__batch=2)
    settings = settings_of(stack, {"t": conf})
    put_and_capture_each(stack, s3, settings, range(4))
    s3.put_object(Bucket=stack.bucket, Key="in/bad.json", Body=b'{"f": 99, "n": 0}\n{cut off\n')
    sqs.send_message(QueueUrl=stack.queue_url, MessageBody="not an S3 event")  # → the quarantine table
    capture(stack)
    ingest(settings, spark)  # target and error table exist, with small files
    tables = {
        "metadata": stack.metadata_path,
        "quarantine": stack.metadata_path + "_quarantine",
        "target:t": target,
        "errors:t": target + "_errors",
    }
    assert all(Path(p, "_delta_log").is_dir() for p in tables.values())
    before = {label: (version(p), tree(p)) for label, p in tables.items()}
    args = conf_args(stack, ingest__targets="t", **conf, **MAINTENANCE)

    dry = run_cli(["maintain", *args, "--dry-run"])

    assert dry.returncode == 0, dry.stderr
    assert {label: (version(p), tree(p)) for label, p in tables.items()} == before
    lines = dry.stdout.splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == list(tables)
    assert all(line.split(" ", 1)[1].startswith("(dry run)") for line in lines)
    small = len(DeltaTable(stack.metadata_path).file_uris())
    assert f"files {small} ({small} small), would compact {small}," in lines[0]
    assert f"version {before['metadata'][0]}" in lines[0]

    one = run_cli(["maintain", *args, "--table", "target:t", "--dry-run"])
    assert one.returncode == 0, one.stderr
    assert [line.split(" ", 1)[0] for line in one.stdout.splitlines()] == ["target:t", "errors:t"]

    missing = run_cli(["maintain", *args, "--table", "target:nope"])
    assert missing.returncode == 2 and "'nope'" in missing.stderr and "--table" in missing.stderr, (
        missing.stderr
    )
    assert missing.stderr.count("\n") == 1  # one line, no traceback
    bogus = run_cli(["maintain", *args, "--table", "bogus"])
    assert bogus.returncode == 2 and "'bogus'" in bogus.stderr and "--table" in bogus.stderr, bogus.stderr
    assert {label: (version(p), tree(p)) for label, p in tables.items()} == before


# ------------------------------------------------------------------------- lagging targets are protected


def test_a_lagging_target_keeps_the_metadata_change_feed_it_has_not_ingested(make_stack, s3, spark, tmp_path):
    stack = make_stack()
    create_legacy_metadata_table(stack.metadata_path)  # bucketed ones: test_metadata_layout.py
    fast, slow = str(tmp_path / "fast"), str(tmp_path / "slow")
    settings = settings_of(
        stack, {"fast": target_conf("fast", fast, "json"), "slow": target_conf("slow", slow, "json")}
    )
    put_and_capture_each(stack, s3, settings, range(4))
    ingest(settings, spark)  # both targets caught up
    month_later = datetime.now(UTC) + timedelta(days=30)

    caught_up = report_of(
        run_maintenance(settings, select_tables(settings, "metadata"), now=month_later), "metadata"
    )

    assert (caught_up.vacuum_retention_hours, caught_up.logs_kept_days, caught_up.notes) == (168, 30, [])
    assert DeltaTable(stack.metadata_path).transaction_version(APP_ID) == int(month_later.timestamp())

    first_new = version(stack.metadata_path) + 1  # after the pass's own commits, which route nothing
    put_and_capture_each(stack, s3, settings, range(4, 10))
    ingest(settings, spark, "fast")  # slow ingests nothing for a while
    slow_checkpoint = DeltaTable(slow).transaction_version("s3events.ingest/slow")
    assert slow_checkpoint is not None and slow_checkpoint < version(stack.metadata_path)
    rows = metadata_rows(stack)

    lagging = report_of(
        run_maintenance(settings, select_tables(settings, "metadata"), now=month_later), "metadata"
    )

    # Everything from the first version slow has not read is kept: ~30 days of it, not the configured 7.
    assert lagging.vacuum_retention_hours is not None and lagging.vacuum_retention_hours > 168
    assert 30 * 24 <= lagging.vacuum_retention_hours <= 30 * 24 + 2
    assert lagging.logs_kept_days is not None and lagging.logs_kept_days > 30
    configuration = DeltaTable(stack.metadata_path).metadata().configuration
    assert configuration["delta.logRetentionDuration"] == f"interval {lagging.logs_kept_days} days"
    (note,) = lagging.notes
    assert "target slow" in note and f"next metadata version to ingest: {first_new}" in note
    assert "fast" not in note
    assert lagging.files_after < lagging.files_before and metadata_rows(stack) == rows

    ingest(settings, spark, "slow")

    assert lines_of(slow) == every_line_once(range(10))
    assert lines_of(fast) == every_line_once(range(10))


def test_a_caught_up_target_gets_the_configured_retention_after_earlier_maintenance_passes(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    target = str(tmp_path / "t")
    settings = settings_of(stack, {"t": target_conf("t", target, "json")})
    put_and_capture_each(stack, s3, settings, range(3))
    ingest(settings, spark)
    run_maintenance(settings, select_tables(settings, "metadata"))  # its commits route nothing to t
    ingest(settings, spark)  # caught up: nothing to ingest
    month_later = datetime.now(UTC) + timedelta(days=30)

    report = report_of(
        run_maintenance(settings, select_tables(settings, "metadata"), now=month_later), "metadata"
    )

    assert (report.vacuum_retention_hours, report.logs_kept_days, report.notes) == (168, 30, [])


def test_a_running_ingest_goes_on_committing_after_metadata_versions_that_route_nothing_to_its_target(
    make_stack, s3, spark, tmp_path
):
    """Maintenance commits on the metadata table, and events routed elsewhere, are versions with nothing
    for a target: a running ingest's cursor moves over them, ahead of the checkpoint its target stores.
    Its next batch must still commit (it once failed on every cycle: "the stored checkpoint moved")."""
    stack = make_stack()
    target = str(tmp_path / "t")
    settings = settings_of(stack, {"t": target_conf("t", target, "json", key__prefix="in/")})
    ports = ingest_ports(settings, spark=spark)
    cycle = Ingest(ports.feed, ports.targets, read=ports.read)
    put_and_capture_each(stack, s3, settings, [0])
    assert not cycle.run_once().failed
    stored = transaction(target, "s3events.ingest/t")
    report_of(run_maintenance(settings, select_tables(settings, "metadata")), "metadata")
    s3.put_object(Bucket=stack.bucket, Key="elsewhere/x.json", Body=jsonl([{"f": 100, "n": 0}]))
    assert run_capture(settings, once=True).written == 1
    assert not cycle.run_once().failed  # caught up, over versions it had nothing to do in
    assert transaction(target, "s3events.ingest/t") == stored  # ...which it has not recorded (yet)

    put_and_capture_each(stack, s3, settings, [1])
    outcome = cycle.run_once()

    assert not outcome.failed, outcome.failed
    assert [b.target for b in outcome.batches] == ["t"]
    assert lines_of(target) == every_line_once([0, 1])
    assert transaction(target, "s3events.ingest/t") == version(stack.metadata_path)


def test_quiet_targets_record_their_progress_so_restarts_and_log_cleanup_need_no_old_versions(
    make_stack, s3, spark, tmp_path
):
    """`busy` ingests every file; `was_busy` ingests one, then its prefix goes quiet; `never` has never been
    routed anything (no table). Every few versions ingest records how far the quiet ones have read."""
    stack = make_stack()
    paths = {name: str(tmp_path / name) for name in ("busy", "was_busy", "never")}
    settings = settings_of(
        stack,
        {
            "busy": target_conf("busy", paths["busy"], "json", key__prefix="in/"),
            "was_busy": target_conf("was_busy", paths["was_busy"], "json", key__prefix="in/000"),
            "never": target_conf("never", paths["never"], "json", key__prefix="elsewhere/"),
        },
    )
    ports = ingest_ports(settings, spark=spark)
    cycle = Ingest(ports.feed, ports.targets, read=ports.read, progress_every=3)
    stored: dict[str, list[int | None]] = {"was_busy": [], "never": []}
    for i in range(8):
        put_and_capture_each(stack, s3, settings, [i])
        assert not cycle.run_once().failed
        stored["was_busy"].append(transaction(paths["was_busy"], "s3events.ingest/was_busy"))
        # `never` has no table: its error table (default path) holds where it has read up to
        stored["never"].append(transaction(paths["never"] + "_errors", "s3events.ingest/never/origin"))

    latest = version(stack.metadata_path)
    # Recorded in steps: never more than `progress_every` versions behind, and never ahead of the feed.
    for name, positions in stored.items():
        assert all(p is not None for p in positions[2:]), (name, positions)
        assert positions[-1] is not None and latest - 3 <= positions[-1] <= latest, (name, positions, latest)
    assert len(set(stored["was_busy"])) >= 3 and len(set(stored["never"])) >= 3, stored

    # Nothing the quiet targets must ingest was skipped: a fresh process lands their next files once.
    s3.put_object(Bucket=stack.bucket, Key="elsewhere/x.json", Body=jsonl([{"f": 100, "n": 0}]))
    s3.put_object(Bucket=stack.bucket, Key="in/0009.json", Body=jsonl([{"f": 9, "n": 0}]))
    assert run_capture(settings, once=True).written == 2
    ingest(settings, spark)
    assert lines_of(paths["never"]) == Counter({(100, 0): 1})
    assert lines_of(paths["was_busy"]) == every_line_once([0]) + Counter({(9, 0): 1})
    assert lines_of(paths["busy"]) == every_line_once(range(8)) + Counter({(9, 0): 1})
    # ...and the metadata table keeps nothing for them: a month later the configured retention applies.
    month_later = datetime.now(UTC) + timedelta(days=30)
    report = report_of(
        run_maintenance(settings, select_tables(settings, "metadata"), now=month_later), "metadata"
    )
    assert (report.vacuum_retention_hours, report.logs_kept_days, report.notes) == (168, 30, [])


def test_a_continuous_process_compacts_a_crowded_table_between_passes_and_runs_full_passes_on_schedule(
    make_stack, s3
):
    stack = make_stack()
    create_legacy_metadata_table(stack.metadata_path)  # bucketed ones: test_metadata_layout.py
    settings = load_settings(
        None,
        stack.conf(
            **MAINTENANCE,
            **FAST_CAPTURE,
            maintenance__compact__small__files=5,
            maintenance__interval__seconds=3600,
        ),
    )
    clock = FakeClock(datetime.now(UTC).timestamp())  # days pass only through the clock
    periodic = PeriodicMaintenance(settings, select_tables(settings, "metadata"), clock=clock)
    put_and_capture_each(stack, s3, settings, range(4))  # 4 small files: not crowded yet
    rows = metadata_rows(stack)

    assert periodic.run_if_due() == []  # nothing is due at the start
    clock.advance(COMPACT_CHECK_SECONDS)
    assert periodic.run_if_due() == []  # checked: 4 < 5 small files
    put_and_capture_each(stack, s3, settings, range(4, 6))
    rows = metadata_rows(stack)
    clock.advance(COMPACT_CHECK_SECONDS / 2)
    assert periodic.run_if_due() == []  # the next check is not due yet
    clock.advance(COMPACT_CHECK_SECONDS / 2)

    (compaction,) = periodic.run_if_due()

    assert compaction.compaction_only and compaction.error is None
    assert (compaction.small_files_before, compaction.files_after) == (6, 1)
    assert metadata_rows(stack) == rows
    assert DeltaTable(stack.metadata_path).transaction_version(APP_ID) is None  # not a full pass
    operations = Counter(h["operation"] for h in DeltaTable(stack.metadata_path).history())
    assert operations["OPTIMIZE"] == 1

    clock.advance(3600)
    (full,) = periodic.run_if_due()

    assert not full.compaction_only and full.error is None and full.checkpoint
    assert DeltaTable(stack.metadata_path).transaction_version(APP_ID) == int(clock())
    clock.advance(COMPACT_CHECK_SECONDS)
    assert periodic.run_if_due() == []  # one file: nothing to compact


class FakeClock:
    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# ------------------------------------------------------------------------------- crashes inside a pass


def test_an_orphan_file_of_a_killed_compaction_is_ignored_and_referenced_files_survive_vacuum(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    target = str(tmp_path / "t")
    settings = settings_of(stack, {"t": target_conf("t", target, "json")})
    put_and_capture_each(stack, s3, settings, range(6))
    rows = metadata_rows(stack)
    version_before = version(stack.metadata_path)
    orphan = leave_orphan(stack.metadata_path)

    # Readers and ingest see only committed files.
    assert metadata_rows(stack) == rows and version(stack.metadata_path) == version_before
    ingest(settings, spark)
    assert lines_of(target) == every_line_once(range(6))

    far_future = datetime.now(UTC) + timedelta(days=400)
    reports = run_maintenance(settings, select_tables(settings, "all"), now=far_future)

    meta = report_of(reports, "metadata")
    assert meta.vacuum_retention_hours == 168  # the target is caught up
    referenced = referenced_files(stack.metadata_path)
    assert referenced and all(Path(uri.removeprefix("file://")).exists() for uri in referenced)
    assert metadata_rows(stack) == rows
    assert all(not r.error for r in reports)
    put_and_capture_each(stack, s3, settings, range(6, 8))
    ingest(settings, spark)
    assert lines_of(target) == every_line_once(range(8))
    assert orphan.exists()  # younger than any retention: vacuum leaves it (a writer may still commit it)


def test_an_orphan_file_older_than_the_retention_is_vacuumed(make_stack, s3):
    stack = make_stack()
    settings = load_settings(None, stack.conf(**MAINTENANCE, **FAST_CAPTURE))  # no target holds anything back
    put_and_capture_each(stack, s3, settings, range(3))
    rows = metadata_rows(stack)
    # Crashed 60 days ago: delta-rs ages an untracked file by its modification time against its own clock
    # (`now=` only reaches the retention computed), so the file itself carries the passing time.
    orphan = leave_orphan(stack.metadata_path, age=timedelta(days=60))
    referenced = referenced_files(stack.metadata_path)

    reports = run_maintenance(
        settings, select_tables(settings, "metadata"), now=datetime.now(UTC) + 60 * 24 * HOUR
    )

    meta = report_of(reports, "metadata")
    assert metadata_rows(stack) == rows
    # Every file a version may still need stays: the current ones and those compaction just replaced.
    assert all(
        Path(uri.removeprefix("file://")).exists()
        for uri in referenced | referenced_files(stack.metadata_path)
    )
    assert meta.vacuumed >= 1 and not orphan.exists()


def leave_orphan(table_path: str, *, age: timedelta | None = None) -> Path:
    """What a compaction killed before its commit leaves: a Parquet data file no commit references."""
    committed = Path(next(iter(DeltaTable(table_path).file_uris())).removeprefix("file://"))
    orphan = committed.with_name(f"part-00000-{uuid.uuid4()}-c000.zstd.parquet")
    shutil.copyfile(committed, orphan)
    if age is not None:
        then = time.time() - age.total_seconds()
        os.utime(orphan, (then, then))
    assert str(orphan) not in {u.removeprefix("file://") for u in DeltaTable(table_path).file_uris()}
    return orphan


@pytest.mark.process
@pytest.mark.chaos
def test_a_maintain_process_killed_at_any_early_point_leaves_the_tables_readable_and_intact(
    make_stack, s3, spark, tmp_path
):
    stack = make_stack()
    target = str(tmp_path / "t")
    conf = target_conf("t", target, "json", max__files__per__batch=2)
    settings = settings_of(stack, {"t": conf})
    args = conf_args(stack, ingest__targets="t", **conf, **MAINTENANCE)
    put_and_capture_each(stack, s3, settings, range(4))
    ingest(settings, spark)
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    # Kill points: seconds after the start (0: while it imports; a pass ends a few hundred ms in), and
    # right after the pass's 1st and 2nd commits to the metadata table (compaction, then the next step).
    kill_points: list[float | int] = [0.0, *sorted(round(rng.uniform(0.1, 0.5), 3) for _ in range(2)), 1, 2]
    landed: list[tuple[float | int, int, int]] = []  # (kill point, exit code, commits it made)
    files = 4
    for point in kill_points:
        put_and_capture_each(stack, s3, settings, range(files, files + 3))  # new small files: work to do
        files += 3
        rows, before = metadata_rows(stack), version(stack.metadata_path)
        proc = subprocess.Popen(
            [s3events_exe(), "maintain", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )
        try:
            if isinstance(point, int):
                wait_for(
                    partial(committed_or_exited, proc, stack.metadata_path, before + point),
                    seconds=60,
                    what=f"the pass's commit number {point}",
                )
            else:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=point)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.communicate(timeout=60)
        landed.append((point, proc.returncode, max(log_versions(stack.metadata_path)) - before))

        assert metadata_rows(stack) == rows, (seed, landed)
        assert log_versions(stack.metadata_path) == list(range(version(stack.metadata_path) + 1))
        again = run_cli(["maintain", *args])
        assert again.returncode == 0, (seed, landed, again.stderr)
        assert metadata_rows(stack) == rows
        assert DeltaTable(stack.metadata_path).transaction_version(APP_ID) is not None

    # The kill at the start and those after a commit caught a live process (between the pass's steps).
    assert all(code == -signal.SIGKILL for point, code, _ in landed if point in (0.0, 1)), (seed, landed)
    assert all(made >= 1 for point, code, made in landed if point == 1), (seed, landed)
    ingest(settings, spark)
    assert lines_of(target) == every_line_once(range(files))


def committed_or_exited(proc: subprocess.Popen[str], table_path: str, version: int) -> bool:
    return proc.poll() is not None or max(log_versions(table_path)) >= version


# ------------------------------------------------------------------------------- beside a running capture


@pytest.mark.process
def test_compaction_beside_a_running_capture_and_backfill_loses_and_duplicates_no_event(make_stack, s3):
    stack = make_stack()
    create_legacy_metadata_table(stack.metadata_path)  # bucketed ones: test_metadata_layout.py
    args = conf_args(stack, **MAINTENANCE)
    # Small batches: while a wave flows in, capture commits every few events, back to back.
    capture_args = conf_args(stack, **MAINTENANCE, source__queue__max__messages__per__batch=4)
    capture_proc = subprocess.Popen(
        [s3events_exe(), "capture", "--continuous", "--min-sync-interval-seconds", "0", *capture_args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    waves = [[f"live/{w:02d}/{i}.json" for i in range(16)] for w in range(10)]
    keys = ["live/warm-up.json"] + [k for wave in waves for k in wave]
    passes: list[Any] = []
    backfilled: list[Any] = []
    putting_done = threading.Event()

    def put(batch: list[str]) -> None:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda k: s3.put_object(Bucket=stack.bucket, Key=k, Body=k.encode()), batch))

    def captured() -> set[str]:
        if not Path(stack.metadata_path, "_delta_log").is_dir():
            return set()
        return {r["key"] for r in read_table(stack.metadata_path)}

    def maintain_until_done() -> None:  # passes back to back, each racing capture's commits
        while not putting_done.is_set():
            passes.append(run_cli(["maintain", "--table", "metadata", *args]))

    maintaining = threading.Thread(target=maintain_until_done)
    try:
        put(keys[:1])
        wait_for(lambda: "live/warm-up.json" in captured(), seconds=60, what="capture to be up")
        maintaining.start()
        for n, wave in enumerate(waves):
            passes_before = len(passes)
            put(wave)
            if n == 4:  # one backfill pass racing capture for the same objects
                backfilled.append(run_cli(["backfill", *args, "--source", f"s3://{stack.bucket}"]))
            # the next wave once capture committed this one: one capture commit (at least) per wave
            wait_for(lambda wave=wave: set(wave) <= captured(), seconds=60, what="a wave to be captured")
            # and once a maintenance pass ended meanwhile or after: passes keep racing capture's commits
            wait_for(lambda n=passes_before: len(passes) > n, seconds=120, what="a maintenance pass")
        putting_done.set()
        maintaining.join(timeout=120)
        passes.append(run_cli(["maintain", "--table", "metadata", *args]))
    finally:
        putting_done.set()
        capture_proc.send_signal(signal.SIGTERM)
        _, capture_err = capture_proc.communicate(timeout=60)

    assert capture_proc.returncode == 0, capture_err
    failed = [p.stderr for p in passes + backfilled if p.returncode]
    assert not failed, failed
    assert len(passes) >= 5 and backfilled
    compactions = [int(m) for p in passes for m in re.findall(r"compacted (\d+) into", p.stdout)]
    assert sum(c > 0 for c in compactions) >= 3, [p.stdout for p in passes]
    rows = read_table(stack.metadata_path)
    assert Counter(r["key"] for r in rows) == Counter(keys)  # none lost, none twice
    assert len({r["event_id"] for r in rows}) == len(rows)
    versions = log_versions(stack.metadata_path)
    assert versions == list(range(len(versions)))  # contiguous: every commit landed exactly once
    operations = Counter(h["operation"] for h in DeltaTable(stack.metadata_path).history())
    # capture's commits: appends of new events, MERGEs of batches holding known ones
    assert operations["OPTIMIZE"] >= 3 and operations["MERGE"] + operations["WRITE"] >= len(waves)


def test_two_maintenance_passes_racing_on_one_table_duplicate_no_row(make_stack, s3):
    """Two maintainers of one table: `s3events maintain` beside a --continuous process's periodic pass, two
    captures on one queue, two ingests pointed at one target (README: retries, never duplicates)."""
    stack = make_stack()
    settings = load_settings(None, stack.conf(**MAINTENANCE, **FAST_CAPTURE))
    tables = select_tables(settings, "metadata")
    files = 0
    outcomes = []
    for attempt in range(5):
        put_and_capture_each(stack, s3, settings, range(files, files + 6))
        files += 6

        reports = two_passes_at_once(settings, tables)

        keys = Counter(r["key"] for r in read_table(stack.metadata_path))
        outcomes.append((attempt, [r.line() for r in reports]))
        assert keys == Counter(f"in/{i:03d}.json" for i in range(files)), outcomes
        assert all(r.error is None for r in reports), outcomes


def two_passes_at_once(settings: Any, tables: Sequence[TableToMaintain]) -> list[TableReport]:
    """Two maintenance passes over `tables`, in two threads released at the same instant."""
    start = threading.Barrier(2)
    reports: list[TableReport] = []

    def one_pass() -> None:
        start.wait(timeout=60)
        reports.extend(run_maintenance(settings, tables))

    passes = [threading.Thread(target=one_pass) for _ in range(2)]
    for thread in passes:
        thread.start()
    for thread in passes:
        thread.join(timeout=120)
    return reports
