"""The catalog sync inside ingest, on the local endpoint: moto's Glue, local Spark, real delta-rs tables."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from s3events.capture.service import run_capture
from s3events.catalog.glue import GlueCatalog
from s3events.catalog.model import TableShape, TableState, catalog_location
from s3events.commands import EXIT_FATAL
from s3events.config import load_settings
from s3events.infra import aws
from s3events.ingest.service import run_ingest
from s3events.process_metrics import Metrics
from s3events.status.gather import gather_status
from tests.conftest import Stack, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture
def glue(aws_options: aws.AwsOptions) -> Any:
    return aws.client(aws_options, "glue")


def _settings(stack: Stack, path: Path, database: str) -> Any:
    settings = load_settings(
        None,
        stack.conf(
            ingest__targets="orders",
            ingest__target__orders__path=str(path),
            ingest__target__orders__format="json",
            catalog__type="glue",
            catalog__database=database,
        ),
    )
    settings.validate_for("ingest")
    return settings


def _land(stack: Stack, s3: Any, key: str, *rows: dict[str, Any]) -> None:
    body = "".join(json.dumps(r) + "\n" for r in rows).encode()
    s3.put_object(Bucket=stack.bucket, Key=key, Body=body)
    run_capture(load_settings(None, stack.conf()), once=True)


def _versions(glue: Any, database: str) -> int:
    return len(glue.get_table_versions(DatabaseName=database, TableName="orders")["TableVersions"])


def test_ingest_registers_at_first_commit_and_updates_only_on_a_new_column(
    make_stack, s3, spark, glue, tmp_path
):
    stack = make_stack()
    database = f"lake_{uuid.uuid4().hex[:8]}"
    GlueCatalog(glue).ensure_database(database)
    settings = _settings(stack, tmp_path / "orders", database)
    metrics = Metrics()

    _land(stack, s3, "in/1.json", {"id": 1})
    run_ingest(settings, once=True, spark=spark, catalog_metrics=metrics.catalog)
    _land(stack, s3, "in/2.json", {"id": 2})
    run_ingest(settings, once=True, spark=spark, catalog_metrics=metrics.catalog)
    assert _versions(glue, database) == 1  # the second commit kept the shape
    _land(stack, s3, "in/3.json", {"id": 3, "note": "new"})
    run_ingest(settings, once=True, spark=spark, catalog_metrics=metrics.catalog)

    assert _versions(glue, database) == 2
    entry = glue.get_table(DatabaseName=database, Name="orders")["Table"]
    assert entry["StorageDescriptor"]["Location"] == catalog_location(str(tmp_path / "orders"))
    assert "note" in [c["Name"] for c in entry["StorageDescriptor"]["Columns"]]
    assert (
        metrics.registry.get_sample_value(
            "s3events_catalog_registrations_total", {"target": "orders", "action": "create"}
        )
        == 1
    )
    catalog_lines = [p for p in gather_status(settings, now=datetime.now(UTC)).problems if "catalog" in p]
    assert catalog_lines == []


@pytest.mark.process
def test_entry_at_another_location_stops_ingest_before_any_commit(make_stack, s3, glue, tmp_path):
    stack = make_stack()
    database = f"lake_{uuid.uuid4().hex[:8]}"
    catalog = GlueCatalog(glue)
    catalog.ensure_database(database)
    catalog.create_entry(database, "orders", TableState(3, TableShape("s3://elsewhere/orders", ())))
    _land(stack, s3, "in/1.json", {"id": 1})
    conf = stack.conf(
        ingest__targets="orders",
        ingest__target__orders__path=str(tmp_path / "orders"),
        ingest__target__orders__format="json",
        catalog__type="glue",
        catalog__database=database,
    )

    result = run_cli(["ingest", "--once", *(arg for kv in conf for arg in ("--conf", kv))])

    assert result.returncode == EXIT_FATAL, result.stderr  # 3, before Spark starts
    err = result.stderr
    assert "s3://elsewhere/orders" in err and catalog_location(str(tmp_path / "orders")) in err
    assert not (tmp_path / "orders").exists()  # nothing committed
    entry = glue.get_table(DatabaseName=database, Name="orders")["Table"]
    assert entry["StorageDescriptor"]["Location"] == "s3://elsewhere/orders"


def test_catalog_failure_never_blocks_the_commit_and_status_names_the_target(
    make_stack, s3, spark, glue, tmp_path
):
    stack = make_stack()
    database = f"missing_{uuid.uuid4().hex[:8]}"  # never created: every Glue call fails
    settings = _settings(stack, tmp_path / "orders", database)
    metrics = Metrics()
    _land(stack, s3, "in/1.json", {"id": 1}, {"id": 2})

    totals = run_ingest(settings, once=True, spark=spark, catalog_metrics=metrics.catalog)

    assert totals.rows == 2 and not totals.failed  # the data is committed
    failures = metrics.registry.get_sample_value("s3events_catalog_sync_failures_total", {"target": "orders"})
    assert failures is not None and failures >= 1
    status = gather_status(settings, now=datetime.now(UTC))
    lines = [p for p in status.problems if "catalog" in p]
    assert status.exit_code == 1
    assert len(lines) == 1 and lines[0].startswith(f"orders: catalog table {database}.orders")
    assert "is missing: the table is at version" in lines[0]

    GlueCatalog(glue).ensure_database(database)  # the catalog is back: the next run's first cycle syncs
    run_ingest(settings, once=True, spark=spark)

    assert _versions(glue, database) == 1
    assert [p for p in gather_status(settings, now=datetime.now(UTC)).problems if "catalog" in p] == []
