"""A fail target's refusal note: written beside the table, read back, and counted only while the target's
checkpoint has not moved past the refused batch."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from s3events.ingest import refusal
from s3events.ingest.model import Checkpoint

AT = datetime(2026, 11, 27, 6, 0, tzinfo=UTC)


def test_a_recorded_refusal_reads_back_and_holds_until_the_checkpoint_moves_past_it(tmp_path: Path) -> None:
    table = str(tmp_path / "orders")
    assert refusal.read(table, {}) is None  # never refused

    refusal.record(table, {}, "target orders: in/b.json line 2 has new field(s) extra", Checkpoint(4, 1), AT)

    note = refusal.read(table, {})
    assert note is not None and note.reason.endswith("line 2 has new field(s) extra")
    assert note.start == Checkpoint(4, 1) and note.at == AT.isoformat()
    assert note.holds(Checkpoint(4, 1)) and note.holds(Checkpoint(3, 0))  # still there (or an older one kept)
    assert not note.holds(Checkpoint(5, 0))  # a batch committed after it: stale


def test_a_note_that_cannot_be_written_is_logged_not_raised(tmp_path: Path, caplog) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    refusal.record(str(blocker / "orders"), {}, "why", Checkpoint(1, 0), AT)
    assert "cannot record the refusal" in caplog.text
