"""schema.evolution once a target's table exists: `fail` commits nothing, names the file, line and field,
fails only that target and resumes at the same checkpoint; `ignore` drops new fields on either path."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from s3events.ingest.service import build_ingest
from tests.conftest import read_table
from tests.integration.test_ingest import capture, jsonl, settings_for, target_conf

pytestmark = pytest.mark.integration


def _put(s3: Any, stack: Any, key: str, rows: list[dict[str, Any]]) -> None:
    s3.put_object(Bucket=stack.bucket, Key=key, Body=jsonl(rows))
    capture(stack)


def test_fail_mode_commits_nothing_names_the_line_and_field_and_resumes_once_the_mode_changes(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path
):
    stack = make_stack()
    strict, other = str(tmp_path / "strict"), str(tmp_path / "other")
    targets = {
        "strict": target_conf("strict", strict, "json", key__prefix="in/", schema__evolution="fail"),
        "other": target_conf("other", other, "json", key__prefix="in/"),
    }
    _put(s3, stack, "in/a.json", [{"id": 1, "v": "a"}])  # the first batch defines the table
    assert not build_ingest(settings_for(stack, targets), spark=spark).run_once().failed
    created = DeltaTable(strict).version()

    _put(s3, stack, "in/b.json", [{"id": 2, "v": "b"}, {"id": 3, "extra": True}])
    cycle = build_ingest(settings_for(stack, targets), spark=spark).run_once()

    assert set(cycle.failed) == {"strict"}  # the other target goes on
    assert f"s3://{stack.bucket}/in/b.json line 2 has new field(s) extra" in cycle.failed["strict"]
    assert DeltaTable(strict).version() == created and len(read_table(strict)) == 1
    assert sorted(r["id"] for r in read_table(other)) == [1, 2, 3]

    targets["strict"] = target_conf("strict", strict, "json", key__prefix="in/", schema__evolution="add")
    assert not build_ingest(settings_for(stack, targets), spark=spark).run_once().failed
    assert {r["id"]: r["extra"] for r in read_table(strict)} == {1: None, 2: None, 3: True}


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "line-path"])
def test_ignore_mode_drops_new_fields_and_keeps_their_rows(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path, caplog: Any, fast: bool
):
    stack = make_stack()
    path = str(tmp_path / "t")
    conf = target_conf("t", path, "json", schema__evolution="ignore", json__fast__path=str(fast).lower())
    settings = settings_for(stack, {"t": conf})
    _put(s3, stack, "a.json", [{"id": 1, "v": "a"}])
    build_ingest(settings, spark=spark).run_once()
    caplog.set_level(logging.INFO, logger="s3events.ingest.files.dispatch")

    _put(s3, stack, "b.json", [{"id": 2, "v": "b", "extra": 1}, {"id": 3, "more": {"x": 1}}])
    report = build_ingest(settings, spark=spark).run_once()

    assert not report.failed and [b.fast_path_files for b in report.batches] == [1 if fast else 0]
    assert sorted((r["id"], r["v"]) for r in read_table(path)) == [(1, "a"), (2, "b"), (3, None)]
    assert "extra" not in DeltaTable(path).schema().to_arrow().names
    assert any("dropped 2 new field(s): extra, more" in r.getMessage() for r in caplog.records)
