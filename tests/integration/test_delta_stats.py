"""Statistics that never lie: after each kind of commit we make (our append, a MERGE with updates, a
DELETE, compaction, a checkpoint, a restatement), every min, max and null count in the log and in the
checkpoint is exact or a true bound of its file's data, for every column type we write (real delta-rs
tables; `tests/stats_audit.py` reads the log itself)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from s3events.infra import aws, delta_log, delta_stats
from s3events.infra.delta_commit import commit_files
from s3events.infra.parquet_files import write_data_file
from s3events.ingest.target_table import TargetTable
from s3events.maintenance import statistics
from s3events.maintenance.model import MaintenanceOptions, TableToMaintain
from s3events.maintenance.table import maintain
from tests.all_types import ALL_TYPES, batches, merge
from tests.stats_audit import audit, bounded_columns, checkpoint_adds

pytestmark = pytest.mark.integration

LOCAL = aws.AwsOptions(region="us-east-1")
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def ours(path: str, tables: Sequence[pa.Table]) -> None:
    """One commit of files written by our writer (what an append batch commits)."""
    written = []
    for t in tables:
        f = write_data_file([t], table_uri=path, schema=ALL_TYPES, options=LOCAL)
        assert f is not None
        written.append(f)
    commit_files(path, written, schema=ALL_TYPES, partition_by=[], storage_options={}, transactions={})


def compact(path: str) -> Any:
    options = MaintenanceOptions(target_file_bytes=1 << 30)
    return maintain(TableToMaintain("target t", path), {}, options, now=NOW)


def rows_of(path: str) -> list[str]:
    """The table's rows in id order, each as its repr (NaN compares equal to itself there)."""
    table = DeltaTable(path).to_pyarrow_table()
    return [repr(r) for r in sorted(table.to_pylist(), key=lambda r: r["id"])]


def ids_of(path: str) -> list[int]:
    return sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist())


def shifted(table: pa.Table, by: int) -> pa.Table:
    return table.set_column(0, "id", pc.add(table["id"], by))


def test_our_appends_hold_exact_statistics_or_none(tmp_path: Path):
    path = str(tmp_path / "t")
    ours(path, batches())

    assert audit(path) == []
    # bounds where they can be exact, none where they cannot
    assert {"id", "i32", "f32", "d5", "d15", "s", "dt", "ts", "ntz"} <= bounded_columns(path)
    assert not {"d16", "d24", "d38", "bin", "st", "m", "arr"} & bounded_columns(path)


def test_merge_updates_deletes_and_compaction_keep_statistics_exact_or_absent(tmp_path: Path):
    path = str(tmp_path / "t")
    merge(path, batches()[0], 0)  # a first batch: appended by our writer
    merge(path, batches()[1], 1)  # ids above the held ones: appended
    merge(path, batches()[2], 2)
    changed = pa.concat_tables(batches()).slice(1, 7)  # held ids: a MERGE that updates every file
    changed = changed.set_column(3, "f64", pa.array([float("nan"), -0.0, 7.5, None, 1.0, 2.0, -3.0]))
    merge(path, changed, 3)
    assert DeltaTable(path).history(1)[0]["operation"] == "MERGE"
    assert audit(path) == []

    TargetTable(path, "s3events.ingest/t", storage_options={}).delete_rows([])  # nothing: no commit
    DeltaTable(path).delete("id = 5", writer_properties=delta_stats.writer_properties(ALL_TYPES))
    assert audit(path) == []
    merge(path, shifted(batches()[0], 100), 4)  # two more small files for the compaction
    merge(path, shifted(batches()[1], 200), 5)

    before = rows_of(path)
    report = compact(path)
    assert report.compacted_from >= 2 and report.checkpoint
    assert audit(path) == []  # the log and the checkpoint alike
    assert checkpoint_adds(path)
    assert rows_of(path) == before


def test_compaction_gives_float_columns_their_exact_bounds_back(tmp_path: Path):
    path = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("f", pa.float64()), ("st", pa.struct([("w", pa.float32())]))])
    for i in range(3):
        rows = pa.table({"id": [i], "f": [i / 3], "st": [{"w": -0.0 if i else None}]}, schema=schema)
        written = write_data_file([rows], table_uri=path, schema=schema, options=LOCAL)
        assert written is not None
        commit_files(path, [written], schema=schema, partition_by=[], storage_options={}, transactions={})

    assert compact(path).compacted_into == 1

    assert audit(path) == []
    assert "f" in bounded_columns(path)  # delta-rs wrote none (NaN unknown); the restatement did


def test_a_checkpoint_with_typed_statistics_holds_them_exact_too(tmp_path: Path):
    path = str(tmp_path / "t")
    ours(path, batches())
    DeltaTable(path).alter.set_table_properties({"delta.checkpoint.writeStatsAsStruct": "true"})
    DeltaTable(path).create_checkpoint()

    parsed = [a for a in checkpoint_adds(path) if a.stats_parsed is not None]
    assert parsed, "delta-rs wrote no stats_parsed"
    assert audit(path) == []


def lossy_table(path: str) -> None:
    """A table as delta-rs writes it without our writer properties (every release before this one)."""
    for t in batches():
        write_deltalake(path, t, mode="append", configuration={"delta.enableChangeDataFeed": "true"})


def test_maintenance_restates_the_lossy_bounds_of_an_existing_table(tmp_path: Path):
    path = str(tmp_path / "t")
    lossy_table(path)
    lossy = audit(path)
    assert any("d24" in p for p in lossy) and any("NaN" in p for p in lossy), lossy
    before, version = rows_of(path), DeltaTable(path).version()

    options = MaintenanceOptions(target_file_bytes=4)
    report = maintain(TableToMaintain("target t", path), {}, options, now=NOW)

    assert report.restated == 3 and report.compacted_from == 0
    assert "restated the statistics of 3 files" in report.line()
    assert audit(path) == []
    assert rows_of(path) == before
    # the restatement changed no data: the change feed after it holds nothing
    assert pa.table(DeltaTable(path).load_cdf(starting_version=version + 1).read_all()).num_rows == 0
    again = maintain(TableToMaintain("target t", path), {}, options, now=NOW + timedelta(days=1))
    assert again.restated == 0


def test_maintenance_finds_the_lossy_bounds_delta_rs_itself_reads_as_none(tmp_path: Path):
    """delta-rs parses `-7.734567890123456e+17` for a DECIMAL(24,6) as no bound, delta-spark as a bound
    above the file's min: the repair reads the log's text, not delta-rs's parsed view."""
    path = str(tmp_path / "t")
    for t in batches():
        write_deltalake(path, t.select(["id", "d24", "d38"]), mode="append")
    parsed = pa.table(DeltaTable(path, version=0).get_add_actions(flatten=True)).to_pylist()[0]
    assert parsed["min.d24"] is None  # the premise

    report = maintain(TableToMaintain("target t", path), {}, MaintenanceOptions(target_file_bytes=4), now=NOW)

    assert report.restated == 3
    assert audit(path) == []


def test_a_restatement_never_brings_back_a_file_another_writer_removed(tmp_path: Path):
    path = str(tmp_path / "t")
    lossy_table(path)
    calls = []

    def choose_then_race(table: DeltaTable) -> list[str]:
        chosen = statistics.lossy_files(path, {})(table)
        if not calls:  # another writer deletes a row (rewriting its file) after we planned
            DeltaTable(path).delete("id = 1")
        calls.append(chosen)
        return chosen

    restated = delta_stats.restate(path, {}, choose_then_race)

    assert len(calls) == 2  # the first plan lost to the delete and was made again
    assert restated == len(calls[1])
    assert ids_of(path) == [2, 3, 4, 5, 6, 7, 8, 9]
    assert audit(path) == []


def test_a_partitioned_table_with_encoded_paths_is_restated_in_place(tmp_path: Path):
    path = str(tmp_path / "t")
    data = pa.concat_tables(batches()).append_column("part", pa.array(["a b%/c", None, "ü"] * 3))
    write_deltalake(path, data.select(["id", "part", "d24", "f64", "ts"]), partition_by=["part"])
    files = sorted(DeltaTable(path).file_uris())

    assert delta_stats.restate(path, {}, statistics.lossy_files(path, {})) == 3

    assert sorted(DeltaTable(path).file_uris()) == files
    assert audit(path) == []
    partitions = {r["part"] for r in DeltaTable(path).to_pyarrow_table().to_pylist()}
    assert partitions == {"a b%/c", None, "ü"}


def test_delta_rs_writes_exact_bounds_for_the_types_it_is_trusted_with(tmp_path: Path):
    """The premise of `exact_in_delta_rs`: delta-rs's own bounds for those types pass the audit."""
    path = str(tmp_path / "t")
    trusted = [f.name for f in ALL_TYPES if delta_stats.exact_in_delta_rs(f.type)]
    for t in batches():
        write_deltalake(path, t.select(trusted), mode="append")
    DeltaTable(path).optimize.compact()

    assert audit(path) == []
    assert bounded_columns(path) == set(trusted)


def test_restated_statistics_are_what_our_writer_writes(tmp_path: Path):
    mine, theirs = str(tmp_path / "mine"), str(tmp_path / "theirs")
    ours(mine, batches()[:1])
    write_deltalake(theirs, batches()[0])

    assert (
        delta_stats.restate(theirs, {}, lambda t: pa.table(t.get_add_actions()).column("path").to_pylist())
        == 1
    )

    assert _last_stats(theirs) == _last_stats(mine)


def _last_stats(path: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in sorted(Path(path, "_delta_log").glob("*.json")):
        for line in name.read_text().splitlines():
            if "add" in (action := json.loads(line)):
                found = json.loads(action["add"]["stats"])
    return found


def test_a_table_on_s3_is_repaired_through_the_same_storage_options(aws_options: aws.AwsOptions, s3: Any):
    bucket = f"lake-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=bucket)
    path = f"s3://{bucket}/t"
    storage = aws.delta_storage_options(aws_options)
    for t in batches():
        write_deltalake(path, t.select(["id", "d24", "f64"]), mode="append", storage_options=storage)
    options = MaintenanceOptions(target_file_bytes=4)

    report = maintain(TableToMaintain("target t", path), storage, options, now=NOW)

    assert report.restated == 3
    table = DeltaTable(path, storage_options=storage)
    assert table.transaction_version(statistics.STATISTICS) == 1
    logged = [
        json.loads(text or "{}") for text in delta_log.live_stats(path, storage, table.version()).values()
    ]
    assert not any("d24" in stats["minValues"] for stats in logged)
    assert sum("f64" in stats["minValues"] for stats in logged) == 2  # the file holding NaN has none
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == list(range(1, 10))
