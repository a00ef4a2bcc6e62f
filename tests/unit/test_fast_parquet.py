"""The Parquet parser (Parquet's one path) and its row-group streaming: a file's rows and lineage (the row
index, the casts Spark's types need), or the file's one error row, also mid-file, and then the task takes
back whatever it had written of it."""

from __future__ import annotations

import gzip
import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from s3events.infra.parquet_files import WrittenFile, to_row
from s3events.ingest.files import fast_task
from s3events.ingest.files.formats.base import FileDeclined, FileFailed
from s3events.ingest.files.formats.parquet_format import ParquetParser, spark_keeps
from s3events.ingest.model import FileRef
from tests.unit.conftest import file_ref


def parquet(table: pa.Table, **options: Any) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def parts(parser: ParquetParser, data: bytes, key: str = "a.parquet") -> list[pa.Table]:
    parsed = parser.parse(data, file_ref(key), "etag-1", {})
    assert parsed.parts is not None, parsed.reason
    return list(parsed.parts)


def reason(parser: ParquetParser, data: bytes, key: str = "a.parquet") -> str | None:
    parsed = parser.parse(data, file_ref(key), "etag-1", {})
    assert parsed.parts is None and parsed.table is None and parsed.failed  # an error row, not a decline
    return parsed.reason


def test_row_groups_stream_in_parts_with_the_row_index_as_source_line():
    data = parquet(pa.table({"id": list(range(10)), "name": [f"n{i}" for i in range(10)]}), row_group_size=3)

    got = parts(ParquetParser(pa.schema([]), batch_rows=3), data)

    assert [t.num_rows for t in got] == [3, 3, 3, 1]
    whole = pa.concat_tables(got)
    assert whole.column_names == ["_source_file", "_source_etag", "_source_line", "_event_time", "id", "name"]
    assert whole["_source_line"].to_pylist() == list(range(10))  # the 0-based row index
    assert set(whole["_source_etag"].to_pylist()) == {"etag-1"}
    assert whole["id"].to_pylist() == list(range(10))


def test_columns_are_cast_as_the_spark_path_casts_them():
    table = pa.table(
        {
            "id": pa.array([1, 2], pa.int32()),
            "at": pa.array([1_500, 2_500], pa.timestamp("ns", "UTC")),
            "big": pa.array(["x", "y"], pa.large_string()),
        }
    )
    known = pa.schema([("id", pa.int64())])

    got = pa.concat_tables(parts(ParquetParser(known), parquet(table)))

    assert got.schema.field("id").type == pa.int64()  # the table's type
    assert got.schema.field("at").type == pa.timestamp("us", "UTC")  # what Spark gives back
    assert got["at"].cast(pa.int64()).to_pylist() == [1, 2]  # truncated, as cast(safe=False) does
    assert got.schema.field("big").type == pa.string()


@pytest.mark.parametrize(
    ("key", "table", "why"),
    [
        ("a.parquet.gz", pa.table({"id": [1]}), "not a readable Parquet file: its key says gzip"),
        ("a.parquet", pa.table({"id": [1], "_source_line": [5]}), "lineage column"),
        ("a.parquet", pa.table({"id": [1], "ID": [2]}), "case"),
        ("a.parquet", pa.table({"Name": ["x"]}), "case"),  # the table has `name`
        ("a.parquet", pa.table({"u": pa.array([1], pa.uint32())}), "no type"),
    ],
)
def test_files_whose_rows_spark_could_not_give_are_one_error_row(key, table, why):
    data = parquet(table)
    if key.endswith(".gz"):
        data = gzip.compress(data)  # fetch decompresses by extension; the Spark path does not

    assert why in (reason(ParquetParser(pa.schema([("name", pa.string())])), data, key) or "")


def test_an_all_null_column_stays_open_and_a_file_without_rows_gives_no_rows_and_no_columns():
    [nulls] = parts(ParquetParser(pa.schema([])), parquet(pa.table({"n": pa.nulls(2)})))
    assert nulls.schema.field("n").type == pa.null()  # the table decides its type
    parsed = ParquetParser(pa.schema([])).parse(
        parquet(pa.table({"id": pa.array([], pa.int64())})), file_ref("a.parquet"), "e", {}
    )
    assert parsed.table is not None and parsed.table.num_rows == 0 and "id" not in parsed.table.column_names


def test_a_file_that_is_not_parquet_is_one_error_row():
    assert "not a readable Parquet file" in (reason(ParquetParser(pa.schema([])), b"id,name\n1,x\n") or "")
    truncated = parquet(pa.table({"id": [1, 2]}))[:-20]
    assert "not a readable Parquet file" in (reason(ParquetParser(pa.schema([])), truncated) or "")


def test_a_corrupt_later_row_group_fails_the_file_while_streaming():
    body = bytearray(parquet(pa.table({"id": list(range(10))}), row_group_size=5, compression="snappy"))
    chunk = pq.ParquetFile(io.BytesIO(bytes(body))).metadata.row_group(1).column(0)
    body[chunk.data_page_offset : chunk.data_page_offset + 40] = b"\xff" * 40
    parsed = ParquetParser(pa.schema([]), batch_rows=5).parse(bytes(body), file_ref("a.parquet"), "e", {})
    assert parsed.parts is not None

    with pytest.raises(FileFailed, match="corrupt Parquet data"):
        list(parsed.parts)


def test_spark_keeps_only_types_it_gives_back():
    assert spark_keeps(pa.int64()) and spark_keeps(pa.timestamp("us", "UTC"))
    assert not spark_keeps(pa.timestamp("ns", "UTC")) and not spark_keeps(pa.uint8())


# -- the task: a file's parts past the flush bound ------------------------------------------------------


class Task:
    """`_take_parts` with fake flush/finish/remove: flushes are recorded, written files named by rows."""

    def __init__(self) -> None:
        self.flushed: list[list[str]] = []
        self.removed: list[str] = []
        self.errors: list[pa.Table] = []

    def flush(self, pending: list[tuple[FileRef, pa.Table]]) -> list[dict[str, object]]:
        if not pending:
            return []
        self.flushed.append([ref.key for ref, _ in pending])
        path = f"file-{len(self.flushed)}"
        rows = sum(t.num_rows for _, t in pending)
        return [{**to_row(WrittenFile(path, 1, rows)), "schema": b""}]

    def remove(self, files: list[WrittenFile]) -> None:
        self.removed.extend(f.path for f in files)

    def take(self, ref: FileRef, parts: Any, pending: list[tuple[FileRef, pa.Table]], out: list[Any]) -> int:
        return fast_task.take_parts(
            ref, parts, pending, 0, out, self.flush, lambda t, _uri: t, self.remove, self.errors
        )


def part(n: int) -> pa.Table:
    return pa.table({"v": pa.array(range(n), pa.int64())})


def failing_after(count: int) -> Any:
    for _ in range(count):
        yield part(100)
    raise FileDeclined("corrupt Parquet data after row 200")


def test_a_large_file_is_written_apart_and_taken_back_when_a_later_part_fails(monkeypatch):
    monkeypatch.setattr(fast_task, "_FLUSH_BYTES", 1000)  # two parts of 100 int64 values reach it
    task, other = Task(), (file_ref("other.parquet"), part(10))
    pending, out = [other], []

    held = task.take(file_ref("big.parquet"), failing_after(3), pending, out)

    assert task.flushed == [["other.parquet"], ["big.parquet", "big.parquet"]]  # never mixed
    assert task.removed == ["file-2"]  # what it had written of the declined file
    assert [r.get("path") for r in out] == ["file-1", None]
    assert out[-1] == {"event_id": "ev1", "reason": "corrupt Parquet data after row 200"}
    assert pending == [] and held == 0


def test_a_single_path_file_failing_after_a_flush_is_one_error_row_instead_of_a_decline(monkeypatch):
    monkeypatch.setattr(fast_task, "_FLUSH_BYTES", 1000)
    task, pending, out = Task(), [], []

    def failing() -> Any:
        yield from [part(100)] * 3
        raise FileFailed("corrupt Parquet data after row 300")

    held = task.take(file_ref("big.parquet"), failing(), pending, out)

    assert task.removed == ["file-1"] and [r.get("path") for r in out] == []
    assert [
        (e["_source_file"], e["_source_line"], e["error"]) for t in task.errors for e in t.to_pylist()
    ] == [(file_ref("big.parquet").uri, None, "corrupt Parquet data after row 300")]
    assert pending == [] and held == 0


def test_a_large_file_that_reads_to_the_end_keeps_its_own_data_files(monkeypatch):
    monkeypatch.setattr(fast_task, "_FLUSH_BYTES", 1000)
    task, pending, out = Task(), [], []

    held = task.take(file_ref("big.parquet"), iter([part(100)] * 3), pending, out)

    assert task.flushed == [["big.parquet"] * 2, ["big.parquet"]] and task.removed == []
    assert [r["num_records"] for r in out] == [200, 100]
    assert pending == [] and held == 0


def test_a_small_file_stays_pending_with_the_others():
    task, other = Task(), (file_ref("other.parquet"), part(10))
    pending, out = [other], []

    held = task.take(file_ref("small.parquet"), iter([part(10), part(10)]), pending, out)

    assert task.flushed == [] and out == []
    assert [ref.key for ref, _ in pending] == ["other.parquet", "small.parquet", "small.parquet"]
    assert held == 2 * part(10).nbytes
