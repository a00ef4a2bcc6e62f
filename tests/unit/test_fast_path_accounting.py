"""A fast-path job whose results miss a task's files commits nothing: the batch is retried."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from s3events.errors import TransientError
from s3events.infra.aws import AwsOptions
from s3events.infra.parquet_files import WrittenFile, to_row, write_data_file
from s3events.ingest.files.fast_path import ensure_accounted
from tests.unit.conftest import file_ref

LOCAL = AwsOptions(region="us-east-1")


def _written(table_uri: Path, n: int) -> list[WrittenFile]:
    table = pa.table({"id": [n]})
    written = write_data_file([table], table_uri=str(table_uri), schema=table.schema, options=LOCAL)
    assert written is not None
    return [written]


def test_results_missing_a_tasks_files_remove_what_was_written_and_retry_the_batch(tmp_path: Path) -> None:
    files = tuple(file_ref(f"in/{i}.json") for i in range(3))
    written = _written(tmp_path, 1) + _written(tmp_path, 2)
    # Two tasks ran (2 files and 1 file); the second one's result row is lost.
    rows = [{**to_row(written[0]), "files": 2}, {**to_row(written[1]), "files": None}]

    with pytest.raises(TransientError, match="cover 2 of 3 files"):
        ensure_accounted(rows, files, written, target="t", table_uri=str(tmp_path), aws=LOCAL)

    assert list(tmp_path.glob("*.parquet")) == []


def test_results_of_every_task_keep_the_written_files(tmp_path: Path) -> None:
    files = tuple(file_ref(f"in/{i}.json") for i in range(3))
    written = _written(tmp_path, 1)
    rows = [{**to_row(written[0]), "files": None}, {"files": 2}, {"files": 1}]

    ensure_accounted(rows, files, written, target="t", table_uri=str(tmp_path), aws=LOCAL)

    assert len(list(tmp_path.glob("*.parquet"))) == 1
