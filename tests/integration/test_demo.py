"""The README's demo command: the pipeline end to end on the embedded local endpoint."""

from __future__ import annotations

import re

import pytest

from tests.conftest import read_table, run_cli

pytestmark = pytest.mark.integration


def test_demo_captures_every_file_once_and_reports_it(tmp_path):
    data_dir = tmp_path / "demo"
    result = run_cli(["demo", "--data-dir", str(data_dir), "--files", "12"])

    assert result.returncode == 0, result.stderr
    summary = dict(re.findall(r"^  (\w[\w ]+?)\s{2,}(\S+)$", result.stdout, flags=re.M))
    assert summary["files PUT"] == "13"
    assert summary["events captured"] == "13" == summary["metadata table rows"]
    # the multipart upload's second event and the redelivered message
    assert summary["duplicates dropped"] == "2"
    assert summary["poison quarantined"] == "1"
    rows = read_table(str(data_dir / "metadata"))
    assert len(rows) == 13 and len({r["key"] for r in rows}) == 13
    assert any(r["key"] == "events/dt=2026-11-22/a+b=c%d 1.json" for r in rows)


def test_demo_refuses_a_data_dir_it_did_not_make(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    result = run_cli(["demo", "--data-dir", str(tmp_path)])
    assert result.returncode == 3 and "not made by the demo" in result.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"
