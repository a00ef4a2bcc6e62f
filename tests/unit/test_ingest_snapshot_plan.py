"""A new target's bootstrap from the metadata table's snapshot, on fakes: the pure plan of a snapshot
batch (`plan.plan_snapshot`), the checkpoint's snapshot position as app transactions
(`checkpoint.py`), and the cycle reading the snapshot, then the change feed after it (`Ingest`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from s3events.ingest.checkpoint import app_ids, from_transactions, to_transactions
from s3events.ingest.model import Checkpoint, Limits, SnapshotRow
from s3events.ingest.plan import Route, ensure_forward, plan_snapshot, snapshot_read
from s3events.ingest.progress import first_unread
from tests.unit.test_ingest_cycle import FakeFeed, Lake, ref, target, uri

V = 7  # the snapshot's metadata version


def rows(*specs: tuple[int, int, str] | tuple[int, int, str, str]) -> list[SnapshotRow]:
    """Snapshot rows (file, row, key[, kind]) in the snapshot's order."""
    out = []
    for spec in specs:
        file, row, key, *kind = spec
        entry = ref(V, key, kind=kind[0] if kind else "created")
        out.append(SnapshotRow(entry, file, row))
    return out


SNAPSHOT = rows((0, 0, "a/1"), (0, 1, "b/1"), (0, 2, "a/2"), (1, 0, "a/3"), (1, 1, "a/4", "removed"))


# --------------------------------------------------------------------------------------------- the plan


def test_a_snapshot_batch_takes_routed_rows_up_to_the_limits_and_ends_before_the_next_one():
    batch = plan_snapshot(
        Checkpoint.bootstrap(V), SNAPSHOT, route=Route(key_prefix="a/"), limits=Limits(max_files=2)
    )

    assert batch is not None
    assert [f.key for f in batch.files] == ["a/1", "a/2"]
    assert batch.end == Checkpoint(-1, 0, V, 1, 0)  # just before a/3: file 1, row 0


def test_the_batch_taking_the_last_routed_row_hands_the_target_over_to_the_change_feed():
    start = Checkpoint(-1, 0, V, 1, 0)

    batch = plan_snapshot(start, SNAPSHOT, route=Route(key_prefix="a/"), limits=Limits(max_files=5))

    assert batch is not None and [f.key for f in batch.files] == ["a/3"]
    assert batch.end == Checkpoint(V, 0) == snapshot_read(start)
    assert not batch.end.in_snapshot


def test_rows_before_the_position_are_never_taken_again():
    batch = plan_snapshot(
        Checkpoint(-1, 0, V, 0, 2), SNAPSHOT, route=Route(key_prefix="a/"), limits=Limits(max_files=1)
    )

    assert batch is not None and [f.key for f in batch.files] == ["a/2"]
    assert batch.end == Checkpoint(-1, 0, V, 1, 0)


def test_a_mirroring_target_takes_removals_and_an_appending_one_does_not():
    start = Checkpoint(-1, 0, V, 1, 0)
    route = Route(key_prefix="a/")

    mirror = plan_snapshot(start, SNAPSHOT, route=route, limits=Limits(), mirror=True)
    append = plan_snapshot(start, SNAPSHOT, route=route, limits=Limits())

    assert mirror is not None and [r.key for r in mirror.removals] == ["a/4"]
    assert append is not None and append.removals == ()


def test_a_byte_limit_cuts_the_batch_but_its_first_row_is_taken_whatever_its_size():
    big = [SnapshotRow(ref(V, f"k{n}", size=600), 0, n) for n in range(3)]

    batch = plan_snapshot(Checkpoint.bootstrap(V), big, route=Route(), limits=Limits(max_bytes=1000))

    assert batch is not None and len(batch.files) == 1 and batch.end == Checkpoint(-1, 0, V, 0, 1)


def test_nothing_routed_left_is_no_batch():
    assert (
        plan_snapshot(Checkpoint.bootstrap(V), SNAPSHOT, route=Route(key_prefix="z/"), limits=Limits())
        is None
    )


def test_the_plan_reads_the_snapshot_only_as_far_as_one_routed_row_past_its_batch():
    consumed: list[int] = []

    def streamed() -> Iterator[SnapshotRow]:
        for n in range(1_000_000):
            consumed.append(n)
            yield SnapshotRow(ref(V, f"k{n}"), 0, n)

    batch = plan_snapshot(Checkpoint.bootstrap(V), streamed(), route=Route(), limits=Limits(max_files=3))

    assert batch is not None and len(batch.files) == 3 and consumed == [0, 1, 2, 3]


def test_a_checkpoint_outside_a_snapshot_has_no_snapshot_batch():
    with pytest.raises(ValueError):
        plan_snapshot(Checkpoint(3, 0), SNAPSHOT, route=Route(), limits=Limits())


# ------------------------------------------------------------------------------ the checkpoint's record


def test_checkpoints_order_as_a_target_moves_nothing_then_the_snapshot_then_the_feed():
    moves = [
        Checkpoint(),
        Checkpoint.bootstrap(V),
        Checkpoint(-1, 0, V, 0, 5),
        Checkpoint(-1, 0, V, 1, 0),
        Checkpoint(V, 0),
        Checkpoint(V, 3),
        Checkpoint(V + 1, 0),
    ]

    assert moves == sorted(moves)
    with pytest.raises(Exception, match="backwards"):
        ensure_forward(Checkpoint(-1, 0, V, 1, 0), Checkpoint(-1, 0, V, 0, 9))


def test_a_snapshot_position_round_trips_through_app_transactions():
    inside = Checkpoint(-1, 0, V, 3, 41)

    stored = to_transactions("s3events.ingest/t", inside)

    assert stored == {
        "s3events.ingest/t": -1,
        "s3events.ingest/t/position": 0,
        "s3events.ingest/t/snapshot": V,
        "s3events.ingest/t/snapshot/file": 3,
        "s3events.ingest/t/snapshot/row": 41,
    }
    assert set(stored) == set(app_ids("s3events.ingest/t"))
    assert from_transactions("s3events.ingest/t", stored) == inside


def test_the_snapshot_ids_left_behind_count_no_more_once_the_target_is_past_the_snapshot():
    # App transactions are never removed: the hand-over commit writes version and position only.
    stored = {**to_transactions("t", Checkpoint(-1, 0, V, 3, 41)), **to_transactions("t", Checkpoint(V, 2))}

    assert from_transactions("t", stored) == Checkpoint(V, 2)
    assert from_transactions("t", {}) is None


# ------------------------------------------------------------------------------------------- the cycle


def test_a_new_target_reads_the_snapshot_in_bounded_batches_then_the_changes_after_it():
    lake = Lake(FakeFeed([ref(0, f"in/{n}.json") for n in range(3)] + [ref(1, "in/3.json")]))
    ingest = lake.ingest(target(max_files=2, prefix="in/"))

    first, second = (ingest.run_once().batches for _ in range(2))
    lake.feed.commit(ref(0, "in/4.json"))
    third = ingest.run_once().batches

    assert [(r.start, r.end) for r in [*first, *second, *third]] == [
        (Checkpoint.bootstrap(1), Checkpoint(-1, 0, 1, 0, 2)),
        (Checkpoint(-1, 0, 1, 0, 2), Checkpoint(1, 0)),
        (Checkpoint(1, 0), Checkpoint(2, 0)),
    ]
    assert lake.tables["events"].uris == [uri(f"in/{n}.json") for n in range(5)]
    assert lake.feed.reads[-1] == (1, 2)  # the feed is read after the snapshot's version only


def test_a_restart_mid_bootstrap_resumes_at_the_stored_snapshot_position_not_a_new_snapshot():
    lake = Lake(FakeFeed([ref(0, f"in/{n}.json") for n in range(4)]))
    lake.ingest(target(max_files=3)).run_once()  # then the process dies
    lake.feed.commit(ref(0, "in/late.json"))  # the metadata table moves on meanwhile

    restarted = lake.ingest(target(max_files=3))
    batches = [b for _ in range(3) for b in restarted.run_once().batches]

    assert batches[0].start == Checkpoint(-1, 0, 0, 0, 3)
    assert sorted(lake.tables["events"].uris) == sorted(
        [*(uri(f"in/{n}.json") for n in range(4)), uri("in/late.json")]
    )
    assert len(lake.tables["events"].uris) == 5  # each once


def test_a_snapshot_routing_nothing_leaves_the_target_at_its_version_to_follow_the_feed():
    lake = Lake(FakeFeed([ref(0, "other/a.json")]))
    lake.feed.commit(ref(0, "in/after.json"))
    ingest = lake.ingest(target(prefix="in/"))
    ingest.up_to = 0  # a --once run that began at version 0: the snapshot of 0 routes nothing

    assert ingest.run_once().idle
    assert lake.tables["events"].commits == []  # nothing to record: a restart takes a new snapshot
    ingest.up_to = None

    [report] = ingest.run_once().batches

    assert report.start == Checkpoint(0, 0) and lake.tables["events"].uris == [uri("in/after.json")]


def test_a_mirroring_target_bootstraps_to_the_live_objects_only():
    lake = Lake(FakeFeed([ref(0, "a.json", minutes=0), ref(0, "b.json", minutes=0)]))
    lake.feed.commit(ref(0, "a.json", kind="removed", minutes=5))

    lake.ingest(target(on_object_removed="delete")).run_once()

    assert lake.tables["events"].uris == [uri("b.json")]


def test_maintenance_keeps_the_whole_log_for_a_target_inside_a_bootstrap():
    feed = FakeFeed([ref(0, "a.json"), ref(3, "in/b.json")])
    bootstrapping, following = target("boot", prefix="in/"), target("follow", prefix="in/")
    stored = {"boot": Checkpoint(-1, 0, 3, 0, 1), "follow": Checkpoint(0, 0)}

    unread = first_unread([bootstrapping, following], stored, feed, 3)  # type: ignore[arg-type]

    assert unread == {"boot": 0, "follow": 3}  # `follow` needs version 3 on, `boot` everything


def test_a_process_whose_bootstrap_another_overtook_goes_on_from_the_stored_position_not_its_own():
    lake = Lake(FakeFeed([ref(0, f"in/{n}.json") for n in range(3)]))
    first, second = lake.ingest(target(max_files=1)), lake.ingest(target(max_files=1))
    lake.read.broken["events"] = RuntimeError("the executors died")
    first.run_once()  # picks the snapshot of version 0, commits nothing
    lake.feed.commit(ref(0, "in/3.json"))
    second.run_once()  # picks the snapshot of version 1, commits nothing
    del lake.read.broken["events"]

    first.run_once()  # stores a position in the snapshot of version 0
    while not (second.run_once().idle and first.run_once().idle):
        pass

    assert sorted(lake.tables["events"].uris) == [uri(f"in/{n}.json") for n in range(4)]  # each once
