"""A target added late bootstraps from the metadata table's snapshot: on one metadata table (real capture
of moto's notifications, bucketed layout, local Spark, real delta-rs tables), targets that read the
whole change feed from version 0 and targets that bootstrap from the snapshot hold the same rows —
appending targets each content once, mirroring ones the live objects only. After `maintain` has cleaned
up the log and vacuumed (two passes five weeks apart: the files carry the age, `now=` the pass's clock),
only the snapshot way still works, and gives the same rows again. A kill at any point of a bootstrap resumes
exactly once (the kill points of test_ingest_crash_points.py)."""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from s3events.capture.service import run_capture
from s3events.errors import FatalError
from s3events.ingest.cycle import Ingest
from s3events.ingest.service import build_ingest, ingest_ports, run_ingest
from s3events.ingest.snapshot import MetadataSnapshot
from s3events.maintenance.service import run_maintenance, select_tables
from tests.conftest import Stack, read_table, run_cli, spark_env, write_metadata_version
from tests.integration.test_ingest import jsonl, settings_for, target_conf
from tests.integration.test_ingest_crash_points import Killed, _killed_at

pytestmark = pytest.mark.integration

POLICIES = {"keep": "ignore", "mirror": "delete"}
Lines = Counter[tuple[str, str, int, int]]


class Landing:
    """The landing bucket as the test changes it, and what S3 holds now (key -> (content, etag))."""

    def __init__(self, stack: Stack, s3: Any) -> None:
        self.stack, self.s3 = stack, s3
        self.current: dict[str, tuple[int, str] | None] = {}

    def put(self, key: str, content: int) -> None:
        body = jsonl([{"c": content, "n": n} for n in range(2)])
        etag = self.s3.put_object(Bucket=self.stack.bucket, Key=key, Body=body)["ETag"].strip('"')
        self.current[key] = (content, etag)

    def delete(self, key: str) -> None:
        self.s3.delete_object(Bucket=self.stack.bucket, Key=key)
        self.current[key] = None

    def live_lines(self, prefix: str) -> Lines:
        return Counter(
            {
                (f"s3://{self.stack.bucket}/{key}", held[1], held[0], n): 1
                for key, held in self.current.items()
                if held is not None and key.startswith(prefix)
                for n in range(2)
            }
        )


def capture(settings: Any) -> None:
    run_capture(settings, once=True)


def lines(path: str) -> Lines:
    if not Path(path, "_delta_log").exists():
        return Counter()
    return Counter((r["_source_file"], r["_source_etag"], r["c"], r["n"]) for r in read_table(path))


def targets_conf(tmp_path: Path, *names: str, max_files: int = 2) -> dict[str, dict[str, object]]:
    """Targets named `<policy>_<way>` on the prefix in/, small batches."""
    return {
        name: target_conf(
            name,
            str(tmp_path / name),
            "json",
            key__prefix="in/",
            max__files__per__batch=max_files,
            on__object__removed=POLICIES[name.split("_")[0]],
        )
        for name in names
    }


def age_every_file(path: str, days: int) -> None:
    """`days` pass for delta-rs, which ages log entries and untracked files by their modification time:
    every file's is moved `days` back."""
    for file in Path(path).rglob("*"):
        if file.is_file():
            then = file.stat().st_mtime - days * 86400
            os.utime(file, (then, then))


def a_month_of_object_lives(landing: Landing, settings: Any) -> None:
    """Uploads, overwrites, a removal, the same bytes again after it, and objects routed elsewhere, each
    step its own capture commit (a metadata version)."""
    for key in ("in/a.json", "in/b.json", "in/c.json", "other/x.json"):
        landing.put(key, 0)
    capture(settings)
    landing.put("in/a.json", 1)  # new bytes
    capture(settings)
    landing.delete("in/b.json")
    capture(settings)
    landing.put("in/b.json", 0)  # the same bytes again, after a removal
    landing.put("in/d.json", 0)
    capture(settings)
    landing.put("in/c.json", 1)
    landing.delete("in/d.json")
    landing.put("in/e.json", 0)
    capture(settings)


# One case per removal policy (each its own metadata table, lived through the same steps): the workers
# share the two cases, as they could not share one case holding both policies' targets.
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_the_snapshot_way_gives_what_the_whole_change_feed_gives_also_after_log_cleanup_and_vacuum(
    make_stack, s3, spark, tmp_path, policy
):
    stack = make_stack()
    names = [f"{policy}_{way}" for way in ("feed", "snapshot", "refeed", "late")]
    # A first maintenance pass writes a checkpoint: log cleanup then removes the entries behind it.
    settings = settings_for(stack, targets_conf(tmp_path, *names), source__queue__long__poll__wait=0)
    landing = Landing(stack, s3)
    a_month_of_object_lives(landing, settings)
    feed_way = tuple(n for n in names if n.endswith("_feed"))
    snapshot_way = tuple(n for n in names if n.endswith("_snapshot"))

    assert not run_ingest(settings, once=True, targets=feed_way, start_at=-1, spark=spark).failed
    assert not run_ingest(settings, once=True, targets=snapshot_way, spark=spark).failed

    paths = {name: str(tmp_path / name) for name in names}
    assert lines(paths[f"{policy}_snapshot"]) == lines(paths[f"{policy}_feed"])
    if policy == "mirror":
        assert lines(paths["mirror_snapshot"]) == landing.live_lines("in/")  # live objects only
    else:
        keep = lines(paths["keep_snapshot"])
        assert not landing.live_lines("in/") - keep and set(keep.values()) == {1}  # each content once

    # Both ways follow the change feed from here: what lands next lands the same.
    landing.put("in/f.json", 0)
    landing.delete("in/a.json")
    capture(settings)
    assert not run_ingest(settings, once=True, targets=feed_way + snapshot_way, spark=spark).failed
    assert lines(paths[f"{policy}_snapshot"]) == lines(paths[f"{policy}_feed"])
    if policy == "mirror":
        assert lines(paths["mirror_snapshot"]) == landing.live_lines("in/")

    # What the whole change feed gives new targets now, while the log is whole (S3 has moved on: a removed
    # object's content can no longer be read by a target that did not read it before).
    refeed = tuple(n for n in names if n.endswith("_refeed"))
    assert not run_ingest(settings, once=True, targets=refeed, start_at=-1, spark=spark).failed

    # Ten weeks on, maintenance passes five weeks apart: the first compacts and writes a checkpoint; the
    # second cleans the log up behind it (delta-rs deletes expired entries only up to a checkpoint that
    # no unexpired entry precedes) and vacuums. The late targets are not configured yet (a target
    # without a checkpoint would hold the log back).
    before = settings_for(stack, targets_conf(tmp_path, *feed_way, *snapshot_way))
    reports = []
    for days in (35, 70):
        age_every_file(stack.metadata_path, days=35)
        reports += run_maintenance(
            before, select_tables(before, "metadata"), now=datetime.now(UTC) + timedelta(days=days)
        )
    assert all(r.error is None for r in reports) and sum(r.vacuumed for r in reports) > 0, reports
    log = sorted(p.name for p in Path(stack.metadata_path, "_delta_log").iterdir())
    assert f"{0:020d}.json" not in log, (reports, log)

    late = tuple(n for n in names if n.endswith("_late"))
    with pytest.raises(FatalError, match="--rebuild"):
        build_ingest(settings, targets=late, start_at=-1, spark=spark).run_once()  # the feed from 0
    assert not run_ingest(settings, once=True, targets=late, spark=spark).failed
    assert lines(paths[f"{policy}_late"]) == lines(paths[f"{policy}_refeed"])
    if policy == "mirror":
        assert lines(paths["mirror_late"]) == landing.live_lines("in/")


# ------------------------------------------------------------------------------------- kills mid-bootstrap

FILES = 6  # in the snapshot; with 2 files a batch: batches 0 and 1 inside it, batch 2 hands over
AFTER = 2  # files committed after the snapshot's version, read from the change feed


@pytest.mark.chaos
@pytest.mark.timeout(1200)
@pytest.mark.parametrize(
    ("policy", "batches_before_kill", "point"),
    [
        ("keep", 0, "after_executors_wrote"),
        ("keep", 1, "after_error_table"),
        ("keep", 2, "after_executors_wrote"),  # the batch that hands over to the change feed
        ("keep", 1, "between_batches"),
        ("mirror", 2, "after_error_table"),
    ],
)
def test_a_bootstrap_killed_at_any_point_resumes_exactly_once(
    make_stack, s3, spark, tmp_path, policy, batches_before_kill, point
):
    stack = make_stack()
    keys = [f"in/{i:02d}.json" for i in range(FILES + AFTER)]
    for i, key in enumerate(keys):  # two good lines and a bad one each
        s3.put_object(
            Bucket=stack.bucket, Key=key, Body=jsonl([{"c": i, "n": 0}, {"c": i, "n": 1}]) + b"{no\n"
        )
    write_metadata_version(stack, keys[: FILES // 2], s3)
    write_metadata_version(stack, keys[FILES // 2 : FILES], s3)
    name = f"{policy}_t"
    conf = settings_for(stack, targets_conf(tmp_path, name))
    target = str(tmp_path / name)

    ports = ingest_ports(conf, spark=spark)
    ingest = Ingest(ports.feed, ports.targets, read=ports.read)
    for _ in range(batches_before_kill):
        ingest.run_once()
    if point != "between_batches":  # the next batch runs until the kill
        killed = _killed_at(point, ports)
        with contextlib.suppress(Killed):
            Ingest(killed.feed, killed.targets, read=killed.read).run_once()
    write_metadata_version(stack, keys[FILES:], s3)  # the metadata table moves on meanwhile
    survivor = build_ingest(conf, spark=spark)
    while not survivor.run_once().idle:
        pass

    assert Counter((r["c"], r["n"]) for r in read_table(target)) == Counter(
        {(i, n): 1 for i in range(FILES + AFTER) for n in (0, 1)}
    )
    assert Counter(e["_source_file"] for e in read_table(target + "_errors")) == Counter(
        {f"s3://{stack.bucket}/{key}": 1 for key in keys}
    )


# ----------------------------------------------------------------------------------------------- rebuild


@pytest.mark.process
@pytest.mark.timeout(1200)
def test_rebuild_replaces_a_target_from_the_snapshot_and_asks_for_confirmation_first(
    make_stack, s3, spark, tmp_path
):
    """The rebuild through the real CLI (its exit codes, one JVM of its own); the table it replaces is
    ingested in the test process, on the worker's Spark session."""
    stack = make_stack()
    keys = [f"in/{i}.json" for i in range(3)]
    for i, key in enumerate(keys):
        s3.put_object(
            Bucket=stack.bucket, Key=key, Body=jsonl([{"c": i, "n": 0}, {"c": i, "n": 1}]) + b"{no\n"
        )
    write_metadata_version(stack, keys, s3)
    target = str(tmp_path / "keep_t")
    conf = [
        arg
        for kv in stack.conf(ingest__targets="keep_t", **targets_conf(tmp_path, "keep_t")["keep_t"])
        for arg in ("--conf", kv)
    ]
    settings = settings_for(stack, targets_conf(tmp_path, "keep_t"))
    assert not run_ingest(settings, once=True, spark=spark).failed
    before = lines(target)
    Path(target, "stray.txt").write_text("a file of the old table's directory")

    unconfirmed = run_cli(
        ["ingest", "--once", "--target", "keep_t", "--rebuild", *conf], env=spark_env(), timeout=900
    )
    assert unconfirmed.returncode == 2 and "--yes" in unconfirmed.stderr, unconfirmed.stderr
    assert Path(target, "stray.txt").exists()  # nothing deleted

    rebuilt = run_cli(
        ["ingest", "--once", "--target", "keep_t", "--rebuild", "--yes", *conf], env=spark_env(), timeout=240
    )

    assert rebuilt.returncode == 0, rebuilt.stderr
    assert not Path(target, "stray.txt").exists()
    assert lines(target) == before and set(before.values()) == {1} and len(before) == 6
    errors = Counter(e["_source_file"] for e in read_table(target + "_errors"))
    assert errors == Counter({f"s3://{stack.bucket}/{key}": 1 for key in keys})


# ------------------------------------------------------------------------------- reading the snapshot


def test_the_snapshot_resumes_at_any_position_the_same_rows_in_the_same_order(tmp_path):
    """Files of several row groups, a filter on the prefix: from every position a read gives exactly the
    rest of the whole read, and a version's rows stay the version's after later commits."""
    from deltalake import WriterProperties, write_deltalake

    path = str(tmp_path / "metadata")

    def commit(first: int, count: int) -> None:
        now = datetime.now(UTC)
        keys = [f"{'in' if n % 3 else 'other'}/{n:03d}.json" for n in range(first, first + count)]
        table = pa.table(
            {
                "bucket": ["b"] * count,
                "key": keys,
                "etag": [f"e{n}" for n in range(first, first + count)],
                "version_id": pa.array([None] * count, pa.string()),
                "size": [10] * count,
                "event_time": pa.array([now] * count, pa.timestamp("us", tz="UTC")),
                "event_id": [f"{n:04x}" for n in range(first, first + count)],
                "event_kind": ["created"] * count,
            }
        )
        write_deltalake(path, table, mode="append", writer_properties=WriterProperties(max_row_group_size=4))

    commit(0, 10)
    commit(10, 13)
    snapshot = MetadataSnapshot(path, storage_options=dict)
    whole = list(snapshot.rows(1, key_prefix="in/"))
    commit(23, 5)  # version 2: version 1's snapshot is what it was

    assert sorted(r.entry.key for r in whole) == [f"in/{n:03d}.json" for n in range(23) if n % 3]
    assert list(snapshot.rows(1, key_prefix="in/")) == whole
    for n, row in enumerate(whole):
        assert list(snapshot.rows(1, file=row.file, row=row.row, key_prefix="in/")) == whole[n:]
    assert len({r.file for r in whole}) == 2 and max(r.row for r in whole) > 4  # several row groups
