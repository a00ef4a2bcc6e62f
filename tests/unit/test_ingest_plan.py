"""Planning ingest batches, purely: routing, limits, checkpoints, and exactly-once across restarts."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from s3events.errors import CheckpointError, S3EventsError
from s3events.ingest.model import Batch, Checkpoint, EventKind, FileRef, Limits
from s3events.ingest.plan import Route, append_step, caught_up_to, ensure_forward, mirror_step, plan

T0 = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)
ANY = Route()


def ref(
    key: str,
    version: int,
    event_id: str | None = None,
    *,
    size: int | None = 1,
    kind: EventKind = "created",
    bucket: str = "b",
    recreated: bool = False,
    at: datetime = T0,
    etag: str = "e",
) -> FileRef:
    return FileRef(
        bucket=bucket,
        key=key,
        etag=etag,
        version_id=None,
        size=size,
        event_time=at,
        event_id=event_id or f"{version}-{key}",
        event_kind=kind,
        commit_version=version,
        recreated=recreated,
    )


def in_plan_order(entries: Sequence[FileRef]) -> list[FileRef]:
    return sorted(entries, key=lambda e: (e.commit_version, e.event_id))


def entries_of(batch: Batch) -> list[FileRef]:
    return in_plan_order([*batch.files, *batch.removals])


def done_by(checkpoint: Checkpoint, routed: Sequence[FileRef]) -> list[FileRef]:
    """What a checkpoint says is ingested, straight from its definition in model.py."""
    older = [e for e in routed if e.commit_version <= checkpoint.version]
    following = [e for e in routed if e.commit_version == checkpoint.version + 1]
    return older + following[: checkpoint.position]


def drain(
    start: Checkpoint,
    changes: Sequence[FileRef],
    limits: Limits,
    *,
    route: Route = ANY,
    mirror: bool = False,
    latest_version: int | None = None,
) -> list[Batch]:
    """Plan and commit batches until none is left."""
    batches: list[Batch] = []
    while True:
        batch = plan(
            start,
            changes,
            route=route,
            limits=limits,
            mirror=mirror,
            latest_version=latest_version,
        )
        if batch is None:
            return batches
        assert batch.start == start < batch.end
        batches.append(batch)
        start = batch.end


# ------------------------------------------------------------------------------------ the core scenario


def test_one_version_of_500_files_split_by_37_resumes_exactly():
    rng = random.Random(7)
    changes = [ref(f"in/file-{i:03}.json", 1, event_id=f"{rng.getrandbits(64):016x}") for i in range(500)]
    expected = in_plan_order(changes)
    limits = Limits(max_files=37)

    ingested: list[FileRef] = []
    committed = Checkpoint()
    for batch_number in range(100):
        rng.shuffle(changes)  # every run re-reads the change feed, in whatever order it comes
        batch = plan(committed, changes, route=ANY, limits=limits, latest_version=1)
        if batch is None:
            break
        assert batch.start == committed and batch.end > committed
        if batch_number in (3, 7):
            continue  # killed after planning (and maybe reading), before the commit: the batch is lost
        assert len(batch.files) == min(37, 500 - len(ingested))
        ingested.extend(batch.files)  # commit the data and batch.end together
        committed = batch.end
        assert done_by(committed, expected) == ingested

    assert ingested == expected
    assert committed == Checkpoint(1, 0)
    assert caught_up_to(committed, changes, route=ANY, latest_version=1) == Checkpoint(1, 0)


def test_batch_inside_a_version_ends_before_it_with_the_count_taken_so_far():
    changes = [ref(f"k{i}", 5) for i in range(10)]
    first = plan(Checkpoint(4, 0), changes, route=ANY, limits=Limits(max_files=4))
    assert first is not None and first.end == Checkpoint(4, 4)
    second = plan(first.end, changes, route=ANY, limits=Limits(max_files=4))
    assert second is not None and second.end == Checkpoint(4, 8)  # counts the 4 skipped by the start
    assert [f.key for f in second.files] == ["k4", "k5", "k6", "k7"]
    third = plan(second.end, changes, route=ANY, limits=Limits(max_files=4))
    assert third is not None and third.end == Checkpoint(5, 0)
    assert [f.key for f in third.files] == ["k8", "k9"]


def test_plan_order_is_by_version_then_event_id_whatever_the_read_order():
    changes = [ref("c", 2, "a"), ref("b", 1, "z"), ref("a", 2, "0"), ref("d", 1, "m")]
    batch = plan(Checkpoint(), changes, route=ANY, limits=Limits())
    assert batch is not None
    assert [f.key for f in batch.files] == ["d", "b", "a", "c"]
    assert plan(Checkpoint(), changes[::-1], route=ANY, limits=Limits()) == batch


def test_rows_of_versions_already_done_are_ignored():
    changes = [ref("old", 3), ref("older", 1), ref("new", 4)]
    batch = plan(Checkpoint(3, 0), changes, route=ANY, limits=Limits())
    assert batch is not None and [f.key for f in batch.files] == ["new"]


def test_nothing_routed_plans_no_batch():
    assert plan(Checkpoint(), [], route=ANY, limits=Limits()) is None
    changes = [ref("out/a", 1), ref("in/gone", 2, kind="removed")]
    assert plan(Checkpoint(), changes, route=Route(key_prefix="in/"), limits=Limits()) is None
    done = [ref("a", 1), ref("b", 1)]
    assert plan(Checkpoint(0, 2), done, route=ANY, limits=Limits()) is None


# ------------------------------------------------------------------------------------------ byte limit


def test_a_file_larger_than_max_bytes_is_taken_alone():
    changes = [ref("small", 1, "1", size=10), ref("huge", 1, "2", size=500), ref("tail", 1, "3", size=5)]
    batches = drain(Checkpoint(), changes, Limits(max_bytes=100))
    assert [[f.key for f in b.files] for b in batches] == [["small"], ["huge"], ["tail"]]
    assert batches[1].total_bytes == 500


def test_files_are_taken_while_their_sizes_fit_max_bytes():
    changes = [ref(f"k{i}", 1, f"{i}", size=30) for i in range(7)]
    batches = drain(Checkpoint(), changes, Limits(max_bytes=100))
    assert [len(b.files) for b in batches] == [3, 3, 1]
    assert all(b.total_bytes <= 100 for b in batches)


def test_files_that_fill_max_bytes_exactly_share_a_batch():
    changes = [ref("a", 1, "1", size=50), ref("b", 1, "2", size=50), ref("c", 1, "3", size=1)]
    assert [len(b.files) for b in drain(Checkpoint(), changes, Limits(max_bytes=100))] == [2, 1]


def test_unknown_sizes_count_zero():
    changes = [ref(f"k{i}", 1, f"{i}", size=None) for i in range(5)]
    batch = plan(Checkpoint(), changes, route=ANY, limits=Limits(max_files=10, max_bytes=1))
    assert batch is not None and len(batch.files) == 5 and batch.total_bytes == 0


def test_removals_count_toward_max_files_but_not_bytes():
    changes = [
        ref("a", 1, "1", size=60),
        ref("a", 1, "2", size=999, kind="removed"),
        ref("b", 1, "3", size=40),
        ref("c", 1, "4", size=1),
    ]
    batch = plan(Checkpoint(), changes, route=ANY, limits=Limits(max_bytes=100), mirror=True)
    assert batch is not None
    assert [f.key for f in batch.files] == ["a", "b"] and [r.event_id for r in batch.removals] == ["2"]
    assert batch.end == Checkpoint(0, 3)
    by_count = plan(Checkpoint(), changes, route=ANY, limits=Limits(max_files=2), mirror=True)
    assert by_count is not None and len(by_count.files) == 1 and len(by_count.removals) == 1


def test_removals_are_not_routed_unless_included():
    changes = [ref("a", 1, "1"), ref("a", 1, "2", kind="removed"), ref("b", 1, "3")]
    batch = plan(Checkpoint(), changes, route=ANY, limits=Limits())
    assert batch is not None and batch.removals == () and len(batch.files) == 2
    assert batch.end == Checkpoint(1, 0)
    # Positions count only routed entries, so the same checkpoint means something else with removals
    # included: the option is fixed per target.
    inside = plan(Checkpoint(), changes, route=ANY, limits=Limits(max_files=2), mirror=True)
    assert inside is not None and inside.end == Checkpoint(0, 2) and len(inside.removals) == 1


def test_recreations_are_planned_for_every_target():
    changes = [ref("a", 1, "1"), ref("a", 2, "1", recreated=True)]
    appending = drain(Checkpoint(), changes, Limits())
    assert [f.commit_version for b in appending for f in b.files] == [1, 2]  # ingest checks the target
    mirroring = drain(Checkpoint(), changes, Limits(), mirror=True)
    assert [f.commit_version for b in mirroring for f in b.files] == [1, 2]


def test_append_reads_a_recreated_content_once_unless_the_target_holds_it():
    first, again = ref("a", 1, "1"), ref("a", 2, "1", recreated=True)
    batch = plan(Checkpoint(), [first, again], route=ANY, limits=Limits())
    assert batch is not None
    assert append_step(batch, held=set()) == (first,)  # the same content twice in one batch: once
    later = plan(Checkpoint(1, 0), [again], route=ANY, limits=Limits())
    assert later is not None
    assert append_step(later, held={(first.uri, first.etag)}) == ()  # in the target already
    assert append_step(later, held=set()) == (again,)  # its first read failed: read it now


T1, T2, T3 = (T0.replace(minute=m) for m in (1, 2, 3))


def mirrored(*entries: FileRef) -> tuple[list[tuple[str, str]], list[tuple[str, datetime]]]:
    batch = plan(Checkpoint(), entries, route=ANY, limits=Limits(), mirror=True)
    assert batch is not None
    read, deletions = mirror_step(batch)
    return [(f.key, f.etag) for f in read], sorted((d.uri.rsplit("/", 1)[1], d.before) for d in deletions)


def test_mirror_removal_deletes_earlier_rows_and_reads_nothing():
    read, deletions = mirrored(ref("a", 1, "1", at=T1), ref("a", 1, "2", kind="removed", at=T2))
    assert read == [] and deletions == [("a", T2)]


def test_mirror_upload_after_a_removal_in_one_batch_is_read_and_replaces_older_rows():
    read, deletions = mirrored(
        ref("a", 1, "1", at=T1), ref("a", 1, "2", kind="removed", at=T2), ref("a", 1, "3", at=T3, etag="f")
    )
    assert read == [("a", "f")] and deletions == [("a", T3)]


def test_mirror_reads_only_the_latest_upload_of_an_object_whatever_the_commit_order():
    read, deletions = mirrored(ref("a", 2, "1", at=T3, etag="new"), ref("a", 3, "2", at=T1, etag="old"))
    assert read == [("a", "new")] and deletions == [("a", T3)]


def test_mirror_removal_reported_late_still_keeps_a_later_upload():
    read, _ = mirrored(ref("a", 1, "1", at=T3, recreated=True), ref("a", 2, "2", kind="removed", at=T2))
    assert read == [("a", "e")]


# ------------------------------------------------------------------------------------------ checkpoints


def test_checkpoints_skip_versions_without_routed_entries():
    route = Route(key_prefix="in/")
    changes = [ref("in/a", 1), ref("out/x", 2), ref("out/y", 3), ref("in/b", 4), ref("out/z", 5)]
    batches = drain(Checkpoint(), changes, Limits(max_files=1), route=route, latest_version=6)
    assert [b.end for b in batches] == [Checkpoint(3, 0), Checkpoint(6, 0)]
    all_at_once = plan(Checkpoint(), changes, route=route, limits=Limits(), latest_version=6)
    assert all_at_once is not None and all_at_once.end == Checkpoint(6, 0)
    without_latest = plan(Checkpoint(), changes, route=route, limits=Limits())
    assert without_latest is not None and without_latest.end == Checkpoint(5, 0)


def test_caught_up_moves_past_versions_with_nothing_routed():
    route = Route(key_prefix="in/")
    unrouted = [ref("out/x", 2), ref("out/y", 3), ref("in/gone", 3, kind="removed")]
    assert caught_up_to(Checkpoint(1, 0), unrouted, route=route, latest_version=7) == Checkpoint(7, 0)
    assert caught_up_to(Checkpoint(1, 0), unrouted, route=route) == Checkpoint(3, 0)
    assert caught_up_to(Checkpoint(1, 0), [], route=route, latest_version=1) == Checkpoint(1, 0)
    assert caught_up_to(Checkpoint(4, 2), [], route=route, latest_version=4) == Checkpoint(4, 2)


def test_caught_up_stops_before_the_first_entry_still_to_ingest():
    route = Route(key_prefix="in/")
    changes = [ref("out/x", 2), ref("in/a", 5), ref("in/b", 5), ref("in/c", 6)]
    assert caught_up_to(Checkpoint(1, 0), changes, route=route, latest_version=9) == Checkpoint(4, 0)
    assert caught_up_to(Checkpoint(4, 1), changes, route=route, latest_version=9) == Checkpoint(4, 1)
    assert caught_up_to(Checkpoint(4, 2), changes, route=route, latest_version=9) == Checkpoint(5, 0)


def test_ensure_forward_refuses_a_backwards_move():
    with pytest.raises(CheckpointError) as raised:
        ensure_forward(Checkpoint(12, 3), Checkpoint(10, 0))
    assert str(raised.value) == (
        "checkpoint would move backwards from version 12 position 3 to version 10 position 0; refusing"
    )
    assert isinstance(raised.value, S3EventsError)
    with pytest.raises(CheckpointError):
        ensure_forward(Checkpoint(12, 3), Checkpoint(12, 2))


@pytest.mark.parametrize("proposed", [Checkpoint(12, 3), Checkpoint(12, 4), Checkpoint(13, 0)])
def test_ensure_forward_accepts_an_equal_or_forward_move(proposed: Checkpoint):
    ensure_forward(Checkpoint(12, 3), proposed)


# ---------------------------------------------------------------------------------------------- routing


def test_route_by_bucket_and_key_prefix():
    route = Route(bucket="landing", key_prefix="events/")
    assert route.matches("landing", "events/2026/a.json")
    assert not route.matches("other", "events/2026/a.json")
    assert not route.matches("landing", "logs/events/a.json")
    assert not route.matches("landing", "Events/a.json")
    assert Route().matches("any", "")


def test_route_ignores_prefixes_and_substrings():
    route = Route(key_prefix="in/", ignore_prefixes=("in/tmp/", "in/_"), ignore_substrings=("/.spark", "~"))
    assert route.matches("b", "in/2026/a.json")
    assert not route.matches("b", "in/tmp/a.json")
    assert not route.matches("b", "in/_SUCCESS")
    assert not route.matches("b", "in/x/.spark-staging/a.json")
    assert not route.matches("b", "in/a.json~")


@pytest.mark.parametrize(
    ("glob", "key", "expected"),
    [
        ("*.json", "a.json", True),
        ("*.json", "dir/a.json", False),  # '*' stops at '/'
        ("*.json", "a.json.gz", False),  # the whole key must match
        ("**.json", "dir/sub/a.json", True),  # '**' crosses '/'
        ("**/*.json", "a.json", True),  # '**/' may match no directory at all
        ("**/*.json", "x/y/a.json", True),
        ("logs/**", "logs/2026/01/a.gz", True),
        ("logs/**/*.gz", "logs/a.gz", True),
        ("logs/**/*.gz", "logs/x/y/a.gz", True),
        ("logs/**/*.gz", "other/logs/a.gz", False),
        ("data/*/part-?.csv", "data/2026/part-1.csv", True),
        ("data/*/part-?.csv", "data/2026/x/part-1.csv", False),
        ("data/*/part-?.csv", "data/2026/part-10.csv", False),
        ("a?c", "a/c", False),  # '?' never matches '/'
        ("a.b", "axb", False),  # '.' is literal
        ("a+b (1).*", "a+b (1).json", True),
        ("a+b (1).*", "aab (1).json", False),
        ("$^{2}|x\\y.json", "$^{2}|x\\y.json", True),  # regex metacharacters and '\' are literal
        ("my file%20*", "my file%20copy.csv", True),
        ("my file%20*", "my file copy.csv", False),  # keys are decoded: '%20' is three characters
        ("données/été/*.csv", "données/été/relevé.csv", True),
        ("日本/*.txt", "日本/東京.txt", True),
        ("*", "line\nbreak", True),
        ("[abc].txt", "b.txt", True),
        ("[abc].txt", "d.txt", False),
        ("[a-c]?.txt", "c9.txt", True),
        ("[!a].txt", "b.txt", True),
        ("[!a].txt", "a.txt", False),
        ("x[!a]y", "x/y", False),  # a negated class never matches '/'
        ("[]]", "]", True),
        ("[!]]", "x", True),
        ("[*]", "*", True),
        ("[*]", "a", False),
        ("[z-a]", "m", False),  # an empty range matches nothing
        ("[abc", "[abc", True),  # an unclosed '[' is literal
        ("[^a]", "^", True),  # only '!' negates, as in fnmatch
    ],
)
def test_route_glob(glob: str, key: str, expected: bool):
    assert Route(glob=glob).matches("b", key) is expected


def test_route_applies_every_rule_together():
    route = Route(bucket="b", key_prefix="in/", ignore_substrings=("skip",), glob="in/*/*.json")
    assert route.matches("b", "in/2026/a.json")
    assert not route.matches("b", "in/2026/skip.json")
    assert not route.matches("b", "in/a.json")
    assert not route.matches("c", "in/2026/a.json")


# ---------------------------------------------------------------------------------- property: any story


@dataclass(frozen=True)
class Story:
    changes: tuple[FileRef, ...]
    latest: int
    limits: Limits
    mirror: bool


PROPERTY_ROUTE = Route(bucket="b1", key_prefix="in/", ignore_substrings=("skip",))
KEYS = ["in/a.json", "in/b/c.json", "in/skip/d.json", "out/e.json", "in/f g+h%.json"]


@st.composite
def stories(draw: st.DrawFn) -> Story:
    latest = draw(st.integers(0, 8))
    changes: list[FileRef] = []
    rnd = draw(st.randoms(use_true_random=False))
    for version in range(latest + 1):
        for _ in range(draw(st.integers(0, 12))):
            changes.append(
                ref(
                    draw(st.sampled_from(KEYS)),
                    version,
                    f"{rnd.getrandbits(16):04x}-{len(changes)}",  # unique, in no particular order
                    size=draw(st.none() | st.integers(0, 120)),
                    kind=draw(st.sampled_from(["created", "created", "removed"])),
                    bucket=draw(st.sampled_from(["b1", "b1", "b1", "b2"])),
                    recreated=draw(st.sampled_from([False, False, True])),
                )
            )
    limits = Limits(max_files=draw(st.integers(1, 50)), max_bytes=draw(st.integers(1, 400)))
    return Story(tuple(changes), latest, limits, draw(st.booleans()))


@settings(max_examples=200, deadline=None)
@given(story=stories(), data=st.data())
def test_any_story_of_restarts_ingests_every_routed_entry_exactly_once(story: Story, data: st.DataObject):
    routed = in_plan_order(
        [
            e
            for e in story.changes
            if (story.mirror or e.event_kind == "created") and PROPERTY_ROUTE.matches(e.bucket, e.key)
        ]
    )

    def plan_from(start: Checkpoint, rows: Sequence[FileRef], up_to: int) -> Batch | None:
        return plan(
            start,
            rows,
            route=PROPERTY_ROUTE,
            limits=story.limits,
            mirror=story.mirror,
            latest_version=up_to,
        )

    committed = Checkpoint()
    history: list[tuple[Batch, int]] = []  # every committed batch and the version it was planned up to
    ingested: list[FileRef] = []
    floor = 0  # the metadata version the next run reads up to at least; the table grows between runs
    kills = 0
    for _ in range(len(routed) + story.latest + 10):  # each run commits a batch, reads further, or is killed
        # A run (re)starts from the committed checkpoint and re-reads the feed in any order, possibly with
        # rows of versions it has already done.
        visible = data.draw(st.integers(floor, story.latest), label="read up to")
        floor = visible
        since = data.draw(st.integers(-1, committed.version), label="re-read from")
        feed = data.draw(st.permutations([e for e in story.changes if since < e.commit_version <= visible]))
        batch = plan_from(committed, feed, visible)
        if batch is None:
            assert done_by(committed, routed) == [e for e in routed if e.commit_version <= visible]
            if visible == story.latest:
                break
            floor = visible + 1
            continue
        taken = entries_of(batch)
        assert batch.start == committed < batch.end
        assert taken == routed[len(ingested) : len(ingested) + len(taken)]  # the next ones, in plan order
        assert list(batch.files) == [e for e in taken if e.event_kind == "created"]
        assert list(batch.removals) == [e for e in taken if e.event_kind == "removed"]
        assert len(taken) == 1 or (
            len(taken) <= story.limits.max_files and batch.total_bytes <= story.limits.max_bytes
        )
        following = routed[len(ingested) + len(taken) :]
        if following and following[0].commit_version <= visible:  # stopped by a limit: the next did not fit
            following_bytes = (following[0].size or 0) if following[0].event_kind == "created" else 0
            grown = batch.total_bytes + following_bytes
            assert len(taken) == story.limits.max_files or grown > story.limits.max_bytes
        if kills < 5 and data.draw(st.booleans(), label="killed before the commit"):
            kills += 1
            continue
        ingested.extend(taken)
        history.append((batch, visible))
        committed = batch.end
        assert done_by(committed, routed) == ingested
    else:
        pytest.fail("ingest made no progress")

    assert ingested == routed
    final = caught_up_to(
        committed,
        story.changes,
        route=PROPERTY_ROUTE,
        mirror=story.mirror,
        latest_version=story.latest,
    )
    assert final == Checkpoint(story.latest, 0)
    if history:
        # Planning again from any committed checkpoint, from rows in another order, gives the same batch.
        before, seen = data.draw(st.sampled_from(history), label="replanned")
        rows = data.draw(st.permutations([e for e in story.changes if e.commit_version <= seen]))
        assert plan_from(before.start, rows, seen) == before
