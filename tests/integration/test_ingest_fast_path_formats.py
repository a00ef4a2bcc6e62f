"""The CSV, text and Parquet fast paths (pyarrow on executors) against the line path (Spark from_csv /
split lines / Spark's Parquet read), on the same files in the same batches: same rows, same lineage,
same error rows, same schema. Files the fast path declines (and batches it cannot split) still land
exactly as the line path lands them."""

from __future__ import annotations

import gzip
import io
import json
import logging
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from s3events.infra.parquet_files import STAGING_DIR
from s3events.ingest.service import build_ingest
from tests.conftest import read_table
from tests.integration.test_ingest import capture, settings_for, target_conf

pytestmark = pytest.mark.integration

HEADER = b"id,name,amount,ok,day\n"
CSV_BATCHES: list[dict[str, bytes]] = [
    {  # creates the table: every file is clean, so the fast path takes them all
        "csv/dt=2026-11-22/clean 1.csv": HEADER
        + b'1,"Smith, Jane",1.5,true,2026-11-22\n+2,,2,FALSE,hello\n007,"",-0.25,True,\n',
        "csv/dt=2026-11-22/clean 2.csv.gz": gzip.compress(
            HEADER + b"4,x,3,false,soon\n5,y,4.75,true,2026-11-23\n"
        ),
        "csv/dt=2026-11-22/crlf+bom.csv": b"\xef\xbb\xbf"
        + HEADER.replace(b"\n", b"\r\n")
        + b"6,z,5.5,true,\r\n",
    },
    {  # the table exists: its types hold; files the fast path declines go to the line path, one by one
        "csv/dt=2026-11-23/clean.csv": HEADER + b"10,a,1,true,x\n",
        "csv/dt=2026-11-23/blank lines.csv": HEADER + b"11,b,1,true,x\n\n   \n12,c,1,false,x\n",
        "csv/dt=2026-11-23/bad lines.csv": HEADER + b"13,d,1,true,x\n14,too,few\n15,e,1,true,x,extra\n",
        "csv/dt=2026-11-23/bad value.csv": HEADER + b"16,f,lots,true,x\n17,g,1,maybe,x\n18,h,1,true,x\n",
        "csv/dt=2026-11-23/bad utf8.csv": HEADER + b"19,caf\xe9,1,true,x\n20,i,1,true,x\n",
        "csv/dt=2026-11-23/quotes.csv": HEADER
        + b'21,"q""r",1,true,x\n22,"open,1,true,x\n23,j,1,true,"tail\n',
        "csv/dt=2026-11-23/multi-line.csv": HEADER + b'24,"two\nlines",1,true,x\n25,k,1,true,x\n',
        "csv/dt=2026-11-23/escape.csv": HEADER + b'26,"back\\"slash",1,true,x\n',
        "csv/dt=2026-11-23/header only.csv": HEADER,
        "csv/dt=2026-11-23/long int.csv": HEADER + b"99999999999,l,1,true,x\n",
        "csv/dt=2026-11-23/blank first line.csv": b"\n" + HEADER + b"27,m,1,true,x\n",
    },
    {  # a new column, clean files: the fast path types it
        "csv/dt=2026-11-24/wider 1.csv": HEADER.replace(b"\n", b",extra\n") + b"30,n,1,true,x,5000000000\n",
        "csv/dt=2026-11-24/wider 2.csv": HEADER.replace(b"\n", b",extra\n") + b"31,o,1,true,x,7000000000\n",
    },
    {  # headers differ: the line path names both files' columns after one header, so the whole batch
        # takes it
        "csv/dt=2026-11-25/a.csv": HEADER.replace(b"\n", b",extra\n") + b"40,p,1,true,x,1\n",
        "csv/dt=2026-11-25/b.csv": b"id,amount,name,ok,day,extra\n41,1,q,true,x,2\n",
    },
]
TEXT_BATCHES: list[dict[str, bytes]] = [
    {
        "text/dt=2026-11-22/a.txt": b"first line\n\nthird, after an empty one\n  indented\t\n",
        "text/dt=2026-11-22/crlf+bom.txt": b"\xef\xbb\xbfone\r\ntwo\r\n\r\nno newline at the end",
        "text/dt=2026-11-22/b.txt.gz": gzip.compress(b"zipped\n\xe2\x82\xac uro\n"),
        "text/dt=2026-11-22/bad utf8.txt": b"fine\ncaf\xe9\nfine again\n",
        "text/dt=2026-11-22/empty.txt": b"",
        "text/dt=2026-11-22/only newline.txt": b"\n",
    },
    {"text/dt=2026-11-23/later.txt": b'{"not": "parsed"}\nplain,csv,line\n'},
]



_UTC = pa.timestamp("us", "UTC")
_TAGS = pa.struct([("k", pa.string()), ("n", pa.int64())])


def parquet(table: pa.Table, *, row_group_size: int | None = None) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size)
    return sink.getvalue()


def orders(first: int, n: int, **extra: pa.Array) -> pa.Table:
    ids = list(range(first, first + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([None if i % 4 == 0 else f"n{i}" for i in ids], pa.string()),
            "amount": pa.array([i / 4 for i in ids], pa.float64()),
            "at": pa.array([datetime(2026, 11, 22, 1, i % 60, tzinfo=UTC) for i in ids], _UTC),
            "local": pa.array([datetime(2026, 11, 22, 2, i % 60) for i in ids], pa.timestamp("us")),
            "day": pa.array([date(2026, 11, 1 + i % 28) for i in ids], pa.date32()),
            "tags": pa.array([{"k": f"t{i}", "n": i} for i in ids], _TAGS),
            **extra,
        }
    )


def corrupt_second_row_group() -> bytes:
    """Two row groups, the second's column data garbled: readable until its first row (row 5)."""
    body = bytearray(parquet(orders(500, 10), row_group_size=5))
    second = pq.ParquetFile(io.BytesIO(bytes(body))).metadata.row_group(1).column(0)
    start = second.data_page_offset
    body[start + 20 : start + 60] = b"\xff" * 40
    return bytes(body)


INT32_ID = orders(400, 2).set_column(0, "id", pa.array([400, 401], pa.int32()))
WITH_LINEAGE = orders(600, 2).append_column("_source_line", pa.array([7, 8]))
NANOSECONDS = orders(800, 2).set_column(3, "at", pa.array([1, 2], pa.timestamp("ns", "UTC")))
WIDER = orders(900, 6, extra=pa.array(range(6), pa.int32()))

PARQUET_BATCHES: list[dict[str, bytes]] = [
    {  # creates the table: several row groups, every file clean
        "parquet/dt=2026-11-22/groups.parquet": parquet(orders(0, 25), row_group_size=7),
        "parquet/dt=2026-11-22/one.parquet": parquet(orders(100, 3)),
    },
    {  # the table exists, no new columns: declined files go to the Spark path in the same batch
        "parquet/dt=2026-11-23/clean.parquet": parquet(orders(200, 4), row_group_size=2),
        "parquet/dt=2026-11-23/truncated.parquet": parquet(orders(300, 4))[:-30],
        "parquet/dt=2026-11-23/not parquet.parquet": b"id,name\n1,x\n",
        "parquet/dt=2026-11-23/corrupt group.parquet": corrupt_second_row_group(),
        "parquet/dt=2026-11-23/int32 id.parquet": parquet(INT32_ID),
        "parquet/dt=2026-11-23/lineage.parquet": parquet(WITH_LINEAGE),
        "parquet/dt=2026-11-23/no rows.parquet": parquet(orders(0, 0)),
        "parquet/dt=2026-11-23/zipped.parquet.gz": gzip.compress(parquet(orders(700, 2))),
        "parquet/dt=2026-11-23/ns.parquet": parquet(NANOSECONDS),
    },
    {  # a file adds a column, the other lacks it: both clean, the fast path takes both
        "parquet/dt=2026-11-24/wider.parquet": parquet(WIDER, row_group_size=4),
        "parquet/dt=2026-11-24/narrower.parquet": parquet(orders(910, 2).drop_columns(["name"])),
    },
    {  # a new column and a declined file: the Spark path types new columns from every file at once
        "parquet/dt=2026-11-25/more.parquet": parquet(orders(1000, 2, more=pa.array(["a", "b"]))),
        "parquet/dt=2026-11-25/truncated.parquet": parquet(orders(1100, 2))[:-30],
    },
]


def jsonl(*rows: str) -> bytes:
    return "".join(row + "\n" for row in rows).encode()


MERGE_BATCHES: list[dict[str, bytes]] = [
    {  # creates the table; a key in several files and lines of one batch: one row per key survives
        "json/a.json": jsonl(
            '{"id": 1, "seq": 1, "v": "a1"}', '{"id": 2, "seq": 5, "v": "a2"}', '{"id": 3, "v": "a3"}'
        ),
        "json/b.json": jsonl(
            '{"id": 1, "seq": 2, "v": "b1"}', '{"id": 2, "seq": 4, "v": "b2"}', '{"id": 3, "v": "b3"}'
        ),
        "json/c bad line.json": jsonl(
            '{"id": 1, "seq": 3, "v": "c1"}', "not json", '{"id": 4, "seq": 1, "v": "c4"}'
        ),
        "json/d.json": jsonl('{"id": 5, "seq": 1, "v": "d5"}', '{"id": 5, "seq": 1, "v": "d5 later line"}'),
    },
    {  # the table exists: older and newer ordering values than it holds, and a declined file with keys of a
        # clean file (the two paths' rows reduce to one per key before the MERGE)
        "json/e.json": jsonl(
            '{"id": 1, "seq": 0, "v": "e1 older"}', '{"id": 2, "seq": 9, "v": "e2"}', '{"id": 6, "v": "e6"}'
        ),
        "json/f bad line.json": jsonl('{"id": 6, "seq": 1, "v": "f6"}', '{"id": 7,', '{"id": 2, "seq": 8}'),
    },
]


def comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [{k: v for k, v in r.items() if k != "_ingested_at"} for r in rows]
    return sorted(out, key=lambda r: (r["_source_file"], r["_source_line"] or 0))


def errors(path: str) -> list[tuple[str, int | None, str | None, str]]:
    if not Path(f"{path}_errors").exists():  # created with the first error row
        return []
    rows = read_table(f"{path}_errors")
    return sorted(
        ((r["_source_file"].rsplit("/", 1)[1], r["_source_line"], r["raw"], r["error"]) for r in rows),
        key=lambda e: (e[0], e[1] or 0),
    )


def schema(path: str) -> list[tuple[str, str]]:
    return [(f.name, str(f.type)) for f in pa.schema(DeltaTable(path).schema().to_arrow())]


# Where the fast target's tasks run: threads of the driver (a small batch, the default) or a Spark job.
WHERE = pytest.mark.parametrize("where", ["driver", "spark-job"])


def run_both(
    make_stack,
    s3,
    spark,
    tmp_path,
    caplog,
    fmt: str,
    batches: list[dict[str, bytes]],
    where: str = "driver",
    partition_by: str | None = "dt",
    one_path: bool = False,
    **extra: object,
) -> list[int]:
    """Each batch through a fast target and a line-path target; the fast target's fast-path file counts.
    A format with `one_path` has no `<format>.fast.path`: both targets read every file on it."""
    caplog.set_level(logging.DEBUG, logger="s3events.ingest.files.fast_path")
    stack = make_stack()
    driver_read = {"driver__read__max__bytes": 64 << 20 if where == "driver" else 0}
    targets = {
        name: target_conf(
            name,
            str(tmp_path / name),
            fmt,
            key__prefix=f"{fmt}/",
            **({"partition__by": partition_by, "key__columns": partition_by} if partition_by else {}),
            **({} if one_path else {f"{fmt}__fast__path": str(name == "fast").lower()}),
            **driver_read,
            **extra,
        )
        for name in ("fast", "lines")
    }
    settings = settings_for(stack, targets)
    fast_files = []
    for files in batches:
        for key, body in files.items():
            s3.put_object(Bucket=stack.bucket, Key=key, Body=body)
        capture(stack)
        reports = build_ingest(settings, spark=spark).run_once().batches
        assert {r.target for r in reports} == {"fast", "lines"}
        lines_fast = [r.fast_path_files for r in reports if r.target == "lines"]
        assert lines_fast == ([r.fast_path_files for r in reports if r.target == "fast"] if one_path else [0])
        fast_files.append(sum(r.fast_path_files for r in reports if r.target == "fast"))
    in_driver = [r for r in caplog.records if "read in the driver" in r.getMessage()]
    assert bool(in_driver) == (where == "driver")
    fast, lines = (str(tmp_path / n) for n in ("fast", "lines"))
    assert comparable(read_table(fast)) == comparable(read_table(lines))
    assert errors(fast) == errors(lines)
    assert schema(fast) == schema(lines)
    return fast_files


@WHERE
def test_csv_fast_path_lands_the_same_rows_errors_and_schema_as_the_line_path(
    where, make_stack, s3, spark, tmp_path, caplog
):
    fast_files = run_both(make_stack, s3, spark, tmp_path, caplog, "csv", CSV_BATCHES, where)

    assert fast_files == [3, 1, 2, 0]  # all; only clean.csv; both; none (the headers differ)
    rows = {r["id"]: r for r in read_table(str(tmp_path / "fast")) if r["id"] is not None}
    assert schema(str(tmp_path / "fast"))[4:] == [
        ("id", "int32"),
        ("name", "string"),
        ("amount", "double"),
        ("ok", "bool"),
        ("day", "string"),
        ("dt", "string"),
        ("_ingested_at", "timestamp[us, tz=UTC]"),
        ("extra", "int64"),
    ]
    assert (rows[1]["name"], rows[1]["_source_line"], rows[1]["dt"]) == ("Smith, Jane", 2, "2026-11-22")
    assert (rows[2]["name"], rows[2]["ok"], rows[7]["name"]) == (None, False, None)  # "+2", "", '""'
    assert rows[6]["_source_line"] == 2
    assert (rows[30]["extra"], rows[31]["extra"]) == (5_000_000_000, 7_000_000_000)
    assert rows[23]["day"] == "tail"  # an unterminated quote at the end of a line: Spark keeps the rest
    by_file: dict[str, list[int | None]] = {}
    for file, line, _raw, _error in errors(str(tmp_path / "fast")):
        by_file.setdefault(file, []).append(line)
    assert by_file == {
        "bad lines.csv": [3, 4],
        "bad value.csv": [2, 3],
        "bad utf8.csv": [2],
        "quotes.csv": [3],
        "multi-line.csv": [2, 3],
        "long int.csv": [2],
        "blank first line.csv": [2],  # its header is data to the line path (its line 1 is blank)
        # a.csv, b.csv (headers differ): whatever the line path makes of them, the fast target has too
        **{k: v for k, v in by_file.items() if k in ("a.csv", "b.csv")},
    }


def test_text_files_land_their_lines_and_error_rows_on_one_path(make_stack, s3, spark, tmp_path, caplog):
    fast_files = run_both(make_stack, s3, spark, tmp_path, caplog, "text", TEXT_BATCHES, one_path=True)

    assert fast_files == [6, 1]  # every file: text has one path
    rows = comparable(read_table(str(tmp_path / "fast")))
    crlf = [r["value"] for r in rows if r["_source_file"].endswith("crlf+bom.txt")]
    assert crlf == ["one", "two", "", "no newline at the end"]
    assert [r["value"] for r in rows if r["_source_file"].endswith("only newline.txt")] == [""]
    assert [r for r in rows if r["_source_file"].endswith("empty.txt")] == []
    bad = [(r["_source_line"], r["value"]) for r in rows if r["_source_file"].endswith("bad utf8.txt")]
    assert bad == [(1, "fine"), (3, "fine again")]  # the file's other lines land
    assert errors(str(tmp_path / "fast")) == [
        ("bad utf8.txt", 2, "caf\ufffd", "line is not valid UTF-8 (unexpected end of data at byte 3)")
    ]


@WHERE
def test_parquet_files_land_their_rows_and_error_rows_on_one_path(
    where, make_stack, s3, spark, tmp_path, caplog
):
    fast_files = run_both(
        make_stack, s3, spark, tmp_path, caplog, "parquet", PARQUET_BATCHES, where, one_path=True
    )

    assert fast_files == [2, 9, 2, 2]  # every file: Parquet has one path
    rows = comparable(read_table(str(tmp_path / "fast")))
    groups = [r for r in rows if r["_source_file"].endswith("groups.parquet")]
    assert [r["_source_line"] for r in groups] == list(range(25))  # the row index across row groups
    assert [r["id"] for r in groups] == list(range(25))
    assert {r["dt"] for r in groups} == {"2026-11-22"}
    assert [r["extra"] for r in rows if r["_source_file"].endswith("wider.parquet")] == list(range(6))
    # A corrupt later row group: the file lands no rows and one error row (all or nothing, as for text).
    assert [r for r in rows if r["_source_file"].endswith("corrupt group.parquet")] == []
    assert [r["id"] for r in rows if r["_source_file"].endswith("int32 id.parquet")] == [400, 401]
    recorded = errors(str(tmp_path / "fast"))
    failed = {file for file, line, _raw, _error in recorded if line is None}
    assert {"truncated.parquet", "not parquet.parquet", "lineage.parquet", "zipped.parquet.gz"} <= failed
    corrupt_reasons = [error for file, _line, _raw, error in recorded if file == "corrupt group.parquet"]
    assert len(corrupt_reasons) == 1 and corrupt_reasons[0], corrupt_reasons
    assert [r["more"] for r in rows if r["_source_file"].endswith("more.parquet")] == ["a", "b"]
    assert {file for file, *_ in recorded} == failed  # "no rows.parquet": no rows, no error row


@WHERE
def test_merge_mode_fast_path_keeps_the_same_latest_row_per_key_as_the_line_path(
    where, make_stack, s3, spark, tmp_path, caplog
):
    merge = {"mode": "merge", "record__key": "id", "ordering__field": "seq"}
    fast_files = run_both(make_stack, s3, spark, tmp_path, caplog, "json", MERGE_BATCHES, where, **merge)

    assert fast_files == [3, 1]  # the files with a bad line took the line path
    landed = read_table(str(tmp_path / "fast"))
    rows = {r["id"]: (r["v"], r["_source_file"].rsplit("/", 1)[1]) for r in landed}
    assert rows == {
        1: ("c1", "c bad line.json"),  # the largest seq, from the line path's file
        2: ("e2", "e.json"),
        3: ("b3", "b.json"),  # no seq: the later file
        4: ("c4", "c bad line.json"),
        5: ("d5 later line", "d.json"),
        6: ("f6", "f bad line.json"),  # a seq beats none
    }
    recorded = [(e[0], e[1]) for e in errors(str(tmp_path / "fast"))]
    assert recorded == [("c bad line.json", 2), ("f bad line.json", 2)]
    # executors hand their rows over through the table's staging directory, emptied after
    for name in ("fast", "lines"):
        staging = tmp_path / name / STAGING_DIR
        assert staging.is_dir() and not list(staging.glob("*"))


NEW_KEY_BATCHES: list[dict[str, bytes]] = [
    {  # creates the table; a key twice in one file (its task keeps one), no key in two files
        "json/dt=1/a.json": jsonl('{"id": 1, "seq": 1, "v": "a1"}', '{"id": 1, "seq": 2, "v": "a1 later"}'),
        "json/dt=2/b.json": jsonl('{"id": 2, "seq": 1, "v": "b2"}', '{"id": 3, "v": "b3"}'),
    },
    {  # ids above the held ones
        "json/dt=2/c.json": jsonl('{"id": 4, "seq": 1, "v": "c4"}'),
        "json/no partition/d.json": jsonl('{"id": 5, "seq": 1, "v": "d5"}', '{"id": 6, "seq": 1, "v": "d6"}'),
    },
    {"json/dt=3/e.json": jsonl('{"id": 2, "seq": 2, "v": "e2 update"}', '{"id": 7, "v": "e7"}')},  # a held id
    {  # a new id in two files, so in two tasks: the driver reads their rows back to keep one
        "json/dt=3/f.json": jsonl('{"id": 8, "seq": 1, "v": "f8"}'),
        "json/dt=4/g.json": jsonl('{"id": 8, "seq": 3, "v": "g8"}', '{"id": 9, "v": "g9"}'),
    },
]


@WHERE
@pytest.mark.parametrize("partition_by", [None, "dt"])
def test_merge_mode_commits_the_tasks_files_for_new_keys_and_merges_the_rest_as_the_line_path_does(
    where, partition_by, make_stack, s3, spark, tmp_path, caplog
):
    merge = {"mode": "merge", "record__key": "id", "ordering__field": "seq", "max__files__per__batch": 2}
    fast_files = run_both(
        make_stack, s3, spark, tmp_path, caplog, "json", NEW_KEY_BATCHES, where, partition_by, **merge
    )

    assert fast_files == [2, 2, 1, 2]
    fast = str(tmp_path / "fast")
    landed = {r["id"]: r["v"] for r in read_table(fast)}
    if partition_by:  # each row in its file's partition; rows read back for a MERGE keep theirs
        partitions = {r["id"]: r["dt"] for r in read_table(fast)}
        assert partitions == {1: "1", 2: "3", 3: "2", 4: "2", 5: None, 6: None, 7: "3", 8: "4", 9: "4"}
    assert landed == {
        1: "a1 later",
        2: "e2 update",
        3: "b3",
        4: "c4",
        5: "d5",
        6: "d6",
        7: "e7",
        8: "g8",
        9: "g9",
    }
    # The batches of new keys held in no two tasks are committed as the files the tasks wrote (by the
    # commit that names its files' writer); the update is a MERGE; the key in two tasks' files is
    # appended by the driver once it has kept one row of it.
    history = sorted(DeltaTable(fast).history(), key=lambda c: c["version"])
    data = [c for c in history if c["operation"] in ("WRITE", "MERGE")]
    assert [(c["operation"], "s3events.commitId" in c) for c in data] == [
        ("WRITE", True),
        ("WRITE", True),
        ("MERGE", False),
        ("WRITE", False),
    ]
    # Written rows that were read back for a MERGE or a reduction left no file behind, nor staged keys.
    actions = [json.loads(line) for log in Path(fast, "_delta_log").glob("*.json") for line in log.open()]
    ever_added = {a[kind]["path"] for a in actions for kind in ("add", "cdc") if kind in a}
    on_disk = {str(p.relative_to(fast)) for p in Path(fast).rglob("*.parquet") if "_delta_log" not in p.parts}
    assert on_disk <= ever_added
    assert not list(Path(fast, STAGING_DIR).glob("*"))


def test_merge_mode_on_executors_where_one_task_s_files_lack_the_key_keeps_what_the_line_path_keeps(
    make_stack, s3, spark, tmp_path, caplog
):
    # Two files, two tasks: one task's rows have no key column to reduce by (a task cannot group by it;
    # it sends its rows back whole), the other's do. A missing key is null, a key of its own.
    batch = {
        "json/a.json": jsonl('{"v": "no id 1", "seq": 1}', '{"v": "no id 2", "seq": 2}'),
        "json/b.json": jsonl('{"id": 1, "seq": 1, "v": "b"}'),
    }
    merge = {"mode": "merge", "record__key": "id", "ordering__field": "seq"}
    fast_files = run_both(make_stack, s3, spark, tmp_path, caplog, "json", [batch], "spark-job", **merge)

    assert fast_files == [2]
    landed = sorted((r["id"] or 0, r["v"]) for r in read_table(str(tmp_path / "fast")))
    assert landed == [(0, "no id 2"), (1, "b")]
