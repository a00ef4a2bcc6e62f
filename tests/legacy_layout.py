"""A metadata table as s3events wrote it before identity buckets (schema version 1, unpartitioned)."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable

from s3events.infra import delta
from s3events.metadata.schema import ID_BUCKET, METADATA_SCHEMA

LEGACY_SCHEMA = pa.schema([f for f in METADATA_SCHEMA if f.name != ID_BUCKET])


def create_legacy_metadata_table(path: str) -> None:
    DeltaTable.create(
        path,
        LEGACY_SCHEMA,
        configuration=delta.table_properties("metadata", 1),
        raise_if_key_not_exists=False,
    )
