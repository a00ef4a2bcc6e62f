"""Target tables' shapes as their Delta logs give them (delta-rs), for the catalog sync."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from deltalake import DeltaTable

from s3events.catalog.model import TableState, catalog_location, shape_of
from s3events.infra.delta import TableHandle


class DeltaShapes:
    """Each target's current Delta version and shape; a kept handle reads only the commits since."""

    def __init__(self, paths: Mapping[str, str], storage_options: Callable[[], Mapping[str, str]]) -> None:
        self._handles = {
            name: TableHandle(path, storage_options, kind="target") for name, path in paths.items()
        }

    def __call__(self, target: str) -> TableState | None:
        handle = self._handles[target]
        table = handle.latest()
        return None if table is None else state_of(table, handle.path)


def state_of(table: DeltaTable, path: str) -> TableState:
    partitions = tuple(table.metadata().partition_columns)
    return TableState(table.version(), shape_of(catalog_location(path), table.schema().to_json(), partitions))
