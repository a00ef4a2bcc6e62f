"""What a maintenance pass keeps for lagging readers, and when a pass is due (pure rules)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from s3events.maintenance.model import Keep, due, keep_since, log_retention_days, vacuum_retention_hours

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def test_the_oldest_unread_commit_of_any_target_is_kept():
    keep = keep_since(
        {
            "fresh": (None, "target fresh"),
            "slow": (NOW - timedelta(days=9), "target slow"),
            "slower": (NOW - timedelta(days=40), "target slower"),
        }
    )
    assert keep == Keep(NOW - timedelta(days=40), "target slower")


def test_caught_up_targets_need_nothing_kept():
    assert keep_since({"a": (None, "target a")}) is None and keep_since({}) is None


def test_retention_is_the_configured_one_unless_a_reader_needs_more():
    assert vacuum_retention_hours(168, now=NOW, keep=None) == 168
    assert vacuum_retention_hours(168, now=NOW, keep=Keep(NOW - timedelta(hours=5), "t")) == 168
    assert vacuum_retention_hours(168, now=NOW, keep=Keep(NOW - timedelta(days=10), "t")) == 241
    assert log_retention_days(30, now=NOW, keep=None) == 30
    assert log_retention_days(30, now=NOW, keep=Keep(NOW - timedelta(days=45, hours=1), "t")) == 47


def test_a_pass_is_due_once_an_interval_has_passed_since_the_last():
    assert due(None, now=100.0, interval_seconds=60)
    assert not due(50.0, now=100.0, interval_seconds=60)
    assert due(40.0, now=100.0, interval_seconds=60)
