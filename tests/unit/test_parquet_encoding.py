"""How data files are encoded: a dictionary only where values repeat, row groups not cut at chunks."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from s3events.infra.aws import AwsOptions
from s3events.infra.parquet_files import dictionary_columns, write_data_file

LOCAL = AwsOptions(region="us-east-1")
ROWS = 5000


def orders(first: int) -> pa.Table:
    ids = range(first, first + ROWS)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "note": [f"order {i} of many" for i in ids],  # unique text
            "country": [("DE", "FR", "US")[i % 3] for i in ids],
            "ok": [i % 2 == 0 for i in ids],
            "tags": [{"kind": "a", "codes": [i, 1]} for i in ids],
        }
    )


def encodings(path: Path) -> dict[str, set[str]]:
    row_group = pq.ParquetFile(path).metadata.row_group(0)
    return {
        row_group.column(i).path_in_schema: set(row_group.column(i).encodings)
        for i in range(row_group.num_columns)
    }


def test_unique_columns_are_written_plain_and_repeating_ones_with_a_dictionary(tmp_path: Path) -> None:
    table = orders(0)
    written = write_data_file([table], table_uri=str(tmp_path), schema=table.schema, options=LOCAL)

    assert written is not None
    used = encodings(tmp_path / written.path)
    assert "RLE_DICTIONARY" not in used["id"] and "RLE_DICTIONARY" not in used["note"]
    assert "RLE_DICTIONARY" in used["country"]
    # nested columns keep a dictionary on every leaf, as before
    assert "RLE_DICTIONARY" in used["tags.kind"] and "RLE_DICTIONARY" in used["tags.codes.list.element"]
    assert pq.read_table(tmp_path / written.path).equals(table)


def test_the_encoding_is_chosen_from_the_first_rows_of_each_column() -> None:
    repeating_later = pa.table({"v": [str(i) for i in range(2000)] + ["x"] * 50_000})
    assert dictionary_columns(repeating_later) == []
    assert dictionary_columns(pa.table({"v": ["x"] * 10, "n": pa.nulls(10, pa.string())})) == ["v", "n"]
    assert dictionary_columns(pa.table({"v": ["a", "b", "c"]})) == []


def test_a_table_of_many_chunks_is_one_row_group(tmp_path: Path) -> None:
    table = pa.concat_tables([orders(i * ROWS) for i in range(4)])
    assert table.column("id").num_chunks == 4

    written = write_data_file([table], table_uri=str(tmp_path), schema=table.schema, options=LOCAL)

    assert written is not None and written.num_records == 4 * ROWS
    stored = pq.ParquetFile(tmp_path / written.path)
    assert stored.metadata.num_row_groups == 1
    assert stored.read().equals(table.combine_chunks())
    assert '"minValues":{"id":0,' in written.stats and f'"id":{4 * ROWS - 1},' in written.stats
