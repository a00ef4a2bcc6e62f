"""The AWS Glue Data Catalog as a `Catalog`: external tables with `table_type=DELTA`, as Athena reads them."""

from __future__ import annotations

from typing import Any

from s3events.catalog.model import Column, Entry, TableState, entry_from, entry_parameters

# Parquet formats, as Glue's crawler writes native Delta tables: an engine that ignores table_type reads
# Parquet files, not text. Spark and Athena read the Delta log (provider, table_type).
_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


def table_input(table: str, state: TableState) -> dict[str, Any]:
    """Glue's TableInput for a target. Partition columns stay among the columns (not PartitionKeys): a
    Delta table's partitions are in its log, and Athena and Spark read them from there."""
    shape = state.shape
    return {
        "Name": table,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": entry_parameters(state),
        "StorageDescriptor": {
            "Columns": [{"Name": c.name, "Type": c.type} for c in shape.columns],
            "Location": shape.location,
            "InputFormat": _INPUT_FORMAT,
            "OutputFormat": _OUTPUT_FORMAT,
            "SerdeInfo": {"SerializationLibrary": _SERDE, "Parameters": {"path": shape.location}},
        },
        "PartitionKeys": [],
    }


class GlueCatalog:
    def __init__(self, client: Any, *, region: str | None = None) -> None:
        self._glue = client
        self.description = f"Glue ({region})" if region else "Glue"

    def ensure_database(self, database: str, *, location: str | None = None) -> bool:
        found = self._glue.exceptions.AlreadyExistsException
        database_input: dict[str, Any] = {"Name": database, "Description": "Delta tables s3events ingests"}
        if location:
            database_input["LocationUri"] = location
        try:
            self._glue.create_database(DatabaseInput=database_input)
        except found:
            return False
        return True

    def get_entry(self, database: str, table: str) -> Entry | None:
        try:
            found = self._glue.get_table(DatabaseName=database, Name=table)["Table"]
        except self._glue.exceptions.EntityNotFoundException:
            return None
        storage = found.get("StorageDescriptor", {})
        columns = tuple(Column(c["Name"], c["Type"]) for c in storage.get("Columns", []))
        return entry_from(storage.get("Location", ""), columns, found.get("Parameters", {}))

    def create_entry(self, database: str, table: str, state: TableState) -> None:
        self._glue.create_table(DatabaseName=database, TableInput=table_input(table, state))

    def update_entry(self, database: str, table: str, state: TableState) -> None:
        self._glue.update_table(DatabaseName=database, TableInput=table_input(table, state))
