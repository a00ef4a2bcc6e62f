"""`Ingest.run_once` on fakes (no Spark, no moto, no Delta): the numbered steps of `ingest/cycle.py` —
1 plan, 2 read, 3 write + checkpoint — and what the cycle promises around them: the checkpoint moves in
the same commit as the batch's data, one failing target does not stop the others, a restart resumes from
the stored checkpoint, a commit that finds the checkpoint moved by another process is abandoned.

The fakes hold what the real stores hold (`target_table.TargetTable`, `ErrorTable`, `feed.MetadataFeed`)
and refuse what they refuse: a checkpoint moving backwards, a commit whose stored checkpoint is no longer
the one the cycle read.

Tests of the change-feed path start new targets at version 0 (`start_at=-1`); a new target otherwise
bootstraps from the metadata table's snapshot (tests/unit/test_ingest_snapshot_plan.py)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest

from s3events.errors import CheckpointError, CommitConflict, ConfigError, FatalError
from s3events.ingest.cycle import Ingest, Target
from s3events.ingest.feed import ChangeRows as Changes
from s3events.ingest.model import Batch, Checkpoint, Deletion, FileRef, Limits, SnapshotRow
from s3events.ingest.notify.model import BatchSummary
from s3events.ingest.plan import Route, ensure_forward
from s3events.ingest.target import TargetSpec

T0 = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)
SCHEMA = pa.schema([("line", pa.string())])
NO_ERRORS = pa.table({"reason": pa.array([], pa.string())})


def ref(
    version: int,
    key: str,
    *,
    bucket: str = "landing",
    kind: str = "created",
    etag: str = "e1",
    size: int = 10,
    minutes: int = 0,
    recreated: bool = False,
) -> FileRef:
    """A metadata row of version `version`: an event on s3://bucket/key, `minutes` after T0."""
    return FileRef(
        bucket=bucket,
        key=key,
        etag=etag,
        version_id=None,
        size=size,
        event_time=T0 + timedelta(minutes=minutes),
        event_id=f"{version}-{key}-{kind}-{etag}",
        event_kind=kind,  # type: ignore[arg-type]
        commit_version=version,
        recreated=recreated,
    )


class FakeFeed:
    """The metadata table's change feed: `rows` committed at their versions, up to `latest`."""

    path = "/lake/metadata"

    def __init__(self, rows: Sequence[FileRef] = (), *, latest: int | None = None) -> None:
        self.rows = list(rows)
        self.latest = latest if latest is not None else max((r.commit_version for r in rows), default=None)
        self.reads: list[tuple[int, int]] = []

    def commit(self, *rows: FileRef) -> None:
        """A new metadata version (one capture commit) holding `rows` (their versions are rewritten)."""
        self.latest = (self.latest if self.latest is not None else -1) + 1
        self.rows.extend(_at_version(r, self.latest) for r in rows)

    def latest_version(self) -> int | None:
        return self.latest

    def changes_after(self, version: int, *, up_to: int) -> Changes:
        self.reads.append((version, up_to))
        return Changes([r for r in self.rows if version < r.commit_version <= up_to], max(up_to, version))

    def has_version(self, version: int) -> bool:
        return self.latest is not None and version <= self.latest

    def snapshot_rows(self, start: Checkpoint, *, bucket: str | None, key_prefix: str) -> list[SnapshotRow]:
        """The table at version `start.snapshot` as one data file: its rows in (version, event id) order."""
        rows = sorted((r for r in self.rows if r.commit_version <= start.snapshot), key=_version_order)
        return [
            SnapshotRow(_at_version(r, start.snapshot, keep_id=True), 0, n)
            for n, r in enumerate(rows)
            if n >= start.snapshot_row
            and (bucket is None or r.bucket == bucket)
            and r.key.startswith(key_prefix)
        ]


def _version_order(row: FileRef) -> tuple[int, str]:
    return row.commit_version, row.event_id


def _at_version(row: FileRef, version: int, *, keep_id: bool = False) -> FileRef:
    return FileRef(
        bucket=row.bucket,
        key=row.key,
        etag=row.etag,
        version_id=row.version_id,
        size=row.size,
        event_time=row.event_time,
        event_id=row.event_id if keep_id else f"{version}-{row.event_id}",
        event_kind=row.event_kind,
        commit_version=version,
        recreated=row.recreated,
    )


@dataclass
class Commit:
    """One commit of a target table: what it added and the checkpoint it carried."""

    kind: str  # append | merge | checkpoint
    uris: list[str]
    end: Checkpoint
    summary: BatchSummary | None = None  # what notifications announce of it


class FakeTargetTable:
    """A target table: its commits, each carrying the checkpoint (the app transaction) with its data."""

    def __init__(self) -> None:
        self.commits: list[Commit] = []
        self.rows: list[tuple[str, str | None]] = []  # (uri, etag) of every file's rows it holds
        self.deleted: list[Deletion] = []
        self.moved_by_another: Checkpoint | None = None  # another process commits this just before ours
        self.refuse_next: Exception | None = None  # the next commit fails so

    def checkpoint(self) -> Checkpoint | None:
        return self.commits[-1].end if self.commits else None

    def schema(self) -> pa.Schema | None:
        return SCHEMA if self.commits else None

    def delete_rows(self, deletions: Sequence[Deletion]) -> int:
        self.deleted.extend(deletions)
        gone = {d.uri for d in deletions}
        before = len(self.rows)
        self.rows = [row for row in self.rows if row[0] not in gone]
        return before - len(self.rows)

    def held_contents(self, files: Sequence[FileRef]) -> set[tuple[str, str | None]]:
        return {(f.uri, f.etag) for f in files if (f.uri, f.etag) in self.rows}

    def commit_checkpoint(
        self, *, expected: Checkpoint | None, end: Checkpoint, summary: BatchSummary | None = None
    ) -> int | None:
        if not self.commits:
            return None
        self._guard(expected, end)
        return self._commit(Commit("checkpoint", [], end, summary))

    def commit_append(
        self,
        files: list[Any],
        *,
        schema: pa.Schema,
        partition_by: tuple[str, ...],
        expected: Checkpoint | None,
        end: Checkpoint,
        summary: BatchSummary | None = None,
    ) -> int:
        self._guard(expected, end)
        self.rows.extend(files)
        return self._commit(Commit("append", [uri for uri, _ in files], end, summary))

    def commit_merge(
        self,
        rows: Any,
        *,
        record_key: tuple[str, ...],
        ordering_field: str | None,
        partition_by: tuple[str, ...],
        expected: Checkpoint | None,
        end: Checkpoint,
        deletes: Any = None,
        summary: BatchSummary | None = None,
    ) -> int:
        self._guard(expected, end)
        self.rows.extend(rows.files)
        return self._commit(Commit("merge", [uri for uri, _ in rows.files], end, summary))

    @property
    def uris(self) -> list[str]:
        return [uri for commit in self.commits for uri in commit.uris]

    def _guard(self, expected: Checkpoint | None, end: Checkpoint) -> None:
        if self.refuse_next is not None:
            refused, self.refuse_next = self.refuse_next, None
            raise refused
        if self.moved_by_another is not None:
            self.commits.append(Commit("append", [], self.moved_by_another))
            self.moved_by_another = None
        stored = self.commits[-1].end if self.commits else None
        if stored is not None:
            ensure_forward(stored, end)
        if stored != expected:
            raise CheckpointError(
                f"the stored checkpoint moved to {stored} while this batch expected {expected}"
            )

    def _commit(self, commit: Commit) -> int:
        self.commits.append(commit)
        return len(self.commits) - 1


class FakeErrorTable:
    def __init__(self) -> None:
        self.recorded_origin: Checkpoint | None = None
        self.error_batches: list[tuple[int, Checkpoint]] = []  # (rows, end) per write

    def origin(self) -> Checkpoint | None:
        return self.recorded_origin

    def record_origin(self, start: Checkpoint, *, replacing: Checkpoint | None = None) -> Checkpoint:
        if self.recorded_origin == replacing:
            self.recorded_origin = start
        assert self.recorded_origin is not None
        return self.recorded_origin

    def record(self, errors: pa.Table, *, end: Checkpoint) -> int:
        if errors.num_rows:
            self.error_batches.append((errors.num_rows, end))
        return errors.num_rows


@dataclass
class FakeMergeRows:
    files: list[tuple[str, str | None]]
    schema: pa.Schema = SCHEMA
    keys: pa.Table = field(default_factory=lambda: pa.table({"id": pa.array([], pa.string())}))

    @property
    def num_rows(self) -> int:
        return len(self.files)

    def take_rows(self) -> pa.Table:
        return pa.table({"line": [uri for uri, _ in self.files]})


@dataclass
class FakeReadResult:
    files: list[tuple[str, str | None]]  # a "written file" here is the (uri, etag) it was read from
    schema: pa.Schema = SCHEMA
    errors: pa.Table = field(default_factory=lambda: NO_ERRORS)
    merge: FakeMergeRows | None = None
    failed_files: dict[str, str] = field(default_factory=dict)
    fast_path_files: int = 0
    filtered: int = 0
    transform: str | None = None
    rescued: int = 0
    ignored_fields: tuple[str, ...] = ()

    @property
    def rows(self) -> int:
        return len(self.files)


class FakeRead:
    """Step 2 (Spark's read of a batch's files): one "row" per file; `missing` objects fail to be read,
    `bad_lines` are error rows per uri, and a target in `broken` raises as a failed Spark job would."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, Batch]] = []
        self.missing: set[str] = set()
        self.bad_lines: dict[str, int] = {}
        self.broken: dict[str, Exception] = {}

    def __call__(
        self, batch: Batch, spec: TargetSpec, *, existing_schema: pa.Schema | None
    ) -> FakeReadResult:
        self.batches.append((spec.name, batch))
        if spec.name in self.broken:
            raise self.broken[spec.name]
        read = [(f.uri, f.etag) for f in batch.files if f.uri not in self.missing]
        failed = {f.uri: "NoSuchKey: the object is gone" for f in batch.files if f.uri in self.missing}
        errors = sum(self.bad_lines.get(f.uri, 0) for f in batch.files)
        error_rows = pa.table({"reason": pa.array(["bad line"] * errors, pa.string())})
        merge = FakeMergeRows(read) if spec.mode == "merge" else None
        return FakeReadResult(read, errors=error_rows, merge=merge, failed_files=failed)

    def keys(self, target: str) -> list[list[str]]:
        return [[f.key for f in batch.files] for name, batch in self.batches if name == target]


@dataclass
class Lake:
    """A feed, step 2 and the targets' stores, which outlive any one `Ingest` (as a restart would find)."""

    feed: FakeFeed
    read: FakeRead = field(default_factory=FakeRead)
    tables: dict[str, FakeTargetTable] = field(default_factory=dict)
    errors: dict[str, FakeErrorTable] = field(default_factory=dict)

    def ingest(self, *specs: TargetSpec, **options: Any) -> Ingest:
        targets = []
        for spec in specs:
            table = self.tables.setdefault(spec.name, FakeTargetTable())
            errors = self.errors.setdefault(spec.name, FakeErrorTable())
            targets.append(Target(spec, table, errors))
        return Ingest(self.feed, targets, read=self.read, **options)


def target(name: str = "events", *, prefix: str = "", max_files: int = 1000, **options: Any) -> TargetSpec:
    return TargetSpec(
        name=name,
        path=f"/lake/{name}",
        format="json",
        route=Route(key_prefix=prefix),
        limits=Limits(max_files=max_files),
        error_table_path=f"/lake/{name}_errors",
        **options,
    )


def uri(key: str) -> str:
    return f"s3://landing/{key}"


# ------------------------------------------------------------------------------------ 3. write + checkpoint


def test_a_batch_commits_its_data_and_its_checkpoint_in_one_commit():
    lake = Lake(FakeFeed([ref(0, "a.json"), ref(1, "b.json"), ref(1, "c.json")]))

    cycle = lake.ingest(target(), start_at=-1).run_once()

    table = lake.tables["events"]
    assert [c.kind for c in table.commits] == ["append"]  # no separate checkpoint commit
    assert table.commits[0].uris == [uri("a.json"), uri("b.json"), uri("c.json")]
    assert table.commits[0].end == Checkpoint(1, 0)
    [report] = cycle.batches
    assert (report.files, report.rows, report.version) == (3, 3, 0)
    assert (report.start, report.end) == (Checkpoint(-1, 0), Checkpoint(1, 0))
    assert cycle.failed == {}


def test_a_caught_up_target_makes_no_commit_and_the_cycle_is_idle():
    lake = Lake(FakeFeed([ref(0, "a.json")]))
    ingest = lake.ingest(target())
    assert not ingest.run_once().idle

    again = ingest.run_once()

    assert again.idle
    assert len(lake.tables["events"].commits) == 1
    assert lake.read.keys("events") == [["a.json"]]


def test_no_metadata_table_yet_is_an_idle_cycle_that_reads_nothing():
    lake = Lake(FakeFeed(latest=None))

    cycle = lake.ingest(target()).run_once()

    assert cycle.idle and cycle.failed == {} and cycle.progress == {}
    assert lake.feed.reads == []


def test_a_bounded_batch_checkpoints_inside_a_version_and_the_next_cycle_goes_on_from_there():
    lake = Lake(FakeFeed([ref(0, f"{n}.json") for n in range(5)]))
    ingest = lake.ingest(target(max_files=2), start_at=-1)

    ends = [report.end for _ in range(3) for report in ingest.run_once().batches]

    assert ends == [Checkpoint(-1, 2), Checkpoint(-1, 4), Checkpoint(0, 0)]
    assert lake.read.keys("events") == [["0.json", "1.json"], ["2.json", "3.json"], ["4.json"]]
    assert ingest.run_once().idle


def test_a_restart_resumes_from_the_stored_checkpoint_and_reads_nothing_twice():
    lake = Lake(FakeFeed([ref(0, f"{n}.json") for n in range(4)]))
    lake.ingest(target(max_files=3), start_at=-1).run_once()  # then the process dies

    restarted = lake.ingest(target(max_files=3))
    cycle = restarted.run_once()

    assert [r.start for r in cycle.batches] == [Checkpoint(-1, 3)]
    assert lake.tables["events"].uris == [uri(f"{n}.json") for n in range(4)]


def test_a_batch_whose_commit_fails_is_read_again_from_the_same_checkpoint():
    lake = Lake(FakeFeed([ref(0, "a.json")]))
    ingest = lake.ingest(target(), start_at=-1)
    lake.tables["events"].refuse_next = CommitConflict("another writer committed first")

    first = ingest.run_once()
    second = ingest.run_once()

    assert first.failed == {"events": "CommitConflict: another writer committed first"}
    assert not first.batches
    assert [r.start for r in second.batches] == [Checkpoint(-1, 0)]
    assert lake.read.keys("events") == [["a.json"], ["a.json"]]
    assert lake.tables["events"].uris == [uri("a.json")]


# ------------------------------------------------------------------------------------ targets side by side


def test_a_failed_target_does_not_stop_the_others():
    lake = Lake(FakeFeed([ref(0, "a/1.json"), ref(0, "b/1.json"), ref(0, "c/1.json")]))
    specs = (target("a", prefix="a/"), target("b", prefix="b/"), target("c", prefix="c/"))
    lake.read.broken["b"] = RuntimeError("a Spark job failed")

    cycle = lake.ingest(*specs).run_once()

    assert sorted(r.target for r in cycle.batches) == ["a", "c"]
    assert cycle.failed == {"b": "RuntimeError: a Spark job failed"}
    assert lake.tables["b"].commits == []  # its checkpoint did not move
    assert lake.tables["a"].uris == [uri("a/1.json")] and lake.tables["c"].uris == [uri("c/1.json")]
    assert set(cycle.progress) == {"a", "b", "c"}  # the failed one reports where it stands too
    assert cycle.progress["b"].lag_versions == 1


def test_a_transient_failure_is_one_warning_line_and_a_bug_keeps_its_traceback(caplog):
    lake = Lake(FakeFeed([ref(0, "a/1.json"), ref(0, "b/1.json")]))
    lake.read.broken = {"a": CommitConflict("throttled"), "b": KeyError("bug")}

    with caplog.at_level(logging.INFO, logger="s3events.ingest.cycle"):
        cycle = lake.ingest(target("a", prefix="a/"), target("b", prefix="b/")).run_once()

    assert set(cycle.failed) == {"a", "b"}
    [transient] = [r for r in caplog.records if "target a: batch failed" in r.getMessage()]
    assert transient.levelno == logging.WARNING and transient.exc_info is None
    [bug] = [r for r in caplog.records if "target b: batch failed" in r.getMessage()]
    assert bug.levelno == logging.ERROR and bug.exc_info is not None


def test_a_fatal_error_stops_the_cycle():
    lake = Lake(FakeFeed([ref(0, "a/1.json"), ref(0, "b/1.json")]))
    lake.read.broken["a"] = FatalError("access denied")

    with pytest.raises(FatalError):
        lake.ingest(target("a", prefix="a/"), target("b", prefix="b/")).run_once()

    assert lake.tables["b"].commits == []


def test_a_configuration_mistake_a_first_batch_shows_stops_the_cycle():
    lake = Lake(FakeFeed([ref(0, "a/1.json"), ref(0, "b/1.json")]))
    lake.read.broken["a"] = ConfigError("s3events.ingest.target.a.transform.sql", "no column `amount`")

    with pytest.raises(ConfigError, match=r"transform\.sql"):
        lake.ingest(target("a", prefix="a/"), target("b", prefix="b/")).run_once()

    assert lake.tables["a"].commits == lake.tables["b"].commits == []


def test_one_read_of_the_change_feed_serves_every_target_from_the_furthest_behind():
    lake = Lake(FakeFeed([ref(0, "a/0.json"), ref(0, "b/0.json")]))
    lake.ingest(target("a", prefix="a/"), target("b", prefix="b/"), start_at=-1).run_once()
    lake.feed.commit(ref(0, "b/1.json"))
    lake.feed.commit(ref(0, "a/2.json"))
    lake.ingest(target("a", prefix="a/")).run_once()  # a is at version 2; b at version 0
    lake.feed.reads.clear()

    cycle = lake.ingest(target("a", prefix="a/"), target("b", prefix="b/")).run_once()

    assert lake.feed.reads == [(0, 2)]
    assert [r.target for r in cycle.batches] == ["b"]
    assert lake.tables["b"].uris == [uri("b/0.json"), uri("b/1.json")]


def test_another_process_moving_the_checkpoint_abandons_the_batch():
    lake = Lake(FakeFeed([ref(0, "a.json")]))
    ingest = lake.ingest(target())
    ingest.run_once()
    lake.feed.commit(ref(0, "b.json"))
    lake.tables["events"].moved_by_another = Checkpoint(1, 0)  # it ingested b.json meanwhile

    cycle = ingest.run_once()

    assert "CheckpointError" in cycle.failed["events"]
    assert lake.tables["events"].uris == [uri("a.json")]  # b.json only by the other process (not faked)


# ------------------------------------------------------------------------------------ 2. what the read says


def test_a_missing_object_is_skipped_and_reported_by_default():
    lake = Lake(FakeFeed([ref(0, "gone.json"), ref(0, "here.json")]))
    lake.read.missing = {uri("gone.json")}

    [report] = lake.ingest(target()).run_once().batches

    assert report.skipped == {uri("gone.json"): "NoSuchKey: the object is gone"}
    assert lake.tables["events"].uris == [uri("here.json")]
    assert lake.tables["events"].commits[-1].end == Checkpoint(0, 0)  # it is not read again


def test_a_missing_object_fails_the_target_without_a_commit_with_on_missing_object_fail():
    lake = Lake(FakeFeed([ref(0, "gone.json"), ref(0, "here.json")]))
    lake.read.missing = {uri("gone.json")}

    cycle = lake.ingest(target(on_missing_object="fail")).run_once()

    assert "on.missing.object=fail" in cycle.failed["events"]
    assert lake.tables["events"].commits == []


def test_error_rows_are_recorded_before_the_data_commit_with_the_same_checkpoint():
    lake = Lake(FakeFeed([ref(0, "a.json"), ref(0, "b.json")]))
    lake.read.bad_lines = {uri("b.json"): 3}

    [report] = lake.ingest(target()).run_once().batches

    assert report.errors == 3
    assert lake.errors["events"].error_batches == [(3, Checkpoint(0, 0))]
    assert lake.tables["events"].commits[-1].end == Checkpoint(0, 0)


def test_each_batch_commit_carries_the_summary_its_notification_announces():
    lake = Lake(FakeFeed([ref(0, "a.json"), ref(0, "b.json")]))
    lake.read.bad_lines = {uri("b.json"): 2}
    ingest = lake.ingest(target(max_files=1))

    ingest.run_once()
    ingest.run_once()

    first, second = lake.tables["events"].commits
    assert first.summary == BatchSummary(files=1, rows=1, error_rows=0, schema_changed=True)  # new table
    assert second.summary == BatchSummary(files=1, rows=1, error_rows=2, schema_changed=False)


def test_a_merge_target_commits_its_rows_with_the_checkpoint():
    lake = Lake(FakeFeed([ref(0, "a.json"), ref(1, "b.json")]))

    lake.ingest(target(mode="merge", record_key=("id",))).run_once()

    [commit] = lake.tables["events"].commits
    assert commit.kind == "merge"
    assert (commit.uris, commit.end) == ([uri("a.json"), uri("b.json")], Checkpoint(1, 0))


# ------------------------------------------------------------------------------------ removals and re-uploads


def test_a_mirroring_target_deletes_the_rows_of_removed_objects_and_reads_only_the_latest_upload():
    lake = Lake(FakeFeed([ref(0, "a.json"), ref(0, "b.json")]))
    mirror = target(on_object_removed="delete")
    ingest = lake.ingest(mirror)
    ingest.run_once()
    lake.feed.commit(ref(0, "a.json", kind="removed", minutes=1))
    lake.feed.commit(ref(0, "b.json", etag="e2", minutes=2, recreated=True))

    [report] = ingest.run_once().batches

    table = lake.tables["events"]
    assert {d.uri for d in table.deleted} == {uri("a.json"), uri("b.json")}
    assert report.deleted == 2
    assert lake.read.keys("events")[-1] == ["b.json"]
    assert table.rows == [(uri("b.json"), "e2")]
    assert table.commits[-1].end == Checkpoint(2, 0)


def test_a_batch_of_removals_only_moves_the_checkpoint_in_a_commit_of_its_own():
    lake = Lake(FakeFeed([ref(0, "a.json")]))
    ingest = lake.ingest(target(on_object_removed="delete"))
    ingest.run_once()
    reads = len(lake.read.batches)
    lake.feed.commit(ref(0, "a.json", kind="removed", minutes=1))

    [report] = ingest.run_once().batches

    assert len(lake.read.batches) == reads  # nothing to read: no Spark job
    assert (report.files, report.deleted) == (0, 1)
    # The deletion is announced: the checkpoint's commit carries the batch's summary.
    summary = BatchSummary(0, 0, 0, rows_deleted=1)
    assert lake.tables["events"].commits[-1] == Commit("checkpoint", [], Checkpoint(1, 0), summary)


def test_an_appending_target_skips_re_uploaded_content_it_already_holds():
    lake = Lake(FakeFeed([ref(0, "a.json")]))
    ingest = lake.ingest(target())
    ingest.run_once()
    lake.feed.commit(ref(0, "a.json", minutes=1, recreated=True), ref(0, "c.json"))  # same etag: same bytes

    ingest.run_once()

    assert lake.read.keys("events")[-1] == ["c.json"]
    assert lake.tables["events"].uris == [uri("a.json"), uri("c.json")]


# ------------------------------------------------------------------------------------ where a target starts


def test_strategy_earliest_bootstraps_a_new_target_from_the_snapshot_then_follows_the_feed():
    lake = Lake(FakeFeed([ref(0, "a.json"), ref(1, "b.json")]))
    ingest = lake.ingest(target(), strategy="earliest")

    [report] = ingest.run_once().batches
    lake.feed.commit(ref(0, "c.json"))
    [after] = ingest.run_once().batches

    assert report.start == Checkpoint.bootstrap(1) and report.files == 2
    assert report.end == Checkpoint(1, 0)  # the snapshot's last routed row: handed over to the feed
    assert (after.start, after.end, after.files) == (Checkpoint(1, 0), Checkpoint(2, 0), 1)
    assert lake.feed.reads == [(1, 1), (1, 2)]  # the change feed after the snapshot only


def test_strategy_latest_records_its_origin_and_a_restart_starts_there_too():
    lake = Lake(FakeFeed([ref(0, "old.json")]))
    assert lake.ingest(target(), strategy="latest").run_once().idle
    assert lake.errors["events"].recorded_origin == Checkpoint(0, 0)
    lake.feed.commit(ref(0, "new.json"))

    cycle = lake.ingest(target(), strategy="latest").run_once()  # restarted before any batch

    assert [r.start for r in cycle.batches] == [Checkpoint(0, 0)]
    assert lake.tables["events"].uris == [uri("new.json")]


def test_start_at_skips_earlier_versions():
    lake = Lake(FakeFeed([ref(0, "a.json"), ref(1, "b.json"), ref(2, "c.json")]))

    lake.ingest(target(), start_at=1).run_once()

    assert lake.tables["events"].uris == [uri("c.json")]


def test_start_at_never_moves_a_target_backwards():
    lake = Lake(FakeFeed([ref(0, "a.json"), ref(1, "b.json")]))
    lake.ingest(target()).run_once()

    with pytest.raises(CheckpointError, match="target events"):
        lake.ingest(target(), start_at=0)


def test_once_ingests_only_what_the_metadata_table_held_at_start():
    lake = Lake(FakeFeed([ref(0, "a.json")]))
    ingest = lake.ingest(target())
    ingest.freeze_at_latest()
    lake.feed.commit(ref(0, "later.json"))  # arrives while --once runs

    ingest.run_once()

    assert lake.tables["events"].uris == [uri("a.json")]
    assert ingest.run_once().idle


# ------------------------------------------------------------------------------------ quiet targets, progress


def test_a_quiet_target_records_its_position_every_progress_every_versions():
    lake = Lake(FakeFeed([ref(0, "mine/a.json")]))
    ingest = lake.ingest(target(prefix="mine/"), progress_every=3)
    ingest.run_once()
    for n in range(2):
        lake.feed.commit(ref(0, f"other/{n}.json"))
    ingest.run_once()
    assert len(lake.tables["events"].commits) == 1  # 2 versions past: kept in memory only

    lake.feed.commit(ref(0, "other/2.json"))
    assert ingest.run_once().idle

    assert lake.tables["events"].commits[-1] == Commit("checkpoint", [], Checkpoint(3, 0))
    assert lake.read.keys("events") == [["mine/a.json"]]


def test_a_quiet_target_without_a_checkpoint_records_its_origin_instead():
    lake = Lake(FakeFeed([ref(n, f"other/{n}.json") for n in range(3)]))

    assert lake.ingest(target(prefix="mine/"), progress_every=2).run_once().idle

    assert lake.tables["events"].commits == []  # no table to commit to
    assert lake.errors["events"].recorded_origin == Checkpoint(2, 0)


def test_progress_says_how_far_behind_a_target_is_by_the_injected_clock():
    lake = Lake(FakeFeed([ref(0, f"{n}.json", minutes=n) for n in range(3)]))
    now = T0 + timedelta(minutes=10)
    ingest = lake.ingest(target(max_files=1), clock=lambda: now)

    first = ingest.run_once().progress["events"]
    lake.feed.commit(ref(0, "late.json"))
    ingest.run_once()
    ingest.run_once()
    caught_up = [ingest.run_once().progress["events"] for _ in range(2)][-1]

    assert first.checkpoint_version == -1
    assert first.lag_seconds == pytest.approx(600.0)  # the oldest change not ingested when planned: T0
    assert (caught_up.checkpoint_version, caught_up.lag_versions, caught_up.lag_seconds) == (1, 0, 0.0)


def test_a_batch_reports_its_duration_by_the_injected_timer():
    lake = Lake(FakeFeed([ref(0, "a.json"), ref(1, "b.json")]))
    ticks = iter([100.0, 102.5])  # the batch's start and end, as the injected timer reads them

    [report] = lake.ingest(target(), start_at=-1, timer=lambda: next(ticks)).run_once().batches

    assert report.seconds == 2.5
