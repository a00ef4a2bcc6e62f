"""schema.evolution=rescue and rescued.column: a new field or a value that does not fit its column lands in
the rescued column as one JSON object, the row lands with those columns null, and only what cannot be
parsed at all reaches the error table; on either path (hypothesis: the same rows and error rows from
files of drifting types and new fields, read with the fast path allowed and with it off), in append and
merge mode."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st

from s3events.ingest.files.dispatch import run_batch
from s3events.ingest.files.lineage import INGESTED_AT, LINEAGE_FIELDS, TIMESTAMP
from s3events.ingest.model import Batch, Checkpoint
from s3events.ingest.service import build_ingest
from tests.conftest import read_table
from tests.integration import test_dispatch as both
from tests.integration.test_ingest import capture, jsonl, settings_for, target_conf

pytestmark = pytest.mark.integration


def _put(s3: Any, stack: Any, key: str, body: bytes) -> None:
    s3.put_object(Bucket=stack.bucket, Key=key, Body=body)
    capture(stack)


def _rescued(rows: list[dict[str, Any]], column: str = "_rescued_data") -> dict[int, Any]:
    return {r["id"]: None if r[column] is None else json.loads(r[column]) for r in rows}


def test_rescue_mode_keeps_the_columns_and_rescues_new_fields_and_misfit_values(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path
):
    stack = make_stack()
    path = str(tmp_path / "t")
    conf = target_conf("t", path, "json", schema__evolution="rescue")
    settings = settings_for(stack, {"t": conf})
    _put(s3, stack, "a.json", jsonl([{"id": 1, "amount": 2.5, "v": "a"}]))  # the first batch: the columns
    assert not build_ingest(settings, spark=spark).run_once().failed
    columns = DeltaTable(path).schema().to_arrow().names
    assert "_rescued_data" in columns

    clean = jsonl([{"id": 2, "amount": 1, "v": "b"}, {"id": 3, "extra": 10, "nested": {"x": [1, None]}}])
    _put(s3, stack, "b.json", clean)  # new fields only: the fast path reads it
    misfit = b'{"id": 4, "amount": "lots", "v": "c", "more": 1.5}\n{"id": 5, "amount": null}\nnot json\n'
    _put(s3, stack, "c.json", misfit)
    report = build_ingest(settings, spark=spark).run_once()

    assert not report.failed
    assert DeltaTable(path).schema().to_arrow().names == columns  # never a new column
    rows = read_table(path)
    assert _rescued(rows) == {
        1: None,
        2: None,
        3: {"extra": 10, "nested": {"x": [1, None]}},
        4: {"amount": "lots", "more": 1.5},
        5: None,
    }
    assert {r["id"]: r["amount"] for r in rows} == {1: 2.5, 2: 1.0, 3: None, 4: None, 5: None}
    assert {r["id"]: r["v"] for r in rows}[4] == "c"
    errors = read_table(path + "_errors")
    assert [(e["_source_line"], e["raw"]) for e in errors] == [(3, "not json")]
    # b.json takes the fast path (no file takes the line path because of the mode), c.json the line path
    assert sum(b.fast_path_files for b in report.batches) == 1


def test_add_mode_with_a_rescued_column_adds_new_fields_and_rescues_misfit_values(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path
):
    stack = make_stack()
    path = str(tmp_path / "t")
    conf = target_conf("t", path, "json", rescued__column="leftovers")
    settings = settings_for(stack, {"t": conf})
    _put(s3, stack, "a.json", jsonl([{"id": 1, "n": 1}]))
    build_ingest(settings, spark=spark).run_once()

    _put(s3, stack, "b.json", jsonl([{"id": 2, "n": "two", "new": True}, {"id": 3, "n": 3}]))
    assert not build_ingest(settings, spark=spark).run_once().failed

    rows = read_table(path)
    assert _rescued(rows, "leftovers") == {1: None, 2: {"n": "two"}, 3: None}
    assert {r["id"]: (r["n"], r["new"]) for r in rows} == {1: (1, None), 2: (None, True), 3: (3, None)}
    assert not _exists(path + "_errors") or read_table(path + "_errors") == []  # nothing became an error row


def test_csv_rescue_mode_rescues_new_columns_and_misfit_fields_as_strings(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path
):
    stack = make_stack()
    path = str(tmp_path / "t")
    conf = target_conf("t", path, "csv", schema__evolution="rescue")
    settings = settings_for(stack, {"t": conf})
    _put(s3, stack, "a.csv", b"id,n\n1,10\n")
    build_ingest(settings, spark=spark).run_once()

    _put(s3, stack, "b.csv", b"id,n,city\n2,20,Oslo\n3,,\n")
    _put(s3, stack, "c.csv", b"id,n\n4,four\n5,5,extra\n")
    assert not build_ingest(settings, spark=spark).run_once().failed

    rows = read_table(path)
    assert _rescued(rows) == {1: None, 2: {"city": "Oslo"}, 3: None, 4: {"n": "four"}}
    assert {r["id"]: r["n"] for r in rows} == {1: 10, 2: 20, 3: None, 4: None}
    assert "city" not in DeltaTable(path).schema().to_arrow().names
    errors = read_table(path + "_errors")
    assert [(e["_source_line"], e["raw"]) for e in errors] == [(3, "5,5,extra")]  # a field too many


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "line-path"])
def test_merge_mode_keeps_the_latest_row_with_its_rescued_data(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path, fast: bool
):
    stack = make_stack()
    path = str(tmp_path / "t")
    conf = target_conf(
        "t",
        path,
        "json",
        mode="merge",
        record__key="id",
        schema__evolution="rescue",
        json__fast__path=str(fast).lower(),
    )
    settings = settings_for(stack, {"t": conf})
    _put(s3, stack, "a.json", jsonl([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]))
    build_ingest(settings, spark=spark).run_once()

    _put(s3, stack, "b.json", jsonl([{"id": 1, "v": "a2", "tag": "x"}, {"id": 2, "v": "b2"}]))
    cycle = build_ingest(settings, spark=spark).run_once()
    assert not cycle.failed and [b.rescued for b in cycle.batches] == [1]  # counted in merge mode too

    rows = read_table(path)
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "a2"), (2, "b2")]
    assert _rescued(rows) == {1: {"tag": "x"}, 2: None}


# -- the same rows on either path ---------------------------------------------------------------------------

_TABLE = [pa.field("id", pa.int64()), pa.field("name", pa.string()), pa.field("amount", pa.float64())]
_VALUE = st.one_of(
    both._SCALAR, st.lists(both._SCALAR, max_size=2), st.dictionaries(st.sampled_from("ab"), both._SCALAR)
)
_LINE = st.one_of(
    st.dictionaries(
        st.sampled_from(["id", "name", "amount", "extra", "_rescued_data"]), _VALUE, max_size=4
    ).map(lambda d: json.dumps(d, ensure_ascii=False)),
    st.sampled_from(
        ["not json", "[1]", '{"id": 1'],
    ),
)
_MODES = st.sampled_from(
    [
        {"schema.evolution": "rescue"},
        {"rescued.column": "_rescued_data"},  # add mode
        {"schema.evolution": "rescue", "schema": "id BIGINT, name STRING, amount DOUBLE"},
    ]
)


def _table(first_batch: bool, rescued: str = "_rescued_data") -> pa.Schema | None:
    if first_batch:
        return None
    return pa.schema(
        [*LINEAGE_FIELDS, *_TABLE, pa.field(rescued, pa.string()), pa.field(INGESTED_AT, TIMESTAMP)]
    )


def _nan_free(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """NaN as text: a NaN is not equal to itself (a CSV double column takes `NaN`)."""
    return [{k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in rows]


def _either_path(
    spark: Any,
    s3: Any,
    aws_options: Any,
    root: Path,
    fmt: str,
    bodies: list[bytes],
    mode: dict[str, str],
    table: pa.Schema | None,
) -> None:
    run, bucket = next(both._RUNS), both._bucket(s3)
    refs = both._put(s3, bucket, f"rescue-{fmt}/{run}", bodies, f".{fmt}")
    outs = []
    for fast in (True, False):
        path = root / f"{run}-{fast}"
        target = both._target(fmt, path, fast=fast, extra=mode)
        batch = Batch(refs, (), Checkpoint(-1), Checkpoint(0))
        out = run_batch(
            spark, batch, target, existing_schema=table, aws=aws_options, ingested_at=both.INGESTED_AT
        )
        outs.append((out, path))
    (fast_out, fast_path), (line_out, line_path) = outs
    assert sorted(fast_out.schema, key=lambda f: f.name) == sorted(line_out.schema, key=lambda f: f.name)
    assert _nan_free(both._rows(fast_out, fast_path)) == _nan_free(both._rows(line_out, line_path))
    assert both._errors(fast_out) == both._errors(line_out)
    if table is not None and mode.get("schema.evolution") == "rescue":  # the table's columns, no other
        assert set(fast_out.schema.names) == set(table.names)
    if fmt == "json":  # these files have no blank line: every line once, as a row or an error row
        lines = sum(b.count(b"\n") for b in bodies)
        assert sum(f.num_records for f in line_out.files) + len(line_out.errors) == lines


@settings(both._SETTINGS, max_examples=3)
@given(
    bodies=st.lists(
        st.lists(_LINE, min_size=1, max_size=6).map(lambda ls: ("\n".join(ls) + "\n").encode()),
        min_size=1,
        max_size=3,
    ),
    mode=_MODES,
    first_batch=st.booleans(),
)
def test_json_rescue_gives_the_same_rows_and_error_rows_on_either_path(
    s3, aws_options, spark, tmp_path, bodies, mode, first_batch
):
    _either_path(spark, s3, aws_options, tmp_path, "json", bodies, mode, _table(first_batch))


_CSV_HEADERS = st.sampled_from(
    [["id", "name", "amount"], ["id", "amount", "city"], ["name", "id"], ["id", "_rescued_data"]]
)


@st.composite
def _csv_files(draw: st.DrawFn) -> list[bytes]:
    header = draw(_CSV_HEADERS)
    files = []
    for _ in range(draw(st.integers(1, 2))):
        rows = draw(
            st.lists(st.lists(both._CSV_FIELD, min_size=len(header), max_size=len(header)), max_size=5)
        )
        files.append(("\n".join([",".join(header), *(",".join(r) for r in rows)]) + "\n").encode())
    return files


@settings(both._SETTINGS, max_examples=3)
@given(bodies=_csv_files(), first_batch=st.booleans(), rescue=st.booleans())
def test_csv_rescue_gives_the_same_rows_and_error_rows_on_either_path(
    s3, aws_options, spark, tmp_path, bodies, first_batch, rescue
):
    mode = {"schema.evolution": "rescue"} if rescue else {"rescued.column": "_rescued_data"}
    _either_path(spark, s3, aws_options, tmp_path, "csv", bodies, mode, _table(first_batch))


def _exists(path: str) -> bool:
    return Path(path, "_delta_log").exists()


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "line-path"])
def test_a_transform_reads_the_rescued_column_in_src(
    make_stack: Any, s3: Any, spark: Any, tmp_path: Path, fast: bool
):
    stack = make_stack()
    path = str(tmp_path / "t")
    sql = "SELECT id, get_json_object(_rescued_data, '$.extra') AS extra, _rescued_data FROM src"
    conf = target_conf(
        "t",
        path,
        "json",
        schema="id BIGINT",
        schema__evolution="rescue",
        transform__sql=sql,
        json__fast__path=str(fast).lower(),
    )
    _put(s3, stack, "a.json", jsonl([{"id": 1}, {"id": 2, "extra": "x"}]))
    assert not build_ingest(settings_for(stack, {"t": conf}), spark=spark).run_once().failed

    rows = sorted(read_table(path), key=lambda r: r["id"])
    assert [(r["id"], r["extra"], r["_rescued_data"]) for r in rows] == [
        (1, None, None),
        (2, "x", '{"extra":"x"}'),
    ]
