"""Record-level deletes of merge targets: which rows are deletes (`DeleteRule`), the start-up checks of
`delete.*` keys, and how a batch's deletes are reported."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry

from s3events.config import load_settings
from s3events.errors import ConfigError
from s3events.ingest.deletes import FLAG, DeleteRule
from s3events.ingest.metrics import IngestMetrics
from s3events.ingest.model import Checkpoint
from s3events.ingest.report import BatchReport, IngestCycle
from s3events.ingest.target import target_specs

BASE = """\
s3events.source.queue.url=http://127.0.0.1:5000/123456789012/q
s3events.metadata.table.path=s3://bucket/tables/metadata
s3events.ingest.targets=cdc
s3events.ingest.target.cdc.path=s3://bucket/tables/cdc
s3events.ingest.target.cdc.format=json
"""
MERGE = "s3events.ingest.target.cdc.mode=merge\ns3events.ingest.target.cdc.record.key=id\n"
DELETES = "s3events.ingest.target.cdc.delete.field=Op\ns3events.ingest.target.cdc.delete.values=D\n"


def _ingest_error(tmp_path: Path, text: str) -> ConfigError:
    path = tmp_path / "t.properties"
    path.write_text(text, encoding="utf-8")
    settings = load_settings(path, (), env={})
    with pytest.raises(ConfigError) as caught:
        settings.validate_for("ingest")
    return caught.value


def test_dms_op_values_mark_deletes_and_null_or_other_values_are_upserts() -> None:
    rule = DeleteRule("Op", ("D",))
    rows = pa.table({"id": [1, 2, 3, 4], "Op": ["D", "U", None, "d"]})

    assert rule.marks(rows).to_pylist() == [True, False, False, False]


def test_a_boolean_flag_matches_true_written_as_text() -> None:
    rule = DeleteRule("_is_deleted", ("true",))
    rows = pa.table({"id": [1, 2, 3], "_is_deleted": [True, False, None]})

    assert rule.marks(rows).to_pylist() == [True, False, False]


def test_rows_without_the_marker_column_hold_no_delete() -> None:
    rule = DeleteRule("Op", ("D",))
    rows = pa.table({"id": [1, 2]})

    assert rule.marks(rows).to_pylist() == [False, False]
    assert not rule.may_hold_delete(rows.schema, rows)


def test_written_rows_whose_keys_lack_the_marker_may_hold_a_delete() -> None:
    rule = DeleteRule("Op", ("D",))
    schema = pa.schema([("id", pa.int64()), ("Op", pa.string())])

    assert rule.may_hold_delete(schema, pa.table({"id": [1]}))
    assert not rule.may_hold_delete(schema, pa.table({"id": [1], "Op": ["I"]}))
    assert rule.may_hold_delete(schema, pa.table({"id": [1, 2], "Op": ["I", "D"]}))


def test_the_marker_column_is_kept_out_of_the_target_unless_asked() -> None:
    schema = pa.schema([("id", pa.int64()), ("Op", pa.string()), ("v", pa.string())])

    assert DeleteRule("Op", ("D",)).stored(schema).names == ["id", "v"]
    assert DeleteRule("Op", ("D",)).unstored() == [FLAG, "Op"]
    assert DeleteRule("Op", ("D",), keep=True).stored(schema).names == ["id", "Op", "v"]
    assert DeleteRule("Op", ("D",), keep=True).unstored() == [FLAG]


def test_delete_keys_of_a_merge_target_become_its_delete_rule(tmp_path: Path) -> None:
    text = (
        BASE
        + MERGE
        + DELETES.replace("=D\n", "=D, X\n")
        + "s3events.ingest.target.cdc.delete.field.keep=true\n"
    )
    path = tmp_path / "t.properties"
    path.write_text(text, encoding="utf-8")
    settings = load_settings(path, (), env={})
    settings.validate_for("ingest")

    (spec,) = target_specs(settings)
    assert spec.delete == DeleteRule("Op", ("D", "X"), keep=True)


def test_deletes_on_an_append_target_fail_at_start_up_naming_both_keys(tmp_path: Path) -> None:
    error = _ingest_error(tmp_path, BASE + DELETES)

    assert error.key == "s3events.ingest.target.cdc.delete.field"
    assert "s3events.ingest.target.cdc.mode=append" in str(error)


def test_deletes_beside_a_mirroring_target_fail_at_start_up_naming_both_keys(tmp_path: Path) -> None:
    error = _ingest_error(
        tmp_path, BASE + MERGE + DELETES + "s3events.ingest.target.cdc.on.object.removed=delete\n"
    )

    assert error.key == "s3events.ingest.target.cdc.delete.field"
    assert "s3events.ingest.target.cdc.on.object.removed=delete" in str(error)


def test_a_delete_field_without_values_fails_at_start_up(tmp_path: Path) -> None:
    error = _ingest_error(tmp_path, BASE + MERGE + "s3events.ingest.target.cdc.delete.field=Op\n")

    assert error.key == "s3events.ingest.target.cdc.delete.values"
    assert "s3events.ingest.target.cdc.delete.field" in str(error)


def test_delete_values_without_a_field_fail_at_start_up(tmp_path: Path) -> None:
    error = _ingest_error(tmp_path, BASE + MERGE + "s3events.ingest.target.cdc.delete.values=D\n")

    assert error.key == "s3events.ingest.target.cdc.delete.values"


def _report(**counts: int) -> BatchReport:
    return BatchReport("cdc", 1, 3, 0, 0, Checkpoint(0, 0), Checkpoint(1, 0), 4, 0.5, **counts)


def test_the_batch_line_counts_applied_and_noop_deletes_only_when_there_are_some() -> None:
    assert "deletes=2 deletes_noop=1 " in _report(deletes=2, deletes_noop=1).log_line()
    assert "deletes" not in _report().log_line()


def test_metrics_count_applied_and_noop_deletes_per_target() -> None:
    registry = CollectorRegistry()
    metrics = IngestMetrics(registry)
    metrics.declare(["cdc"])
    metrics.record(
        IngestCycle(batches=[_report(deletes=2, deletes_noop=1), _report(deletes_noop=4)]), now=0.0
    )

    value = registry.get_sample_value
    assert value("s3events_ingest_deletes_total", {"target": "cdc"}) == 2
    assert value("s3events_ingest_deletes_noop_total", {"target": "cdc"}) == 5
