"""Catalog settings: what a configured catalog needs is checked at start-up, naming the key."""

from __future__ import annotations

import pytest

from s3events.catalog.service import catalog_database, catalog_targets
from s3events.config import load_settings
from s3events.errors import ConfigError

BASE = ["s3events.ingest.targets=Web-Logs", "s3events.ingest.target.Web-Logs.path=s3://lake/web"]


def test_no_catalog_by_default() -> None:
    assert catalog_database(load_settings(None, BASE, env={})) is None


def test_glue_without_database_names_the_key() -> None:
    settings = load_settings(None, [*BASE, "s3events.catalog.type=glue"], env={})
    with pytest.raises(ConfigError, match=r"s3events\.catalog\.database: not set; required with"):
        catalog_database(settings)


def test_hive_without_metastore_uri_names_the_key() -> None:
    settings = load_settings(
        None, [*BASE, "s3events.catalog.type=hive", "s3events.catalog.database=lake"], env={}
    )
    with pytest.raises(ConfigError, match=r"s3events\.catalog\.hive\.metastore\.uri"):
        catalog_database(settings)


@pytest.mark.parametrize(
    ("key", "value"),
    [("s3events.catalog.database", "Lake-1"), ("s3events.catalog.hive.metastore.uri", "http://ms:9083")],
)
def test_bad_names_fail_with_what_is_allowed(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_settings(None, [*BASE, f"{key}={value}"], env={})


def test_table_name_defaults_to_the_target_name_in_lower_case() -> None:
    settings = load_settings(
        None, [*BASE, "s3events.catalog.type=glue", "s3events.catalog.database=lake"], env={}
    )
    (target,) = catalog_targets(settings, ["Web-Logs"])
    assert target.table == "web_logs" and target.location == "s3://lake/web"
