"""`s3events setup`'s catalog step: the database ingest registers target tables in."""

from __future__ import annotations

from typing import TextIO

from s3events.catalog.service import build_catalog, catalog_database
from s3events.config import Settings


def setup_catalog(settings: Settings, *, dry_run: bool, out: TextIO) -> None:
    """Create s3events.catalog.database unless it exists (catalog type none: nothing)."""
    database = catalog_database(settings)
    catalog = build_catalog(settings)
    if catalog is None or database is None:
        return
    if dry_run:
        print(f"catalog: database {database} in {catalog.description}, created unless it exists", file=out)
        return
    created = catalog.ensure_database(database)
    print(
        f"catalog: database {database} in {catalog.description} {'created' if created else 'exists'}",
        file=out,
    )
