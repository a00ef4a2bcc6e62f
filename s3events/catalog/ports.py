"""The catalog port: the four calls registration needs, shaped like Glue's and the metastore's own."""

from __future__ import annotations

from typing import Protocol

from s3events.catalog.model import Entry, TableState


class Catalog(Protocol):
    """A catalog of tables by database and name (AWS Glue, a Hive metastore)."""

    @property
    def description(self) -> str:
        """Which catalog, for messages: 'Glue (us-east-1)', 'Hive metastore thrift://...'."""
        ...

    def ensure_database(self, database: str, *, location: str | None = None) -> bool:
        """Create the database unless it exists; True when it was created."""
        ...

    def get_entry(self, database: str, table: str) -> Entry | None:
        """The table's entry, or None when there is none."""
        ...

    def create_entry(self, database: str, table: str, state: TableState) -> None: ...

    def update_entry(self, database: str, table: str, state: TableState) -> None: ...
