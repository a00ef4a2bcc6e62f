"""The freshness benchmark's backlog and batch sizes, computed after a run from PUT and visible times."""

from __future__ import annotations

from benchmarks.harness.backlog import backlog_series, batch_sizes


def test_backlog_counts_objects_put_and_not_yet_visible_at_each_instant() -> None:
    put = {"a": 100.0, "b": 101.0, "c": 102.5}
    visible = {"a": 101.5, "b": 103.0, "c": 103.0}
    series = backlog_series(put, visible, start=100.0, end=103.0, every=1.0)
    assert series == [(0.0, 1), (1.0, 2), (2.0, 1), (3.0, 0)]


def test_an_object_never_visible_stays_in_the_backlog_and_the_series_ends_at_end() -> None:
    series = backlog_series({"a": 10.0, "b": 10.0}, {"a": 11.0}, start=10.0, end=12.5, every=1.0)
    assert series == [(0.0, 2), (1.0, 1), (2.0, 1), (2.5, 1)]


def test_batch_sizes_are_objects_per_commit_in_version_order() -> None:
    assert batch_sizes([7, 3, 7, 7, 5, 3]) == [2, 1, 3]
    assert batch_sizes([]) == []
