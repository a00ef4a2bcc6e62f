"""An idle ingest watches for the metadata table's next commit (`Ingest.wait_for_changes`), on an injected
clock: it returns as soon as the version after the last one a cycle found exists, checking every
`every` seconds, and otherwise pauses out the time it was given."""

from __future__ import annotations

import pytest

from s3events.ingest.cycle import Ingest
from s3events.ingest.feed import ChangeRows as Changes


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


class FakeFeed:
    """A metadata table at `latest`; version `appears_at_check` exists from that check on."""

    path = "/lake/metadata"

    def __init__(self, latest: int | None, *, appears_at_check: int | None = None) -> None:
        self.latest = latest
        self.appears_at_check = appears_at_check
        self.checked: list[int] = []
        self.fail = False

    def latest_version(self) -> int | None:
        return self.latest

    def changes_after(self, version: int, *, up_to: int) -> Changes:
        return Changes([], up_to)

    def has_version(self, version: int) -> bool:
        self.checked.append(version)
        if self.fail:
            raise OSError("the endpoint is down")
        return self.appears_at_check is not None and len(self.checked) >= self.appears_at_check


def watcher(feed: FakeFeed) -> tuple[Ingest, Clock, list[float]]:
    clock = Clock()
    pauses: list[float] = []

    def never_read(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("no batch expected")

    ingest = Ingest(feed, [], read=never_read, timer=clock)  # type: ignore[arg-type]
    ingest.run_once()
    return ingest, clock, pauses


def pausing(clock: Clock, pauses: list[float], *, stop_after: int | None = None):
    def pause(seconds: float) -> bool:
        pauses.append(seconds)
        clock.now += seconds
        return stop_after is not None and len(pauses) >= stop_after

    return pause


def test_returns_as_soon_as_the_next_version_exists():
    feed = FakeFeed(latest=7, appears_at_check=3)
    ingest, clock, pauses = watcher(feed)

    assert ingest.wait_for_changes(1.0, pause=pausing(clock, pauses), every=0.2)

    assert feed.checked == [8, 8, 8]  # the version after the one the cycle found
    assert pauses == [0.2, 0.2]


def test_pauses_out_the_time_when_nothing_is_committed():
    feed = FakeFeed(latest=7)
    ingest, clock, pauses = watcher(feed)

    assert not ingest.wait_for_changes(1.0, pause=pausing(clock, pauses), every=0.3)

    assert sum(pauses) == pytest.approx(1.0)
    assert max(pauses) <= 0.3


def test_a_stop_ends_the_watch_at_once():
    feed = FakeFeed(latest=7)
    ingest, clock, pauses = watcher(feed)

    assert not ingest.wait_for_changes(10.0, pause=pausing(clock, pauses, stop_after=1), every=0.2)

    assert pauses == [0.2]


def test_a_failing_check_pauses_out_the_rest_without_raising():
    feed = FakeFeed(latest=7)
    feed.fail = True
    ingest, clock, pauses = watcher(feed)

    assert not ingest.wait_for_changes(1.0, pause=pausing(clock, pauses), every=0.2)

    assert feed.checked == [8]  # one try; the next cycle meets and reports the problem
    assert pauses == [pytest.approx(1.0)]


def test_without_checks_or_a_table_it_only_pauses():
    for feed, every in ((FakeFeed(latest=7), 0.0), (FakeFeed(latest=None), 0.2)):
        ingest, clock, pauses = watcher(feed)
        assert not ingest.wait_for_changes(1.0, pause=pausing(clock, pauses), every=every)
        assert feed.checked == []
        assert pauses == [1.0]
