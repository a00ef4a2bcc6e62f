"""Glue registration of target tables on the local endpoint (moto's Glue): created at the first commit,
updated only when the shape changes, and a name held by another location refused at start-up."""

from __future__ import annotations

import io
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from s3events.catalog.glue import GlueCatalog
from s3events.catalog.model import VERSION_PARAMETER, CatalogTarget, Column, TableShape, TableState
from s3events.catalog.sync import CatalogEntryElsewhere, CatalogSync
from s3events.catalog.tables import DeltaShapes
from s3events.config import load_settings
from s3events.infra import aws
from s3events.setup.catalog import setup_catalog

pytestmark = pytest.mark.integration

LOCATION = "s3://lake/orders"


@pytest.fixture
def glue(aws_options: aws.AwsOptions) -> Any:
    return aws.client(aws_options, "glue")


@pytest.fixture
def database(glue: Any) -> str:
    name = f"lake_{uuid.uuid4().hex[:8]}"
    assert GlueCatalog(glue).ensure_database(name) is True
    return name


def _state(version: int, *extra: str) -> TableState:
    columns = (Column("id", "bigint"), *(Column(name, "string") for name in extra))
    return TableState(version, TableShape(LOCATION, columns, ("dt",)))


class _Table:
    """A target table as the sync sees it: its latest version and shape (a commit moves it on)."""

    def __init__(self) -> None:
        self.state: TableState | None = None

    def __call__(self, _target: str) -> TableState | None:
        return self.state


def _versions(glue: Any, database: str, table: str) -> list[dict[str, Any]]:
    return glue.get_table_versions(DatabaseName=database, TableName=table)["TableVersions"]


def test_thousand_commits_with_two_schema_changes_give_one_create_and_two_updates(
    glue: Any, database: str
) -> None:
    table = _Table()
    sync = CatalogSync(
        GlueCatalog(glue), database, [CatalogTarget("orders", "orders", LOCATION)], state_of=table
    )
    sync.start()
    columns: tuple[str, ...] = ()
    for version in range(1000):
        if version in (300, 700):  # a batch brought a new column
            columns = (*columns, f"c{version}")
        table.state = _state(version, *columns)
        sync.after_cycle(["orders"])

    versions = _versions(glue, database, "orders")
    assert len(versions) == 3  # 1 create, 2 updates: Glue keeps one table version for each
    entry = glue.get_table(DatabaseName=database, Name="orders")["Table"]
    assert entry["Parameters"]["table_type"] == "DELTA"
    assert entry["Parameters"][VERSION_PARAMETER] == "700"
    assert [c["Name"] for c in entry["StorageDescriptor"]["Columns"]] == ["id", "c300", "c700"]
    assert entry["StorageDescriptor"]["Location"] == LOCATION
    assert sync.failures == 0


def test_restart_with_entry_in_step_registers_nothing(glue: Any, database: str) -> None:
    table = _Table()
    target = CatalogTarget("orders", "orders", LOCATION)
    table.state = _state(5, "a")
    first = CatalogSync(GlueCatalog(glue), database, [target], state_of=table)
    first.start()
    first.after_cycle(["orders"])

    table.state = _state(9, "a")  # later commits, same shape
    again = CatalogSync(GlueCatalog(glue), database, [target], state_of=table)
    again.start()
    again.after_cycle([])  # the first cycle compares every existing table
    again.after_cycle(["orders"])

    assert len(_versions(glue, database, "orders")) == 1


def test_entry_at_another_location_stops_start_and_is_left_alone(glue: Any, database: str) -> None:
    GlueCatalog(glue).create_entry(database, "orders", TableState(0, TableShape("s3://other/orders", ())))
    sync = CatalogSync(
        GlueCatalog(glue),
        database,
        [CatalogTarget("orders", "orders", LOCATION)],
        state_of=_Table(),
    )

    with pytest.raises(CatalogEntryElsewhere) as raised:
        sync.start()

    assert "s3://other/orders" in str(raised.value) and LOCATION in str(raised.value)
    entry = glue.get_table(DatabaseName=database, Name="orders")["Table"]
    assert entry["StorageDescriptor"]["Location"] == "s3://other/orders"


def test_missing_database_is_counted_and_retried_next_cycle(glue: Any) -> None:
    name = f"later_{uuid.uuid4().hex[:8]}"
    table = _Table()
    table.state = _state(0)
    sync = CatalogSync(GlueCatalog(glue), name, [CatalogTarget("orders", "orders", LOCATION)], state_of=table)
    sync.start()  # get_table fails (no database): not fatal
    sync.after_cycle(["orders"])
    assert sync.failures >= 1 and sync.behind == {"orders": 1}

    GlueCatalog(glue).ensure_database(name)
    table.state = _state(1)
    sync.after_cycle([])  # nothing committed: the failed target is retried all the same

    assert sync.behind == {}
    assert glue.get_table(DatabaseName=name, Name="orders")["Table"]["Parameters"][VERSION_PARAMETER] == "1"


def test_shapes_follow_a_delta_table_written_by_delta_rs(tmp_path: Path) -> None:
    path = str(tmp_path / "orders")
    shapes = DeltaShapes({"orders": path}, dict)
    assert shapes("orders") is None

    write_deltalake(path, pa.table({"id": [1], "dt": ["2026-11-27"]}), partition_by=["dt"])
    write_deltalake(
        path,
        pa.table({"id": [2], "dt": ["2026-11-27"], "tags": [["a"]]}),
        mode="append",
        schema_mode="merge",
    )
    state = shapes("orders")

    assert state is not None and state.version == 1
    assert state.shape.location == Path(path).as_uri()
    assert state.shape.partition_columns == ("dt",)
    assert [(c.name, c.type) for c in state.shape.columns] == [
        ("id", "bigint"),
        ("dt", "string"),
        ("tags", "array<string>"),
    ]


def test_setup_creates_the_database_once_and_dry_run_creates_nothing(
    glue: Any, aws_options: aws.AwsOptions
) -> None:
    name = f"setup_{uuid.uuid4().hex[:8]}"
    conf = [
        f"s3events.aws.endpoint.url={aws_options.endpoint_url}",
        "s3events.aws.region=us-east-1",
        "s3events.catalog.type=glue",
        f"s3events.catalog.database={name}",
    ]
    settings = load_settings(None, conf, env={})
    dry, first, second = io.StringIO(), io.StringIO(), io.StringIO()

    setup_catalog(settings, dry_run=True, out=dry)
    assert name not in [d["Name"] for d in glue.get_databases()["DatabaseList"]]
    setup_catalog(settings, dry_run=False, out=first)
    setup_catalog(settings, dry_run=False, out=second)

    assert name in [d["Name"] for d in glue.get_databases()["DatabaseList"]]
    assert f"catalog: database {name} in Glue (us-east-1) created" in first.getvalue()
    assert "exists" in second.getvalue()
