"""Scratch folders of transformed batches (`_s3events_staging/src-<id>/`) a killed run left are removed when
they are older than the staging directory's leftover age; a live batch's, and staged files, stay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from s3events.infra.aws import AwsOptions
from s3events.infra.parquet_files import STAGING_LEFTOVER_AGE
from s3events.ingest.files.scratch import new_scratch, remove_left

LOCAL = AwsOptions(region="us-east-1")


def _scratch_file(folder: str, name: str) -> Path:
    path = Path(folder, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PAR1")
    return path


def test_a_killed_run_s_scratch_folder_is_removed_once_older_than_the_leftover_age(tmp_path: Path):
    table = str(tmp_path / "orders")
    left = new_scratch(table)
    _scratch_file(left, "part-0.parquet")
    _scratch_file(left, "dt=2026-11-20/part-1.parquet")
    later = datetime.now(UTC) + STAGING_LEFTOVER_AGE + timedelta(minutes=1)

    assert remove_left(table, LOCAL, now=later) == 2

    assert not Path(left).exists()
    assert Path(table, "_s3events_staging").is_dir()


def test_a_live_batch_s_scratch_folder_and_staged_files_stay(tmp_path: Path):
    table = str(tmp_path / "orders")
    live = _scratch_file(new_scratch(table), "part-0.parquet")
    staged = _scratch_file(str(Path(table, "_s3events_staging")), "0f3e.arrow")

    assert remove_left(table, LOCAL, now=datetime.now(UTC) + timedelta(minutes=5)) == 0
    assert remove_left(table, LOCAL, now=datetime.now(UTC) + STAGING_LEFTOVER_AGE * 2) == 1

    assert staged.exists()  # staged files are take_staged's to remove
    assert not live.exists()


def test_a_target_without_a_staging_directory_has_nothing_to_remove(tmp_path: Path):
    assert remove_left(str(tmp_path / "new"), LOCAL) == 0
