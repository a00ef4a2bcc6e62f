"""Executors write Parquet files, the driver commits them with delta-rs: local paths and s3:// on moto."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable

from s3events.errors import CommitConflict, FatalError
from s3events.infra import aws
from s3events.infra.delta_commit import commit_files, transaction_versions
from s3events.infra.parquet_files import (
    WRITTEN_FILE_SCHEMA,
    WrittenFile,
    from_row,
    to_row,
    write_data_file,
    written_files_batch,
)

pytestmark = pytest.mark.integration

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("day", pa.string()),  # partition column
    ]
)
WIDER = SCHEMA.append(pa.field("extra", pa.string()))
T0 = datetime(2026, 5, 1, 0, 0, 0, 123456, tzinfo=UTC)


def rows(ids: range, **extra: Any) -> pa.RecordBatch:
    data: dict[str, Any] = {
        "id": list(ids),
        "name": [f"name-{i}" for i in ids],
        "ts": [T0.replace(second=i % 60) for i in ids],
        **extra,
    }
    fields = [SCHEMA.field(n) if n in SCHEMA.names else WIDER.field(n) for n in data]
    return pa.RecordBatch.from_pydict(data, schema=pa.schema(fields))


@pytest.fixture(params=["local", "s3"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, aws.AwsOptions, dict[str, str]]:
    """(table uri, AwsOptions for executors, storage options for delta-rs) on a local path or moto."""
    if request.param == "local":
        return str(tmp_path / "target"), aws.AwsOptions(region="us-east-1"), {}
    options: aws.AwsOptions = request.getfixturevalue("aws_options")
    bucket = f"lake-{uuid.uuid4().hex[:10]}"
    aws.client(options, "s3").create_bucket(Bucket=bucket)
    return f"s3://{bucket}/tables/target", options, aws.delta_storage_options(options)


def stored_size(uri: str, options: aws.AwsOptions, relative_path: str) -> int:
    if not uri.startswith("s3://"):
        return (Path(uri) / relative_path).stat().st_size
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    head = aws.client(options, "s3").head_object(Bucket=bucket, Key=f"{prefix}/{relative_path}")
    return int(head["ContentLength"])


def open_delta(uri: str, storage_options: dict[str, str]) -> DeltaTable:
    return DeltaTable(uri, storage_options=storage_options or None)


def test_write_commit_read_back_with_partitions_stats_and_app_transaction(location):
    uri, options, storage = location
    weird_day = "2026-05-02 a+b:c%/d"  # needs escaping in the directory name and again in the log
    first = write_data_file(
        [rows(range(0, 3)), rows(range(3, 5))],
        table_uri=uri,
        schema=SCHEMA,
        options=options,
        partition_values={"day": "2026-05-01"},
    )
    second = write_data_file(
        [rows(range(100, 103))],
        table_uri=uri,
        schema=SCHEMA,
        options=options,
        partition_values={"day": weird_day},
    )
    assert first is not None and second is not None
    assert (first.num_records, second.num_records) == (5, 3)
    assert first.path.startswith("day=2026-05-01/part-") and first.path.endswith(".parquet")
    assert second.path.startswith("day=2026-05-02%20a%2Bb%3Ac%25%2Fd/part-")
    assert stored_size(uri, options, first.path) == first.size
    assert stored_size(uri, options, second.path) == second.size

    # The files travel to the driver as Arrow rows (what a mapInArrow function yields).
    batch = written_files_batch([first, second])
    assert batch.schema.equals(WRITTEN_FILE_SCHEMA)
    files = [from_row(r) for r in batch.to_pylist()]
    assert files == [first, second]

    version = commit_files(
        uri,
        files,
        schema=SCHEMA,
        partition_by=["day"],
        storage_options=storage,
        transactions={"ingest-target": 7},
        configuration={"delta.enableChangeDataFeed": "true"},
        custom_metadata={"s3events.batch": "first"},
    )
    assert version == 0

    table = open_delta(uri, storage)
    assert table.version() == 0
    assert table.metadata().partition_columns == ["day"]
    assert table.metadata().configuration["delta.enableChangeDataFeed"] == "true"
    assert table.transaction_version("ingest-target") == 7
    assert table.history(1)[0]["s3events.batch"] == "first"
    got = sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["day"]) for r in got] == [(i, "2026-05-01") for i in range(5)] + [
        (i, weird_day) for i in range(100, 103)
    ]
    assert got[0]["name"] == "name-0" and got[0]["ts"] == T0

    actions = pa.table(table.get_add_actions(flatten=True)).to_pydict()
    assert sorted(actions["num_records"]) == [3, 5]
    assert sorted(actions["min.id"]) == [0, 100] and sorted(actions["max.id"]) == [4, 102]
    # Statistics are what readers skip files by: a filter on id touches only the matching file.
    dataset = table.to_pyarrow_dataset()
    assert len(list(dataset.get_fragments(filter=ds.field("id") >= 100))) == 1
    assert len(list(dataset.get_fragments(filter=ds.field("id") > 1000))) == 0
    assert transaction_versions(uri, ["ingest-target", "other"], storage) == {
        "ingest-target": 7,
        "other": None,
    }


def test_second_commit_with_a_new_nullable_column_evolves_the_schema(location):
    uri, options, storage = location
    old = write_data_file(
        [rows(range(3))], table_uri=uri, schema=SCHEMA, options=options, partition_values={"day": "d1"}
    )
    assert old is not None
    assert (
        commit_files(
            uri, [old], schema=SCHEMA, partition_by=["day"], storage_options=storage, transactions={"app": 1}
        )
        == 0
    )

    new = write_data_file(
        [rows(range(10, 12), extra=["x", None])],
        table_uri=uri,
        schema=WIDER,
        options=options,
        partition_values={"day": "d2"},
    )
    assert new is not None
    version = commit_files(
        uri, [new], schema=WIDER, partition_by=["day"], storage_options=storage, transactions={"app": 2}
    )

    table = open_delta(uri, storage)
    assert version == table.version() == 2  # 1 is the ADD COLUMN commit, 2 holds the files and txn
    assert table.history(2)[1]["operation"] == "ADD COLUMN"
    assert table.schema().to_arrow().names == WIDER.names
    assert table.transaction_version("app") == 2
    got = {r["id"]: r["extra"] for r in table.to_pyarrow_table().to_pylist()}
    assert got == {0: None, 1: None, 2: None, 10: "x", 11: None}


def test_table_properties_of_our_own_are_kept_when_the_table_is_created(tmp_path):
    uri = str(tmp_path / "own-props")
    options = aws.AwsOptions(region="us-east-1")
    written = write_data_file([rows(range(2))], table_uri=uri, schema=SCHEMA, options=options)
    assert written is not None
    # delta-kernel rejects unknown keys in create_table_with_add_actions; the table is created first.
    version = commit_files(
        uri,
        [written],
        schema=SCHEMA,
        partition_by=[],
        storage_options={},
        transactions={"app": 3},
        configuration={"s3events.schema.version": "1", "delta.enableChangeDataFeed": "true"},
    )
    table = DeltaTable(uri)
    assert version == table.version() == 1
    assert table.metadata().configuration["s3events.schema.version"] == "1"
    assert table.transaction_version("app") == 3
    assert sorted(r["id"] for r in table.to_pyarrow_table().to_pylist()) == [0, 1]


def test_commit_without_files_still_moves_the_app_transaction(tmp_path):
    uri = str(tmp_path / "only-txn")
    assert (
        commit_files(uri, [], schema=SCHEMA, partition_by=[], storage_options={}, transactions={"app": 1})
        == 0
    )
    assert (
        commit_files(uri, [], schema=SCHEMA, partition_by=[], storage_options={}, transactions={"app": 2})
        == 1
    )
    assert transaction_versions(uri, ["app"], {}) == {"app": 2}


def test_no_rows_writes_no_file(tmp_path):
    uri = str(tmp_path / "nothing")
    empty = rows(range(0))
    options = aws.AwsOptions(region="us-east-1")
    assert write_data_file([], table_uri=uri, schema=SCHEMA, options=options) is None
    assert write_data_file([empty], table_uri=uri, schema=SCHEMA, options=options) is None
    assert not Path(uri).exists()


def test_null_and_empty_partition_values_use_the_hive_default_partition(tmp_path):
    uri = str(tmp_path / "nulls")
    options = aws.AwsOptions(region="us-east-1")
    written = [
        write_data_file(
            [rows(range(i, i + 1))], table_uri=uri, schema=SCHEMA, options=options, partition_values=pv
        )
        for i, pv in enumerate([{"day": None}, {"day": ""}])
    ]
    assert all(w is not None and w.path.startswith("day=__HIVE_DEFAULT_PARTITION__/") for w in written)
    files = [w for w in written if w is not None]
    commit_files(uri, files, schema=SCHEMA, partition_by=["day"], storage_options={}, transactions={})
    assert [r["day"] for r in DeltaTable(uri).to_pyarrow_table().to_pylist()] == [None, None]


def test_statistics_bound_every_value_and_skip_what_cannot_be_bounded(tmp_path):
    schema = pa.schema(
        [
            ("ts", pa.timestamp("us", tz="UTC")),
            ("long_text", pa.string()),
            ("f", pa.float64()),
            ("d", pa.date32()),
            ("st", pa.struct([("x", pa.int64())])),
            ("raw", pa.binary()),
        ]
    )
    batch = pa.RecordBatch.from_pydict(
        {
            "ts": [
                datetime(2026, 1, 1, 0, 0, 0, 1500, tzinfo=UTC),
                datetime(2026, 1, 1, 0, 0, 0, 2500, tzinfo=UTC),
            ],
            "long_text": ["a" * 40, "b" * 40],
            "f": [1.0, float("nan")],
            "d": [datetime(2026, 1, 2).date(), None],
            "st": [{"x": 1}, None],
            "raw": [b"\x00", b"\x01"],
        },
        schema=schema,
    )
    written = write_data_file(
        [batch], table_uri=str(tmp_path / "stats"), schema=schema, options=aws.AwsOptions()
    )
    assert written is not None
    stats = json.loads(written.stats)
    assert stats["numRecords"] == 2
    assert stats["minValues"]["ts"] == "2026-01-01T00:00:00.001Z"  # rounded down
    assert stats["maxValues"]["ts"] == "2026-01-01T00:00:00.003Z"  # rounded up: still >= 2.5 ms
    assert stats["minValues"]["long_text"] == "a" * 32
    assert stats["maxValues"]["long_text"] == "b" * 31 + "c"  # > every string starting with 32 b's
    assert (
        "f" not in stats["minValues"] and "raw" not in stats["maxValues"] and "st" not in stats["minValues"]
    )
    assert stats["minValues"]["d"] == stats["maxValues"]["d"] == "2026-01-02"
    assert stats["nullCount"] == {"ts": 0, "long_text": 0, "f": 0, "d": 1, "st": {"x": 1}, "raw": 0}


def test_string_bounds_hold_every_batch_of_a_file_and_are_left_out_where_parquet_kept_none(tmp_path):
    # String bounds come from the Parquet writer's statistics, one row group per batch; a column named
    # like a nested leaf ("st.s") sits beside that leaf; a min or max too long for Parquet's statistics
    # leaves its column without bounds rather than with wrong ones.
    schema = pa.schema(
        [
            ("st", pa.struct([("s", pa.string())])),
            ("st.s", pa.string()),
            ("huge", pa.string()),
            ("empty", pa.string()),
            ("u", pa.large_string()),
        ]
    )

    def batch(st: list[str], flat: list[str], huge: list[str], u: list[str]) -> pa.RecordBatch:
        n = len(flat)
        data = {"st": [{"s": v} for v in st], "st.s": flat, "huge": huge, "empty": [None] * n, "u": u}
        return pa.RecordBatch.from_pydict(data, schema=schema)

    batches = [
        batch(["zzz", "zzz"], ["m", "k"], ["x", "y" * 10_000], ["é", "b"]),
        batch(["aaa", "aaa"], ["n", "é"], ["a", "b"], ["a", "c"]),
    ]
    written = write_data_file(batches, table_uri=str(tmp_path / "s"), schema=schema, options=aws.AwsOptions())
    assert written is not None
    stats = json.loads(written.stats)
    assert (stats["minValues"]["st.s"], stats["maxValues"]["st.s"]) == ("k", "é")  # bytes order: é > n
    assert (stats["minValues"]["u"], stats["maxValues"]["u"]) == ("a", "é")
    assert "huge" not in stats["minValues"] and "huge" not in stats["maxValues"]
    assert "empty" not in stats["minValues"] and stats["nullCount"]["empty"] == 4
    assert stats["nullCount"]["st"] == {"s": 0}


def test_written_file_round_trips_through_a_row():
    f = WrittenFile(
        "day=x/part-1.parquet", 10, 2, {"day": "x", "h": None}, 1_700_000_000_000, '{"numRecords":2}'
    )
    assert from_row(to_row(f)) == f


def test_changed_column_type_and_changed_partitioning_are_refused(tmp_path):
    uri = str(tmp_path / "strict")
    commit_files(uri, [], schema=SCHEMA, partition_by=["day"], storage_options={}, transactions={})
    retyped = pa.schema([f if f.name != "id" else pa.field("id", pa.string()) for f in SCHEMA])
    with pytest.raises(FatalError, match="column 'id' is"):
        commit_files(uri, [], schema=retyped, partition_by=["day"], storage_options={}, transactions={})
    with pytest.raises(FatalError, match="partitioned by"):
        commit_files(uri, [], schema=SCHEMA, partition_by=[], storage_options={}, transactions={})
    assert DeltaTable(uri).version() == 0  # nothing was committed by the refused calls


def test_batch_with_a_column_the_table_schema_lacks_is_refused_and_leaves_no_file(tmp_path):
    uri = str(tmp_path / "unknown-column")
    batch = rows(range(2), extra=["a", "b"])  # `extra` is not in SCHEMA
    with pytest.raises(ValueError, match="extra"):
        write_data_file([batch], table_uri=uri, schema=SCHEMA, options=aws.AwsOptions())
    assert not any(p.is_file() for p in Path(tmp_path).rglob("*.parquet"))


def test_commit_is_refused_when_another_writer_moved_the_app_transaction_since_the_caller_looked(tmp_path):
    uri = str(tmp_path / "raced")
    options = aws.AwsOptions(region="us-east-1")
    first = write_data_file([rows(range(2))], table_uri=uri, schema=SCHEMA, options=options)
    assert first is not None
    seen = transaction_versions(uri, ["app"], {})  # both writers look: no checkpoint yet
    commit_files(
        uri,
        [first],
        schema=SCHEMA,
        partition_by=[],
        storage_options={},
        transactions={"app": 1},
        expected_transactions=seen,
    )
    late = write_data_file([rows(range(2))], table_uri=uri, schema=SCHEMA, options=options)
    assert late is not None

    with pytest.raises(CommitConflict, match="another writer committed"):
        commit_files(
            uri,
            [late],
            schema=SCHEMA,
            partition_by=[],
            storage_options={},
            transactions={"app": 1},
            expected_transactions=seen,
        )

    table = DeltaTable(uri)
    assert table.version() == 0 and sorted(r["id"] for r in table.to_pyarrow_table().to_pylist()) == [0, 1]


def test_a_commit_based_on_a_version_is_refused_once_any_writer_committed_after_it(tmp_path):
    # A merge batch decides "the table holds none of these keys" on one version and commits its files
    # only as the very next one: any commit in between, whoever made it, may hold those keys.
    uri = str(tmp_path / "based")
    options = aws.AwsOptions(region="us-east-1")

    def written(ids: range) -> WrittenFile:
        f = write_data_file([rows(ids)], table_uri=uri, schema=SCHEMA, options=options)
        assert f is not None
        return f

    def commit(files: list[WrittenFile], app: str, based_on: int | None = None) -> int:
        return commit_files(
            uri,
            files,
            schema=SCHEMA,
            partition_by=[],
            storage_options={},
            transactions={app: 1},
            based_on=based_on,
        )

    commit([written(range(2))], "first")
    checked = DeltaTable(uri).version()
    commit([written(range(2, 4))], "other writer")  # not this app's transaction: only `based_on` can see it

    with pytest.raises(CommitConflict, match=f"moved past version {checked}"):
        commit([written(range(0, 1))], "mine", based_on=checked)
    assert commit([written(range(9, 10))], "mine", based_on=checked + 1) == checked + 2

    table = DeltaTable(uri)
    assert sorted(r["id"] for r in table.to_pyarrow_table().to_pylist()) == [0, 1, 2, 3, 9]
    assert transaction_versions(uri, ["mine"], {}) == {"mine": 1}
