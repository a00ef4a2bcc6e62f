"""Columns from the object key (`key.pattern`, `key.columns`, `key.column.types`, `key.columns.required`):
the pure rules both paths share, and their configuration."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pyarrow as pa
import pytest

from s3events.config import load_settings
from s3events.config.column_types import ColumnTypesType, NamedGroupsPattern, python_pattern
from s3events.config.value_types import InvalidValue
from s3events.errors import ConfigError
from s3events.ingest.files.key_columns import KeyColumns, cast_text, hive_values, unescape, with_key_columns
from s3events.ingest.target import target_specs

FIREHOSE = KeyColumns(
    pattern=r"^events/(?P<year>\d{4})/(?P<month>\d{2})/(?P<day>\d{2})/(?P<hour>\d{2})/",
    types=(("year", "int"), ("month", "int"), ("day", "int")),
)


def test_firehose_layout_gives_typed_columns_from_named_groups() -> None:
    row = FIREHOSE.row("events/2026/11/27/03/firehose-1.gz", {})
    assert row.to_pylist() == [{"year": 2026, "month": 11, "day": 27, "hour": "03"}]
    assert row.schema.field("year").type == pa.int32() and row.schema.field("hour").type == pa.string()


def test_java_named_groups_are_read_as_python_ones() -> None:
    assert python_pattern(r"^(?<year>\d{4})/(?<=x)(?<!y)\(?<no>") == r"^(?P<year>\d{4})/(?<=x)(?<!y)\(?<no>"
    assert NamedGroupsPattern().parse(r"(?<dt>[^/]+)/") == r"(?P<dt>[^/]+)/"


@pytest.mark.parametrize("text", ["(unclosed", r"^events/\d{4}/"])
def test_a_pattern_that_does_not_compile_or_names_no_group_is_refused(text: str) -> None:
    with pytest.raises(InvalidValue):
        NamedGroupsPattern().parse(text)


def test_hive_folders_are_unescaped_as_spark_partition_discovery_does() -> None:
    key = "in/dt=2026-11-27/city=S%C3%A3o%20Paulo/odd=50%/a%3Db=x%2Fy/file dt=no.json"
    assert hive_values(key) == {"dt": "2026-11-27", "city": "SÃ£o Paulo", "odd": "50%", "a=b": "x/y"}
    assert unescape("%zz%4") == "%zz%4"


def test_the_folder_nearest_the_object_wins_and_hive_null_is_null() -> None:
    columns = KeyColumns(hive=("dt", "region"))
    assert columns.texts("dt=1/x/dt=2/region=__HIVE_DEFAULT_PARTITION__/f") == {"dt": "2", "region": None}


def test_a_key_without_the_columns_gives_nulls_unless_required() -> None:
    loose = KeyColumns(pattern=r"^(?P<y>\d{4})/", hive=("dt",))
    assert loose.failure("other/f.json") is None
    assert loose.row("other/f.json", {}).to_pylist() == [{"y": None, "dt": None}]
    strict = KeyColumns(pattern=r"^(?P<y>\d{4})/", hive=("dt",), required=True)
    assert strict.failure("other/f.json") is not None and "does not match" in str(
        strict.failure("other/f.json")
    )
    assert "dt=" in str(strict.failure("2026/f.json"))
    assert strict.failure("2026/dt=x/f.json") is None


def test_a_value_that_does_not_cast_to_its_declared_type_fails_the_object() -> None:
    loose = KeyColumns(pattern=r"^(?P<year>[^/]+)/", types=(("year", "int"),))
    assert loose.failure("20x6/f") == "key column year: '20x6' is not an integer"
    dated = KeyColumns(hive=("dt",), types=(("dt", "date"),))
    assert dated.failure("dt=2026-02-30/f") == "key column dt: '2026-02-30' is not a date (yyyy-mm-dd)"
    assert dated.failure("dt=2026-2-3/f") is None


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        (" 42 ", pa.int32(), 42),
        ("-7", pa.int8(), -7),
        ("1e3", pa.float64(), 1000.0),
        ("2.345", pa.decimal128(5, 2), Decimal("2.35")),
        ("YES", pa.bool_(), True),
        ("0", pa.bool_(), False),
        ("2026-11-27", pa.date32(), date(2026, 11, 27)),
        ("2026-11-27T03:04:05Z", pa.timestamp("us", tz="UTC"), datetime(2026, 11, 27, 3, 4, 5, tzinfo=UTC)),
        ("2026-11-27 03:04:05", pa.timestamp("us", tz="UTC"), datetime(2026, 11, 27, 3, 4, 5, tzinfo=UTC)),
        (" as written ", pa.string(), " as written "),
    ],
)
def test_key_texts_cast_as_spark_casts_a_string(text: str, kind: pa.DataType, value: object) -> None:
    assert cast_text(text, kind) == value


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("128", pa.int8()),
        ("1.5", pa.int32()),
        ("1_0", pa.int64()),
        ("abc", pa.float64()),
        ("maybe", pa.bool_()),
        ("123.4", pa.decimal128(3, 1)),
        ("27/11/2026", pa.date32()),
        ("noon", pa.timestamp("us", tz="UTC")),
    ],
)
def test_key_texts_that_do_not_cast_raise(text: str, kind: pa.DataType) -> None:
    with pytest.raises(ValueError):
        cast_text(text, kind)


def test_a_record_field_of_the_same_name_wins_where_it_has_a_value() -> None:
    columns = KeyColumns(hive=("dt", "region"), types=(("dt", "date"),))
    table = pa.table({"id": [1, 2], "region": ["eu", None]})
    out = with_key_columns(table, columns, "in/dt=2026-11-27/region=us/f.json")
    assert out.column_names == ["id", "region", "dt"]
    assert out.to_pylist() == [
        {"id": 1, "region": "eu", "dt": date(2026, 11, 27)},
        {"id": 2, "region": "us", "dt": date(2026, 11, 27)},
    ]


def test_the_key_text_takes_the_record_field_type_and_is_null_where_it_does_not_cast() -> None:
    columns = KeyColumns(hive=("n", "m"))
    table = pa.table({"n": pa.array([None, 5], pa.int64()), "m": pa.array([None], pa.int64()).take([0, 0])})
    out = with_key_columns(table, columns, "n=7/m=x/f.json")
    assert out.schema.field("n").type == pa.int64() and out.column("n").to_pylist() == [7, 5]
    assert out.column("m").to_pylist() == [None, None]


def test_a_file_whose_field_is_all_null_takes_the_key_value_in_its_declared_type() -> None:
    columns = KeyColumns(hive=("dt",), types=(("dt", "date"),))
    out = with_key_columns(pa.table({"dt": pa.nulls(1)}), columns, "dt=2026-01-02/f")
    assert out.schema.field("dt").type == pa.date32() and out.column("dt").to_pylist() == [date(2026, 1, 2)]


def test_column_types_parse_spark_ddl_simple_types() -> None:
    parsed = ColumnTypesType().parse("year INT, `odd name` bigint,amount DECIMAL(18, 2), dt date, ok BOOLEAN")
    assert dict(parsed) == {
        "year": "int",
        "odd name": "bigint",
        "amount": "decimal(18,2)",
        "dt": "date",
        "ok": "boolean",
    }


@pytest.mark.parametrize(
    "text", ["year", "year INT,, x", "tags MAP<STRING,STRING>", "a INT, a INT", "x DECIMAL(40,2)"]
)
def test_column_types_outside_the_simple_types_are_refused(text: str) -> None:
    with pytest.raises(InvalidValue):
        ColumnTypesType().parse(text)


def _settings(**extra: str) -> list[str]:
    base = {
        "s3events.metadata.table.path": "/tmp/m",
        "s3events.ingest.targets": "t",
        "s3events.ingest.target.t.path": "/tmp/t",
        "s3events.ingest.target.t.format": "json",
        **{f"s3events.ingest.target.t.{k.replace('__', '.')}": v for k, v in extra.items()},
    }
    return [f"{k}={v}" for k, v in base.items()]


def test_key_settings_become_the_target_spec_s_key_columns() -> None:
    settings = load_settings(
        None,
        _settings(
            key__pattern=r"^(?<y>\d{4})/",
            key__columns="dt",
            key__column__types="y INT",
            key__columns__required="true",
        ),
    )
    (spec,) = target_specs(settings)
    assert spec.key_columns == KeyColumns(r"^(?P<y>\d{4})/", ("dt",), (("y", "int"),), True)
    assert target_specs(load_settings(None, _settings()))[0].key_columns is None


def test_a_bad_key_pattern_fails_at_start_up_naming_the_key() -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(None, _settings(key__pattern="^no groups/"))
    assert "s3events.ingest.target.t.key.pattern" in str(raised.value)


def test_types_for_a_column_the_key_does_not_give_fail_at_start_up_naming_the_key() -> None:
    settings = load_settings(None, _settings(key__columns="dt", key__column__types="day INT"))
    with pytest.raises(ConfigError) as raised:
        settings.validate_for("ingest")
    assert "key.column.types" in str(raised.value) and "'day'" in str(raised.value)
