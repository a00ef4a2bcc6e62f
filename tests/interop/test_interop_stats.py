"""delta-spark, which skips files by their statistics, finds every row of a merge-mode target after a
MERGE with updates and after compaction: an equality filter at each file's min and at its max, on every
column of every type, returns exactly the rows delta-rs reads without a filter.

delta-spark plans a data-skipping query per filter (about 90 here): the tests' session evaluates them
interpreted (as every test JVM, tests/jvm.py), which skips the same files as compiled code and
costs about half the time."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from s3events.maintenance.model import MaintenanceOptions, TableToMaintain
from s3events.maintenance.table import maintain
from tests.all_types import ALL_TYPES, batches, merge
from tests.interop.delta_read import Probe, assert_filters_agree
from tests.stats_audit import log_adds

pytestmark = [pytest.mark.integration, pytest.mark.interop]

# Columns an equality filter can name (binary, maps and lists have no statistics to mislead a reader).
PROBED = [f.name for f in ALL_TYPES if not pa.types.is_nested(f.type) and not pa.types.is_binary(f.type)]
NESTED = ["x", "y", "z", "w"]  # fields of `st`


def literal(t: pa.DataType, value: Any) -> str:
    if pa.types.is_decimal(t):
        return f"CAST('{value}' AS DECIMAL({t.precision}, {t.scale}))"
    if pa.types.is_floating(t):
        kind = "FLOAT" if t == pa.float32() else "DOUBLE"
        return f"CAST('{value!r}' AS {kind})".replace("'inf'", "'Infinity'").replace("'-inf'", "'-Infinity'")
    if pa.types.is_timestamp(t) and t.tz is None:
        return f"TIMESTAMP_NTZ '{value:%Y-%m-%d %H:%M:%S.%f}'"
    if pa.types.is_timestamp(t):
        return f"TIMESTAMP '{value.astimezone(UTC):%Y-%m-%d %H:%M:%S.%f}'"
    if pa.types.is_date(t):
        return f"DATE '{value.isoformat()}'"
    if pa.types.is_boolean(t):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)


def equal_to(column: str, t: pa.DataType, value: Any) -> Probe:
    path = column.split(".")

    def matches(row: dict[str, Any]) -> bool:
        found: Any = row
        for name in path:
            found = None if found is None else found.get(name)
        return found is not None and found == value

    sql_column = ".".join(f"`{p}`" for p in path)
    return Probe(f"{sql_column} = {literal(t, value)}", matches)


def edge_probes(path: str) -> list[Probe]:
    """`column = v` for v each live file's min and max of each column (NaN left out: it equals nothing)."""
    probes: dict[str, Probe] = {}
    for add in log_adds(path):
        data = pq.read_table(os.path.join(path, unquote(add.path)))
        columns = [(name, ALL_TYPES.field(name).type, data[name]) for name in PROBED]
        st = ALL_TYPES.field("st").type
        for i, name in enumerate(NESTED):
            child = pa.chunked_array([c.flatten()[i] for c in data["st"].cast(st).chunks])
            columns.append((f"st.{name}", st.field(i).type, child))
        for name, t, column in columns:
            values = column.cast(t).drop_null()
            if pa.types.is_floating(t):
                values = values.filter(pc.invert(pc.is_nan(values)))
            if len(values):
                for v in pc.min_max(values).values():
                    probe = equal_to(name, t, v.as_py())
                    probes.setdefault(probe.sql, probe)
    return list(probes.values())


def test_filters_at_every_file_edge_find_every_row_after_a_merge_and_after_compaction(
    delta_spark: Any, tmp_path: Path
):
    path = str(tmp_path / "t")
    parts = batches()
    changed = pa.concat_tables(parts).slice(1, 7)  # ids held in every file: a MERGE that updates them
    later = [p.set_column(0, "id", pc.add(p["id"], 100 * (i + 1))) for i, p in enumerate(parts)]
    for version, rows in enumerate([*parts, changed, *later]):  # the later ids: small files to compact
        merge(path, rows, version)
    assert "MERGE" in [c["operation"] for c in DeltaTable(path).history()]
    probes = edge_probes(path)
    assert len(probes) > 30
    assert_filters_agree(delta_spark, path, probes)

    options = MaintenanceOptions(target_file_bytes=1 << 30)
    report = maintain(TableToMaintain("target t", path), {}, options, now=datetime(2026, 11, 26, tzinfo=UTC))
    assert report.compacted_into == 1
    delta_spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    assert_filters_agree(delta_spark, path, edge_probes(path))


def test_high_precision_decimals_are_found_in_a_table_repaired_by_maintenance(
    delta_spark: Any, tmp_path: Path
):
    """The issue's case: DECIMAL(24,6) / (38,10) bounds written as doubles lose the row; after
    `maintain` restates them, the filter finds it."""
    path = str(tmp_path / "t")
    for rows in batches():
        write_deltalake(path, rows.select(["id", "d24", "d38"]), mode="append")  # a release before this one
    wanted = [
        equal_to("d24", ALL_TYPES.field("d24").type, Decimal("-773456789012345678.000007")),
        equal_to("d24", ALL_TYPES.field("d24").type, Decimal("783456789012345678.000008")),
        equal_to("d38", ALL_TYPES.field("d38").type, Decimal("69123456789012345678.0123456789")),
    ]
    with pytest.raises(AssertionError) as lost:
        assert_filters_agree(delta_spark, path, wanted)  # the defect, as a reader meets it
    assert str(lost.value).count("delta-spark [], delta-rs [") == 3, lost.value

    maintain(
        TableToMaintain("target t", path), {}, MaintenanceOptions(target_file_bytes=4), now=datetime.now(UTC)
    )

    delta_spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    assert_filters_agree(delta_spark, path, wanted)
