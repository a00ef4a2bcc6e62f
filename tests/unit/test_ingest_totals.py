"""What a run of ingest cycles reports at its end: the exit code of --continuous follows `failed`."""

from __future__ import annotations

from s3events.ingest.cycle import BatchReport, IngestCycle, TargetProgress
from s3events.ingest.model import Checkpoint
from s3events.ingest.service import IngestTotals

CAUGHT_UP = TargetProgress(checkpoint_version=7, lag_versions=0, lag_seconds=0.0)


def batch(target: str, rows: int) -> BatchReport:
    return BatchReport(target, 1, rows, 0, 0, Checkpoint(0, 0), Checkpoint(1, 0), 3, 0.1)


def test_a_target_whose_failed_commit_had_landed_recovers_on_a_cycle_with_nothing_left_to_do():
    totals = IngestTotals()
    totals.add(IngestCycle(failed={"a": "CommitConflict: its answer was lost"}, progress={"a": CAUGHT_UP}))
    assert totals.failed == {"a": "CommitConflict: its answer was lost"}

    totals.add(IngestCycle(progress={"a": CAUGHT_UP}))  # the next cycle: its checkpoint holds it all

    assert totals.failed == {}


def test_a_failure_stays_until_that_target_runs_a_cycle_without_one_and_batches_add_up():
    totals = IngestTotals()
    both = {"a": CAUGHT_UP, "b": CAUGHT_UP}
    totals.add(IngestCycle(batches=[batch("b", 5)], failed={"a": "x"}, progress=both))
    totals.add(IngestCycle(batches=[batch("b", 2)], failed={"a": "y"}, progress=both))

    assert totals.failed == {"a": "y"}
    assert (totals.batches, totals.rows) == (2, 7)
