"""The rescued column's text and its configuration: one JSON object of the fields that did not fit (their
original values, nulls left out), null when nothing was rescued; `rescue` names it _rescued_data unless
rescued.column does; a name another column holds, or a format without record fields, fails at start-up."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from s3events.config import load_settings
from s3events.errors import ConfigError
from s3events.ingest.files import rescue
from s3events.ingest.target import target_specs

COLUMNS = frozenset({"id", "amount"})


def test_a_json_line_keeps_the_original_values_of_new_and_misfit_fields() -> None:
    line = '{"id": 1, "amount": "lots", "extra": 10, "ratio": 1.50, "tags": ["a", null], "gone": null}'
    text = rescue.from_json_line(line, COLUMNS, ["amount"])
    assert text is not None
    assert json.loads(text) == {"amount": "lots", "extra": 10, "ratio": 1.5, "tags": ["a", None]}
    assert list(json.loads(text)) == ["amount", "extra", "ratio", "tags"]  # in the line's order


def test_nothing_rescued_is_null_and_a_line_python_cannot_read_is_kept_whole() -> None:
    assert rescue.from_json_line('{"id": 1, "amount": 2, "gone": null}', COLUMNS) is None
    assert rescue.from_json_line("{'id': 1}", COLUMNS) == '{"_corrupt_record":"{\'id\': 1}"}'


def test_a_line_nested_deeper_than_python_can_read_is_kept_whole_instead_of_failing_the_task() -> None:
    deep = '{"id": 1, "extra": ' + "[" * 100_000 + "]" * 100_000 + "}"  # past Python's recursion limit
    kept = json.dumps({"_corrupt_record": deep}, separators=(",", ":"))
    assert rescue.from_json_line(deep, COLUMNS) == kept


def test_csv_fields_are_rescued_as_strings_in_the_header_order() -> None:
    assert rescue.from_fields(["city", None, "n"], ["Oslo", "x", "007"]) == '{"city":"Oslo","n":"007"}'
    assert rescue.from_fields(["city"], [None]) is None
    column = rescue.csv_columns(["city"], [pa.chunked_array([["Oslo", None]])], 2)
    assert column.to_pylist() == ['{"city":"Oslo"}', None]


def test_the_rescued_column_is_moved_last_or_added_as_nulls() -> None:
    table = pa.table({"_rescued_data": ['{"a":1}'], "id": [1]})
    assert rescue.with_rescued(table, "_rescued_data").column_names == ["id", "_rescued_data"]
    added = rescue.with_rescued(pa.table({"id": [1, 2]}), "r")
    assert added.schema.field("r").type == pa.string() and added.column("r").null_count == 2


def _spec(**conf: str):  # type: ignore[no-untyped-def]
    lines = [
        "s3events.metadata.table.path=/tmp/m",
        "s3events.ingest.targets=t",
        "s3events.ingest.target.t.path=/tmp/t",
        *(f"s3events.ingest.target.t.{k.replace('__', '.')}={v}" for k, v in conf.items()),
    ]
    settings = load_settings(None, lines)
    settings.validate_for("ingest")
    [spec] = target_specs(settings)
    return spec


def test_rescue_mode_names_the_column_rescued_data_unless_rescued_column_does() -> None:
    assert _spec(format="json", schema__evolution="rescue").rescued_column == "_rescued_data"
    assert _spec(format="json", schema__evolution="rescue", rescued__column="extra").rescued_column == "extra"
    assert _spec(format="csv", rescued__column="extra").rescued_column == "extra"  # add mode too
    assert _spec(format="json").rescued_column is None


@pytest.mark.parametrize(
    "conf, named",
    [
        ({"rescued__column": "_source_file"}, "a lineage column"),
        ({"rescued__column": "dt", "partition__by": "dt"}, "partition.by"),
        ({"rescued__column": "id", "schema": "id BIGINT, v STRUCT<a: INT, b: INT>"}, "schema"),
        ({"rescued__column": "region", "key__columns": "region"}, "a key column"),
        ({"schema__evolution": "rescue", "partition__by": "_rescued_data"}, "partition.by"),
    ],
)
def test_a_rescued_column_named_as_another_column_fails_at_start_up(conf: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as raised:
        _spec(format="json", **conf)
    assert "rescued" in str(raised.value) and named in str(raised.value)


def test_a_rescued_column_needs_a_format_with_record_fields_and_a_plain_name() -> None:
    with pytest.raises(ConfigError, match="json, csv, not parquet"):
        _spec(format="parquet", schema__evolution="rescue")
    with pytest.raises(ConfigError, match=r"rescued\.column"):
        _spec(format="json", rescued__column="a.b")


# -- the JSON fast path's parser under rescue ----------------------------------------------------------------

KNOWN = pa.schema([("id", pa.int64()), ("s", pa.struct([("a", pa.int64())]))])
RESCUING = ("_rescued_data", frozenset(KNOWN.names))


def _parse(lines: list[str]):  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    from s3events.ingest.files.formats.json_format import parse_json_lines
    from s3events.ingest.model import FileRef

    ref = FileRef("b", "k.json", "e", None, 1, datetime.now(UTC), "id", "created", 1)
    data = ("\n".join(lines) + "\n").encode()
    return parse_json_lines(data, ref, "e", known=KNOWN, declared=False, rescued=RESCUING)


def test_the_fast_parser_rescues_only_the_lines_holding_new_fields() -> None:
    parsed = _parse(
        ['{"id": 1}', '{"id": 2, "x": 1.50, "y": null}', '{"id": 3, "y": [1]}', '{"id": 4, "x": null}']
    )
    assert parsed.table is not None
    assert parsed.table.column("_rescued_data").to_pylist() == [None, '{"x":1.5}', '{"y":[1]}', None]
    assert parsed.table.column_names[-3:] == ["id", "s", "_rescued_data"]


def test_a_new_field_of_drifting_type_or_inside_a_struct_is_handled_without_declining() -> None:
    parsed = _parse(['{"id": 1, "x": 1, "s": {"a": 1, "b": 2}}', '{"id": 2, "x": "one"}'])
    assert parsed.table is not None  # from_json drops the struct's new field b; x is rescued either way
    assert parsed.table.column("_rescued_data").to_pylist() == ['{"x":1}', '{"x":"one"}']
    assert parsed.table.column("s").to_pylist() == [{"a": 1}, None]


def test_a_value_that_does_not_fit_declines_the_file_to_the_line_path() -> None:
    parsed = _parse(['{"id": 1, "x": 1}', '{"id": "two"}'])
    assert parsed.table is None and parsed.reason is not None
