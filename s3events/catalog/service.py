"""Wiring: settings → the configured catalog (Glue, a Hive metastore, or none) and the ingest's sync."""

from __future__ import annotations

from collections.abc import Sequence

from s3events.catalog.model import CatalogTarget, catalog_location
from s3events.catalog.ports import Catalog
from s3events.catalog.sync import CatalogSync, SyncObserver
from s3events.config import Settings, keys
from s3events.errors import ConfigError
from s3events.infra import aws


def catalog_database(settings: Settings) -> str | None:
    """The database targets are registered in; None with catalog type none. ConfigError when a catalog
    is configured without what it needs."""
    kind = settings.get(keys.CATALOG_TYPE)
    if kind == "none":
        return None
    database = settings.get(keys.CATALOG_DATABASE)
    if database is None:
        raise ConfigError(
            keys.CATALOG_DATABASE.name,
            f"not set; required with {keys.CATALOG_TYPE.name}={kind} (allowed: 1-255 of lower-case "
            "letters, digits and '_')",
        )
    if kind == "hive" and settings.get(keys.CATALOG_HIVE_METASTORE_URI) is None:
        raise ConfigError(
            keys.CATALOG_HIVE_METASTORE_URI.name,
            f"not set; required with {keys.CATALOG_TYPE.name}=hive (allowed: thrift://host:port)",
        )
    return database


def build_catalog(settings: Settings) -> Catalog | None:
    """The configured catalog, or None (type none)."""
    if catalog_database(settings) is None:
        return None
    if settings.get(keys.CATALOG_TYPE) == "glue":
        from s3events.catalog.glue import GlueCatalog

        options = aws.options_from(settings)
        return GlueCatalog(aws.client(options, "glue"), region=options.region)
    from s3events.catalog.hive import HiveCatalog

    uri = settings.get(keys.CATALOG_HIVE_METASTORE_URI)
    assert uri is not None  # catalog_database checked it
    return HiveCatalog(uri)


def catalog_targets(settings: Settings, names: Sequence[str]) -> list[CatalogTarget]:
    return [
        CatalogTarget(
            name=name,
            table=settings.get_for(name, keys.TARGET_CATALOG_TABLE) or name,
            location=catalog_location(settings.get_for(name, keys.TARGET_PATH) or ""),
        )
        for name in names
    ]


def build_sync(
    settings: Settings, names: Sequence[str], *, observer: SyncObserver | None = None
) -> CatalogSync | None:
    """The ingest's catalog sync for these targets, started (entries read, conflicts raised), or None."""
    from s3events.catalog.tables import DeltaShapes

    catalog = build_catalog(settings)
    database = catalog_database(settings)
    if catalog is None or database is None:
        return None
    paths = {name: settings.get_for(name, keys.TARGET_PATH) or "" for name in names}
    sync = CatalogSync(
        catalog,
        database,
        catalog_targets(settings, names),
        state_of=DeltaShapes(paths, aws.FreshStorageOptions(aws.options_from(settings))),
        observer=observer,
    )
    sync.start()
    return sync
