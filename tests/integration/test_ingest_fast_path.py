"""The JSON fast path (pyarrow on executors) against the line path (Spark from_json), on the same files:
same rows, same lineage, same error rows, same schema; files the fast path declines still land."""

from __future__ import annotations

import gzip
import json
import logging
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from s3events.ingest.service import run_ingest
from tests.conftest import read_table
from tests.integration.test_ingest import capture, settings_for, target_conf

pytestmark = pytest.mark.integration


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


FIRST_BATCH = {
    # clean files: the fast path's
    "in/dt=2026-11-22/clean 1.json": jsonl(
        [
            {"id": 1, "ts": "2026-11-22T10:00:00Z", "s": {"y": 1, "x": "a"}, "tags": [], "opt": None},
            {"id": 2, "ts": "2026-11-22T11:00:00Z", "s": {"y": 2, "x": "b"}, "tags": ["t"], "amount": 1},
        ]
    ),
    "in/dt=2026-11-22/clean 2.json.gz": gzip.compress(
        jsonl([{"id": 3, "amount": 2.5, "opt": 7, "day": "2026-11-22"}, {"id": 4, "amount": 3}])
    ),
    "in/dt=2026-11-22/crlf+bom.json": b'\xef\xbb\xbf{"id": 5}\r\n{"id": 6, "opt": 8}\r\n',
    # files the fast path declines: blank lines, bad lines, a type conflict, invalid UTF-8
    "in/dt=2026-11-22/blank lines.json": b'{"id": 7}\n\n  \n{"id": 8}\n',
    "in/dt=2026-11-22/bad lines.json": b'{"id": 9}\nnot json\n{"id": 10,\n{"id": 11}\n',
    "in/dt=2026-11-22/bad utf8.json": b'{"id": 12, "note": "caf\xe9"}\n{"id": 13}\n',
}
# Within the batch that creates a table, a line whose type conflicts with other files' is avoided here:
# the line path infers over all files at once and widens such a column to string, while the fast path
# types the table from the clean files and records the conflicting line as an error (as it does for
# every later batch).
SECOND_BATCH = {  # the table exists now: its types hold, a new column is added, dt comes from the key
    "in/dt=2026-11-23/later.json": jsonl([{"id": 14, "extra": True}, {"id": 15, "amount": 4.5}]),
    "in/dt=2026-11-23/conflict.json": jsonl([{"id": 16}, {"id": 17, "amount": "lots"}]),
}


def both_paths(tmp_path: Any, **extra: str) -> dict[str, Any]:
    """Two JSON targets of the same objects: `fast` may take the fast path, `lines` takes the line path."""
    return {
        name: target_conf(
            name,
            str(tmp_path / name),
            "json",
            key__prefix="in/",
            json__fast__path=str(name == "fast").lower(),
            **extra,
        )
        for name in ("fast", "lines")
    }


def comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [{k: v for k, v in r.items() if k != "_ingested_at"} for r in rows]
    return sorted(out, key=lambda r: (r["_source_file"], r["_source_line"] or 0))


def test_fast_path_lands_the_same_rows_errors_and_schema_as_the_line_path(
    make_stack, s3, spark, tmp_path, caplog
):
    stack = make_stack()
    targets = both_paths(tmp_path, partition__by="dt", key__columns="dt")
    settings = settings_for(stack, targets)
    caplog.set_level(logging.INFO, logger="s3events")
    for files in (FIRST_BATCH, SECOND_BATCH):
        for key, body in files.items():
            s3.put_object(Bucket=stack.bucket, Key=key, Body=body)
        capture(stack)
        run_ingest(settings, once=True, spark=spark)

    fast, lines = (read_table(str(tmp_path / n)) for n in ("fast", "lines"))
    assert comparable(fast) == comparable(lines)
    assert sorted(r["id"] for r in fast) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 14, 15, 16]
    assert {r["dt"] for r in fast if r["id"] >= 14} == {"2026-11-23"}  # from the key, in a later batch
    by_id = {r["id"]: r for r in fast}
    assert by_id[1]["ts"] == "2026-11-22T10:00:00Z" and by_id[1]["s"] == {"x": "a", "y": 1}
    assert by_id[3]["amount"] == 2.5 and by_id[4]["amount"] == 3.0 and by_id[6]["opt"] == 8
    assert by_id[14]["extra"] is True and by_id[15]["amount"] == 4.5

    def errors(name: str) -> list[tuple[str, int, str]]:
        rows = read_table(str(tmp_path / f"{name}_errors"))
        return sorted((r["_source_file"].rsplit("/", 1)[1], r["_source_line"], r["raw"]) for r in rows)

    assert (
        errors("fast")
        == errors("lines")
        == [
            ("bad lines.json", 2, "not json"),
            ("bad lines.json", 3, '{"id": 10,'),
            ("bad utf8.json", 1, '{"id": 12, "note": "caf\ufffd"}'),
            ("conflict.json", 2, '{"id": 17, "amount": "lots"}'),
        ]
    )
    fast_schema, lines_schema = (DeltaTable(str(tmp_path / n)).schema().to_arrow() for n in ("fast", "lines"))
    assert {(f.name, str(f.type)) for f in fast_schema} == {(f.name, str(f.type)) for f in lines_schema}
    # the fast target really took the fast path for the clean files and declined the others
    declined = [r.getMessage() for r in caplog.records if "target fast:" in r.getMessage()]
    assert declined and all('"line_path"' in m for m in declined)
    assert any('"fast_files": 1' in m or '"fast_files": 2' in m for m in declined)


def test_a_target_partitioned_by_a_record_field_lands_each_row_in_its_partition_on_both_paths(
    make_stack, s3, spark, tmp_path
):
    # The line path groups the parsed rows by such a field before its post-parse stage runs (in the
    # write's own pass): each row must still land once, in its own partition.
    stack = make_stack()
    targets = both_paths(tmp_path, partition__by="country")
    rows = [{"id": i, "country": ["de", "fr", None][i % 3], "amount": i / 2} for i in range(30)]
    for part in range(3):
        s3.put_object(Bucket=stack.bucket, Key=f"in/part {part}.json", Body=jsonl(rows[part::3]))
    capture(stack)
    run_ingest(settings_for(stack, targets), once=True, spark=spark)

    fast, lines = (read_table(str(tmp_path / n)) for n in ("fast", "lines"))
    assert comparable(fast) == comparable(lines)
    assert sorted((r["id"], r["country"], r["amount"]) for r in lines) == sorted(
        (r["id"], r["country"], r["amount"]) for r in rows
    )
    added = pa.table(DeltaTable(str(tmp_path / "lines")).get_add_actions(flatten=True)).to_pylist()
    assert {a["partition.country"] for a in added} == {"de", "fr", None}
