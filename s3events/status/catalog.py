"""`status` on the catalog: each target's entry against its table (missing, elsewhere, or behind)."""

from __future__ import annotations

from collections.abc import Mapping

from s3events.catalog.model import behind, elsewhere
from s3events.catalog.service import build_catalog, catalog_database, catalog_targets
from s3events.catalog.tables import DeltaShapes
from s3events.config import Settings, keys


def catalog_problems(settings: Settings, storage: Mapping[str, str]) -> list[str]:
    """One line per target whose catalog entry does not describe its table as it stands. Reads only."""
    database = catalog_database(settings)
    catalog = build_catalog(settings)
    if catalog is None or database is None:
        return []
    names = settings.get(keys.INGEST_TARGETS)
    targets = catalog_targets(settings, names)
    shapes = DeltaShapes(
        {name: settings.get_for(name, keys.TARGET_PATH) or "" for name in names}, lambda: storage
    )
    problems = []
    for target in targets:
        label = f"{target.name}: catalog table {database}.{target.table} in {catalog.description}"
        try:
            state = shapes(target.name)
        except Exception:  # the target's own lines report an unreadable table
            continue
        try:
            entry = catalog.get_entry(database, target.table)
        except Exception as exc:
            problems.append(f"{label}: cannot read it: {type(exc).__name__}: {exc}")
            continue
        if entry is not None and elsewhere(entry, target):
            problems.append(
                f"{label} is at {entry.shape.location}, not at the target's location {target.location} "
                "(ingest refuses to start)"
            )
            continue
        lag = behind(entry, state)
        if lag is None or state is None:
            continue
        if entry is None:
            problems.append(
                f"{label} is missing: the table is at version {state.version} ({lag} table versions "
                "unregistered; ingest retries the sync each cycle)"
            )
        else:
            problems.append(
                f"{label} is {lag} table versions behind: it describes table version {entry.version}, "
                f"the table is at version {state.version} with another schema or partitioning (ingest "
                "retries the sync each cycle)"
            )
    return problems
