"""The catalog model: Delta types as Hive writes them, and when an entry is created, updated or left."""

from __future__ import annotations

from s3events.catalog.model import (
    CatalogTarget,
    Column,
    Entry,
    TableShape,
    TableState,
    action_for,
    behind,
    catalog_location,
    elsewhere,
    entry_from,
    entry_parameters,
    hive_type,
    shape_of,
)

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "price", "type": "decimal(38, 6)", "nullable": True, "metadata": {}},
        {"name": "at", "type": "timestamp_ntz", "nullable": True, "metadata": {}},
        {
            "name": "lines",
            "type": {
                "type": "array",
                "elementType": {
                    "type": "struct",
                    "fields": [{"name": "sku", "type": "string", "nullable": True, "metadata": {}}],
                },
                "containsNull": True,
            },
            "nullable": True,
            "metadata": {},
        },
        {
            "name": "attrs",
            "type": {"type": "map", "keyType": "string", "valueType": "integer", "valueContainsNull": True},
            "nullable": True,
            "metadata": {},
        },
    ],
}


def test_delta_types_become_hive_types() -> None:
    shape = shape_of("s3a://lake/orders/", SCHEMA, ("dt",))

    assert shape.location == "s3://lake/orders"
    assert [(c.name, c.type) for c in shape.columns] == [
        ("id", "bigint"),
        ("price", "decimal(38,6)"),
        ("at", "timestamp"),
        ("lines", "array<struct<sku:string>>"),
        ("attrs", "map<string,int>"),
    ]
    assert hive_type("short") == "smallint" and hive_type("byte") == "tinyint"


def test_first_commit_creates_same_shape_does_nothing_new_column_updates() -> None:
    first = TableShape("s3://lake/orders", (Column("id", "bigint"),), ("dt",))
    wider = TableShape("s3://lake/orders", (Column("id", "bigint"), Column("note", "string")), ("dt",))
    repartitioned = TableShape("s3://lake/orders", first.columns, ("region",))

    assert action_for(None, first) == "create"
    assert action_for(first, first) is None
    assert action_for(TableShape("s3://lake/orders/", (Column("ID", "BIGINT"),), ("DT",)), first) is None
    assert action_for(first, wider) == "update"
    assert action_for(first, repartitioned) == "update"


def test_entry_read_back_keeps_version_and_partitions() -> None:
    state = TableState(41, TableShape("s3://lake/orders", (Column("id", "bigint"),), ("dt",)))
    entry = entry_from("s3://lake/orders", state.shape.columns, entry_parameters(state))

    assert entry == Entry(state.shape, 41)
    assert entry_parameters(state)["table_type"] == "DELTA"
    assert entry_from("s3://x", (), {"s3events.table.version": "?"}).version is None


def test_entry_elsewhere_and_how_far_behind() -> None:
    target = CatalogTarget("orders", "orders", "s3://lake/orders")
    entry = Entry(TableShape("s3://lake/orders", (Column("id", "bigint"),)), 10)
    wider = TableState(25, TableShape("s3://lake/orders", (Column("id", "bigint"), Column("n", "int"))))

    assert not elsewhere(entry, target)
    assert elsewhere(Entry(TableShape("s3://old/orders", ()), None), target)
    assert behind(entry, wider) == 15
    assert behind(entry, TableState(99, entry.shape)) is None  # later commits kept the shape
    assert behind(None, wider) == 26
    assert behind(entry, None) is None


def test_local_paths_become_file_uris() -> None:
    assert catalog_location("/data/lake/orders") == "file:///data/lake/orders"
    assert catalog_location("s3://lake/orders/") == "s3://lake/orders"
