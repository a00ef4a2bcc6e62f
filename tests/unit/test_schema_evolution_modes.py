"""schema.evolution's rules on names: which fields are new once a table exists, what `ignore` keeps."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from s3events.ingest.files.schema_contract import kept_columns, new_fields
from s3events.ingest.model import Limits
from s3events.ingest.plan import Route
from s3events.ingest.target import TargetSpec

TABLE = pa.schema([pa.field("_source_file", pa.string()), pa.field("id", pa.int64())])
SPEC = TargetSpec("t", "/tmp/t", "json", Route(), Limits(max_files=10, max_bytes=10), "/tmp/t_errors")


def test_the_first_batch_has_no_new_fields_it_defines_the_table() -> None:
    assert new_fields(["id", "extra"], None) == []
    assert new_fields(["_source_file", "id", "extra", "_ingested_at"], TABLE) == ["extra"]


def test_ignore_keeps_the_table_s_columns_and_the_ingestion_time_once_the_table_exists() -> None:
    ignoring = replace(SPEC, schema_evolution="ignore")
    assert kept_columns(ignoring, TABLE) == {"_source_file", "id", "_ingested_at"}
    assert kept_columns(ignoring, None) is None
    assert (
        kept_columns(SPEC, TABLE) is None
        and kept_columns(replace(SPEC, schema_evolution="fail"), TABLE) is None
    )
