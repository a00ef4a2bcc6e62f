"""A partition value written into the log (`partition_value`) reads back as the value Delta readers see
(`partition_column`): what a merge batch's written files hold when the driver reads them back."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from s3events.infra.aws import AwsOptions
from s3events.infra.parquet_files import WrittenFile, partition_column, partition_value, write_partitioned

T = datetime(2026, 3, 1, 12, 0, 0, 250000)


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        (pa.string(), "a b/c=d%"),
        (pa.large_string(), "x"),
        (pa.int8(), -5),
        (pa.int64(), 2**40),
        (pa.uint32(), 7),
        (pa.float64(), 1.5),
        (pa.float32(), 0.1),
        (pa.bool_(), False),
        (pa.date32(), date(2026, 3, 1)),
        (pa.decimal128(5, 2), Decimal("-12.50")),
        (pa.timestamp("us", tz="UTC"), T.replace(tzinfo=UTC)),
        (pa.timestamp("us"), T),
        (pa.timestamp("ms"), T),
        (pa.timestamp("s", tz="Europe/Paris"), T.replace(microsecond=0, tzinfo=UTC)),
        (pa.timestamp("ns", tz="UTC"), T.replace(microsecond=1, tzinfo=UTC)),
    ],
)
def test_a_written_partition_value_reads_back_as_the_same_value_of_its_type(kind: pa.DataType, value):
    original = pa.array([value], kind)

    back = partition_column(partition_value(original[0].as_py()), kind, 3)

    assert back.type == kind
    assert back.to_pylist() == original.to_pylist() * 3


def test_a_null_partition_value_reads_back_as_nulls_of_the_column_type():
    back = partition_column(None, pa.int32(), 2)

    assert back.type == pa.int32() and back.to_pylist() == [None, None]


def test_a_value_that_is_not_of_the_column_type_is_refused():
    with pytest.raises(pa.ArrowInvalid):
        partition_column("not a number", pa.int64(), 1)


def _write(
    tmp_path: Path, rows: pa.Table, schema: pa.Schema, partition_by: tuple[str, ...]
) -> list[WrittenFile]:
    return write_partitioned(
        rows,
        table_uri=str(tmp_path),
        schema=schema,
        options=AwsOptions(region="us-east-1"),
        partition_by=partition_by,
    )


def test_rows_that_lack_a_partition_column_land_in_its_null_partition(tmp_path: Path):
    """A fast-path task whose files hold the partition field null throughout drops the all-null column
    (its type is the table's to decide): its rows are the null partition's, not a failed batch."""
    rows = pa.table({"id": [1, 2], "amount": [0.5, 1.0]})
    schema = pa.schema([("id", pa.int64()), ("amount", pa.float64()), ("country", pa.string())])
    written = _write(tmp_path, rows, schema, ("country",))
    assert [w.partition_values for w in written] == [{"country": None}]
    assert pq.read_table(tmp_path / written[0].path).to_pylist() == rows.to_pylist()


def test_rows_are_split_by_the_partition_columns_they_hold_and_null_in_those_they_lack(tmp_path: Path):
    rows = pa.table({"id": [1, 2, 3], "day": ["a", None, "a"]})
    schema = pa.schema([("id", pa.int64()), ("day", pa.string()), ("country", pa.string())])
    written = _write(tmp_path, rows, schema, ("day", "country"))
    got = {(w.partition_values["day"], w.partition_values["country"]): w.num_records for w in written}
    assert got == {("a", None): 2, (None, None): 1}
