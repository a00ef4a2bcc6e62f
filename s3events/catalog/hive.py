"""A Hive metastore as a `Catalog`, over its Thrift API: entries Spark with delta-spark reads by name.

The ingest process writes the entry itself (no delta-spark, no Hive classes in its JVM): a data source
table as Spark's Hive catalog stores one, provider `delta`, its location in the storage parameter `path`,
so `spark.table("lake.orders")` in a session with delta-spark resolves to the Delta table at that path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from s3events.catalog.model import Column, Entry, TableState, entry_from, entry_parameters

_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


class HiveCatalog:
    """One Thrift connection per call: a sync is a handful of calls per schema change, and a metastore
    restart between them costs nothing."""

    def __init__(self, uri: str, *, timeout_seconds: float = 30.0) -> None:
        parts = urlsplit(uri)
        self._host, self._port = parts.hostname or "localhost", parts.port or 9083
        self._timeout_ms = int(timeout_seconds * 1000)
        self.description = f"Hive metastore {uri}"

    @contextmanager
    def _client(self) -> Iterator[Any]:
        from pymetastore.hive_metastore import ThriftHiveMetastore
        from thrift.protocol import TBinaryProtocol
        from thrift.transport import TSocket, TTransport

        socket = TSocket.TSocket(self._host, self._port)
        socket.setTimeout(self._timeout_ms)
        transport = TTransport.TBufferedTransport(socket)
        transport.open()
        try:
            yield ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport))
        finally:
            transport.close()

    def ensure_database(self, database: str, *, location: str | None = None) -> bool:
        from pymetastore.hive_metastore import ttypes

        with self._client() as client:
            try:
                client.get_database(database)
                return False
            except ttypes.NoSuchObjectException:
                pass
            try:
                client.create_database(
                    ttypes.Database(
                        name=database, description="Delta tables s3events ingests", locationUri=location
                    )
                )
            except ttypes.AlreadyExistsException:
                return False
            return True

    def get_entry(self, database: str, table: str) -> Entry | None:
        from pymetastore.hive_metastore import ttypes

        with self._client() as client:
            try:
                found = client.get_table(database, table)
            except ttypes.NoSuchObjectException:
                return None
        storage = found.sd
        columns = tuple(Column(c.name, c.type) for c in storage.cols or [])
        location = (storage.serdeInfo.parameters or {}).get("path") or storage.location or ""
        return entry_from(location, columns, found.parameters or {})

    def create_entry(self, database: str, table: str, state: TableState) -> None:
        with self._client() as client:
            client.create_table(_table(database, table, state))

    def update_entry(self, database: str, table: str, state: TableState) -> None:
        with self._client() as client:
            client.alter_table(database, table, _table(database, table, state))


def _table(database: str, table: str, state: TableState) -> Any:
    """The metastore's Table for a target: an external table whose parameters make Spark treat it as a
    Delta data source table (`spark.sql.sources.provider`) at the `path` storage parameter."""
    from pymetastore.hive_metastore import ttypes

    shape = state.shape
    storage = ttypes.StorageDescriptor(
        cols=[ttypes.FieldSchema(name=c.name, type=c.type, comment=None) for c in shape.columns],
        location=shape.location,
        inputFormat=_INPUT_FORMAT,
        outputFormat=_OUTPUT_FORMAT,
        compressed=False,
        numBuckets=-1,
        serdeInfo=ttypes.SerDeInfo(name=table, serializationLib=_SERDE, parameters={"path": shape.location}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )
    return ttypes.Table(
        tableName=table,
        dbName=database,
        owner="s3events",
        sd=storage,
        partitionKeys=[],
        parameters=entry_parameters(state),
        tableType="EXTERNAL_TABLE",
    )
