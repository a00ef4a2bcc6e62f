"""Statistics that never lie: after each kind of commit we make (our append, a MERGE with updates, a
DELETE, compaction, a checkpoint, a restatement), every min, max and null count in the log and in the
checkpoint is exact or a true bound of its file's data, for every column type we write (real delta-rs
tables; `tests/stats_audit.py` reads the log itself)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from s3events.infra import aws, delta_stats
from s3events.infra.delta_commit import commit_files
from s3events.infra.parquet_files import write_data_file
from s3events.ingest.files.merge_input import MergeInput
from s3events.ingest.model import Checkpoint
from s3events.ingest.target_table import TargetTable
from s3events.maintenance.model import MaintenanceOptions, TableToMaintain
from s3events.maintenance.table import maintain
from tests.stats_audit import audit, bounded_columns, checkpoint_adds

pytestmark = pytest.mark.integration

LOCAL = aws.AwsOptions(region="us-east-1")
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)

ALL_TYPES = pa.schema(
    [
        ("id", pa.int64()),
        ("i8", pa.int8()),
        ("i32", pa.int32()),
        ("f64", pa.float64()),
        ("f32", pa.float32()),
        ("d5", pa.decimal128(5, 2)),
        ("d15", pa.decimal128(15, 3)),
        ("d16", pa.decimal128(16, 0)),
        ("d24", pa.decimal128(24, 6)),
        ("d38", pa.decimal128(38, 10)),
        ("s", pa.string()),
        ("dt", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),
        ("b", pa.bool_()),
        ("bin", pa.binary()),
        (
            "st",
            pa.struct(
                [("x", pa.decimal128(24, 6)), ("y", pa.string()), ("z", pa.int64()), ("w", pa.float64())]
            ),
        ),
        ("m", pa.map_(pa.string(), pa.string())),
        ("arr", pa.list_(pa.int64())),
    ]
)
D = Decimal
LONG = "a" * 31 + "é" + "tail beyond the 32-character prefix"
HIGH = "\U0010ffff" * 33  # no string of 32 characters is above it: no max can be written
EMOJI = "m" * 30 + "🙂🙂" + "more"


def ts(day: int, micros: int) -> datetime:
    return datetime(2026, 3, day, 12, 0, 0, micros, tzinfo=UTC)


def ntz(day: int, micros: int) -> datetime:
    return datetime(2026, 4, day, 0, 0, 0, micros)


# Each file's rows: edges of every type, and nulls in every column somewhere.
ROWS: list[dict[str, list[Any]]] = [
    {
        "id": [1, 2, 3],
        "i8": [-128, 127, None],
        "i32": [2**31 - 1, None, -(2**31)],
        "f64": [-0.0, 0.0, None],
        "f32": [1.5, None, -2.25],
        "d5": [D("-999.99"), D("0.01"), None],
        "d15": [D("999999999999.999"), None, D("-0.001")],
        "d16": [D("9999999999999999"), D("-9999999999999999"), None],
        "d24": [D("-773456789012345678.000007"), None, D("783456789012345678.000008")],
        "d38": [D("69123456789012345678.0123456789"), D("-1E-10"), None],
        "s": [LONG, "", None],
        "dt": [date(2026, 1, 1), None, date(1970, 1, 1)],
        "ts": [ts(1, 1), ts(1, 999_999), None],
        "ntz": [None, ntz(2, 1500), ntz(2, 999_999)],
        "b": [True, None, True],
        "bin": [b"\x00", b"\xff" * 40, None],
        "st": [
            {"x": D("783456789012345678.000008"), "y": "p", "z": 1, "w": 0.5},
            None,
            {"x": None, "y": None, "z": None, "w": None},
        ],
        "m": [{"k": "v"}, None, {}],
        "arr": [[1, None], [], None],
    },
    {
        "id": [4, 5, 6],
        "i8": [0, 1, 2],
        "i32": [0, 1, 2],
        "f64": [float("nan"), 1.5, float("inf")],
        "f32": [float("-inf"), None, 3.0],
        "d5": [D("1.00"), D("2.50"), D("999.99")],
        "d15": [D("0.000"), D("1.001"), D("123456789012.345")],
        "d16": [D("1"), D("2"), D("3")],
        "d24": [D("1.000001"), D("2"), D("-999999999999999999.999999")],
        "d38": [D("9999999999999999999999999999.9999999999"), None, D("0")],
        "s": [EMOJI, HIGH, "zz"],
        "dt": [date(2026, 12, 31), date(2026, 6, 1), None],
        "ts": [ts(10, 123_456), ts(28, 999_001), ts(11, 0)],
        "ntz": [ntz(10, 0), ntz(12, 123_456), None],
        "b": [False, False, None],
        "bin": [None, None, None],
        "st": [None, {"x": D("1"), "y": "zz", "z": -5, "w": float("nan")}, None],
        "m": [None, {"a": None}, None],
        "arr": [None, [2**62], [None]],
    },
    {
        "id": [7, 8, 9],
        "i8": [None, None, None],
        "i32": [5, 6, 7],
        "f64": [-1e308, 1e308, 2.5e-308],
        "f32": [None, None, None],
        "d5": [None, None, None],
        "d15": [D("1.500"), D("1.500"), D("1.500")],
        "d16": [None, D("1234567890123456"), None],
        "d24": [None, None, None],
        "d38": [D("1"), D("2"), D("3")],
        "s": ["ÿ", "über", "𝄞 clef"],
        "dt": [None, None, None],
        "ts": [ts(20, 0), None, ts(20, 1)],
        "ntz": [ntz(20, 1), ntz(21, 0), ntz(20, 999)],
        "b": [None, None, None],
        "bin": [b"", b"x", b"y"],
        "st": [{"x": D("-5.5"), "y": "q", "z": 9, "w": -1.0}, None, None],
        "m": [{}, {}, {}],
        "arr": [[3], [4], [5]],
    },
]


def batches(rows: Sequence[dict[str, list[Any]]] = ROWS) -> list[pa.Table]:
    return [pa.table(r, schema=ALL_TYPES) for r in rows]


def ours(path: str, tables: Sequence[pa.Table]) -> None:
    """One commit of files written by our writer (what an append batch commits)."""
    written = []
    for t in tables:
        f = write_data_file([t], table_uri=path, schema=ALL_TYPES, options=LOCAL)
        assert f is not None
        written.append(f)
    commit_files(path, written, schema=ALL_TYPES, partition_by=[], storage_options={}, transactions={})


def merge(path: str, rows: pa.Table, version: int) -> None:
    """One merge-mode batch through the target's own commit (updates when the ids are held)."""
    table = TargetTable(path, "s3events.ingest/t", storage_options={})
    table.commit_merge(
        MergeInput.held(rows),
        record_key=("id",),
        ordering_field=None,
        partition_by=(),
        expected=None if version == 0 else Checkpoint(version - 1, 0),
        end=Checkpoint(version, 0),
    )


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


def test_a_restatement_never_brings_back_a_file_another_writer_removed(tmp_path: Path):
    path = str(tmp_path / "t")
    lossy_table(path)
    calls = []

    def choose_then_race(table: DeltaTable) -> list[str]:
        chosen = delta_stats.suspect_files(table)
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

    assert delta_stats.restate(path, {}, delta_stats.suspect_files) == 3

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
