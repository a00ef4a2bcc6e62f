"""The post-parse stage's Arrow rules, which both paths run: `finish` on a file's rows and the schema
the line path's mapInArrow declares for them (`finished_schema`), which must be exactly what `finish`
gives, aligned to the table's schema."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from s3events.ingest.files.key_columns import KeyColumns
from s3events.ingest.files.lineage import INGESTED_AT, LINEAGE_FIELDS, lineage_columns
from s3events.ingest.files.merge_input import conform
from s3events.ingest.files.post_parse import finish, finished_schema
from s3events.ingest.model import FileRef

AT = datetime(2026, 11, 27, 12, tzinfo=UTC)
REF = FileRef("b", "in/dt=2026-11-27/a.json", "e1", None, 10, AT, "in/dt=2026-11-27/a.json", "created", 1)
KEYED = KeyColumns(hive=("dt",), types=(("dt", "date"),))


def parsed(**columns: pa.Array) -> pa.Table:
    rows = len(next(iter(columns.values())))
    lineage = lineage_columns(REF, REF.etag, 1, rows)
    data = pa.table(columns)
    return pa.Table.from_arrays([*lineage, *data.columns], schema=pa.schema([*LINEAGE_FIELDS, *data.schema]))


def test_the_declared_schema_is_the_one_finish_gives_key_columns_rescued_last_then_ingested_at():
    table = parsed(id=pa.array([1, 2]), _rescued=pa.array(['{"x":1}', None]), note=pa.array(["a", "b"]))
    done = finish(table, REF.uri, key_columns=KEYED, ingested_at=AT, rescued="_rescued")
    schema = finished_schema(table.schema, None, key_columns=KEYED, rescued="_rescued")
    assert done.schema.names == schema.names
    assert conform(done, schema).schema == schema
    assert schema.names[-4:] == ["note", "dt", "_rescued", INGESTED_AT]
    assert schema.field("dt").type == pa.date32()
    assert done["dt"].to_pylist() == [datetime(2026, 11, 27).date()] * 2


def test_rows_are_aligned_to_the_table_its_columns_first_absent_ones_null_then_new_ones():
    existing = pa.schema(
        [*LINEAGE_FIELDS, ("old", pa.string()), ("id", pa.int64()), (INGESTED_AT, pa.timestamp("us", "UTC"))]
    )
    table = parsed(id=pa.array([7]), new=pa.array([True]))
    schema = finished_schema(table.schema, existing)
    assert schema.names == [*existing.names, "new"]
    rows = conform(finish(table, REF.uri, key_columns=None, ingested_at=AT), schema).to_pylist()
    assert (rows[0]["old"], rows[0]["id"], rows[0]["new"], rows[0][INGESTED_AT]) == (None, 7, True, AT)


def test_schema_evolution_ignore_keeps_only_the_table_s_columns_and_the_rescued_one():
    existing = pa.schema([*LINEAGE_FIELDS, ("id", pa.int64()), (INGESTED_AT, pa.timestamp("us", "UTC"))])
    keep = frozenset([*existing.names, "_rescued"])
    table = parsed(id=pa.array([1]), extra=pa.array(["dropped"]))
    schema = finished_schema(table.schema, existing, key_columns=KEYED, keep=keep, rescued="_rescued")
    done = finish(table, REF.uri, key_columns=KEYED, ingested_at=AT, keep=keep, rescued="_rescued")
    assert schema.names == [*existing.names, "_rescued"]
    assert sorted(done.schema.names) == sorted(schema.names)  # `extra` and the key's `dt` are new: dropped
