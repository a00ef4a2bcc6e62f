"""The README's demo command: the whole pipeline end to end on the embedded local endpoint.

capture (the notified `events/` files) → backfill (finds the `late/` files S3 sent no event for) →
ingest into two targets on local Spark; checked by reading the Delta tables back.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from s3events.dev.demo_data import BUCKET, MALFORMED_KEY, MALFORMED_LINE, MALFORMED_TEXT
from tests.conftest import read_table, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.process]

FILES = 12  # --files: JSON Lines orders files under events/ (10 lines each)
WITHHELD = [  # outside the notification filter: only backfill can find them
    "late/2026/11/23/orders late 1.json",
    "late/dt=2026-11-23/orders+late 2.json",
    "late/readings/sensor 9.csv",
]
NOTIFIED = FILES + 1 + 3  # + the multipart upload + three CSV files


def summary_of(stdout: str) -> dict[str, str]:
    """`  label   value   [note]` lines of the summary: label -> value."""
    return dict(re.findall(r"^  (\w[\w ]*?)\s{2,}(\S+)", stdout, flags=re.M))


def uri(key: str) -> str:
    return f"s3://{BUCKET}/{key}"


# Spark 4.2's executor heartbeater can call isZero on a cached plan's accumulator that is still being
# deserialized (SPARK-59451, open upstream): Spark logs that NullPointerException with its Java stack and
# stops heartbeats, which in local mode costs nothing (docs/runbook.md). Only that trace is Spark's own.
SPARK_HEARTBEAT_RACE = "\tat org.apache.spark.sql.util.PartitionKeyedAccumulator.isZero("


def stack_traces(stderr: str) -> list[list[str]]:
    """Each Python traceback and Java stack in `stderr` (its lines), less SPARK_HEARTBEAT_RACE's."""
    traces: list[list[str]] = []
    current: list[str] = []
    for line in [*stderr.splitlines(), ""]:
        if line.startswith(("Traceback", "\tat ", "\t... ", "Caused by:")) or (
            current and line.startswith("  ")
        ):
            current.append(line)
        elif current:
            traces.append(current)
            current = []
    return [trace for trace in traces if not trace[0].startswith(SPARK_HEARTBEAT_RACE)]


def test_demo_runs_capture_backfill_and_ingest_and_lands_every_line_once(tmp_path):
    data_dir = tmp_path / "demo"
    result = run_cli(["demo", "--data-dir", str(data_dir), "--files", str(FILES)], timeout=420)

    assert result.returncode == 0, result.stderr
    summary = summary_of(result.stdout)
    assert summary["files PUT"] == str(NOTIFIED + len(WITHHELD))
    assert summary["events captured"] == str(NOTIFIED)
    # the multipart upload's second event and the redelivered message
    assert summary["duplicates dropped"] == "2"
    assert summary["poison quarantined"] == "1"
    assert summary["backfill listed"] == str(NOTIFIED + len(WITHHELD))
    assert summary["backfill already known"] == str(NOTIFIED)
    assert summary["backfill injected"] == str(len(WITHHELD))
    assert summary["metadata table rows"] == str(NOTIFIED + len(WITHHELD))

    metadata = read_table(str(data_dir / "metadata"))
    assert len({r["key"] for r in metadata}) == len(metadata) == NOTIFIED + len(WITHHELD)
    assert any(r["key"] == "events/dt=2026-11-22/a+b=c%d 1.json" for r in metadata)
    assert sorted(r["key"] for r in metadata if r["event_source"] == "backfill") == sorted(WITHHELD)

    orders = read_table(str(data_dir / "tables" / "orders"))
    expected_orders = (
        [(o, n) for o in range(FILES) for n in range(10)]  # events/…json
        + [(FILES, n) for n in range(5)]  # the multipart upload
        + [(1000, n) for n in range(10) if n != MALFORMED_LINE - 1]  # late, one line malformed
        + [(1001, n) for n in range(10)]  # late
    )
    assert Counter((r["order"], r["line"]) for r in orders) == Counter(expected_orders)
    assert summary["target orders rows"] == str(len(orders)) == str(FILES * 10 + 5 + 9 + 10)

    readings = read_table(str(data_dir / "tables" / "readings"))
    expected_readings = [(f"s{s}", m) for s in (1, 2, 3, 9) for m in range(4)]
    assert Counter((r["sensor"], r["minute"]) for r in readings) == Counter(expected_readings)
    assert sorted({r["_source_line"] for r in readings}) == [2, 3, 4, 5]  # line 1 is the header
    assert summary["target readings rows"] == str(len(readings)) == "16"

    for rows in (orders, readings):  # every line exactly once
        lines = Counter((r["_source_file"], r["_source_line"]) for r in rows)
        assert lines and max(lines.values()) == 1
    sources = {r["_source_file"] for r in orders + readings}
    assert {uri(k) for k in WITHHELD} <= sources  # the backfilled files were ingested too
    assert len(sources) == NOTIFIED + len(WITHHELD)

    (error,) = read_table(str(data_dir / "tables" / "orders_errors"))
    assert (error["_source_file"], error["_source_line"]) == (uri(MALFORMED_KEY), MALFORMED_LINE)
    assert error["raw"] == MALFORMED_TEXT and error["error"] == "not valid JSON"
    assert summary["target orders error rows"] == "1" and summary["target readings error rows"] == "0"
    assert f"{uri(MALFORMED_KEY)} line {MALFORMED_LINE}: not valid JSON" in result.stdout
    assert stack_traces(result.stderr) == []
    assert "INFO SparkContext" not in result.stderr  # Spark logs warnings and worse only


def test_demo_refuses_a_data_dir_it_did_not_make(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    result = run_cli(["demo", "--data-dir", str(tmp_path)])
    assert result.returncode == 3 and "not made by the demo" in result.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"
