"""Merge mode's latest row per record key, on Arrow tables (the fast path's reduction)."""

from __future__ import annotations

import random
import struct
from datetime import UTC, datetime

import pyarrow as pa

from s3events.ingest.files.latest_rows import (
    keys_distinct,
    latest,
    latest_if_reducible,
    nested_ranks,
    reducible,
)

T0 = datetime(2026, 11, 25, tzinfo=UTC)


def rows(*items: tuple[object, object, int, str, int]) -> pa.Table:
    """(key, ordering value, event second, file, line) rows."""
    return pa.table(
        {
            "id": [i[0] for i in items],
            "seq": [i[1] for i in items],
            "_event_time": [T0.replace(second=i[2]) for i in items],
            "_source_file": [i[3] for i in items],
            "_source_line": [i[4] for i in items],
        }
    )


def kept(table: pa.Table) -> list[tuple[object, str, int]]:
    return sorted(
        ((r["id"], r["_source_file"], r["_source_line"]) for r in table.to_pylist()),
        key=lambda r: (r[0] is None, r[0] if r[0] is not None else 0),
    )


def test_the_largest_ordering_value_wins_and_a_null_one_loses_to_any_value():
    table = rows((1, 5, 9, "s3://b/a", 1), (1, 7, 1, "s3://b/a", 2), (1, None, 30, "s3://b/z", 9))
    assert kept(latest(table, ["id"], "seq")) == [(1, "s3://b/a", 2)]


def test_without_an_ordering_field_the_latest_event_then_the_last_file_and_line_win():
    table = rows(
        (1, None, 5, "s3://b/a", 1),
        (1, None, 6, "s3://b/a", 2),  # the latest event
        (2, None, 5, "s3://b/a", 3),
        (2, None, 5, "s3://b/b", 1),  # same event time, a later file
        (3, None, 5, "s3://b/c", 1),
        (3, None, 5, "s3://b/c", 4),  # same file, a later line
        (None, None, 5, "s3://b/c", 7),  # a null key is a key of its own
    )
    assert kept(latest(table, ["id"], None)) == [
        (1, "s3://b/a", 2),
        (2, "s3://b/b", 1),
        (3, "s3://b/c", 4),
        (None, "s3://b/c", 7),
    ]


def test_reducing_parts_then_the_whole_keeps_what_reducing_the_whole_keeps():
    rng = random.Random(3)
    items = [
        (rng.randrange(20), rng.choice([None, *range(5)]), rng.randrange(4), f"s3://b/{rng.randrange(3)}", n)
        for n in range(400)
    ]
    table = rows(*items)
    parts = [latest(table.slice(i, 100), ["id"], "seq") for i in range(0, 400, 100)]
    assert kept(latest(pa.concat_tables(parts), ["id"], "seq")) == kept(latest(table, ["id"], "seq"))


def test_only_maps_and_keys_no_row_holds_are_refused():
    struct = pa.struct([("x", pa.int8())])
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("f", pa.float64()),
            ("s", struct),
            ("l", pa.list_(struct)),
            ("m", pa.map_(pa.string(), pa.int8())),
            ("sm", pa.struct([("m", pa.map_(pa.string(), pa.int8()))])),
        ]
    )
    assert reducible(schema, ["id"], None) is None
    assert reducible(schema, ["id"], "f") is None  # ordered as Spark orders doubles: `latest`
    assert reducible(schema, ["s", "l"], "s") is None  # grouped and ordered by rank: `nested_ranks`
    assert reducible(schema, ["f"], None) is None  # grouped as Spark groups doubles: `_grouping_keys`
    assert reducible(schema, ["id"], "m") == "the ordering field m is of type map<string, int8>"
    assert reducible(schema, ["sm"], None) is not None  # Spark neither groups nor orders maps
    assert reducible(schema, ["nope"], None) == "the record key nope is in no row"


def test_a_part_the_rule_cannot_reduce_goes_back_whole_for_the_driver_to_decide():
    table = rows((1, 1, 5, "s3://b/a", 1), (1, 2, 5, "s3://b/a", 2))
    assert latest_if_reducible(table, ["id"], "seq").num_rows == 1
    assert latest_if_reducible(table, ["missing"], "seq").num_rows == 2  # not an error in a task
    keyed_by_map = table.set_column(
        0, "id", pa.array([[("x", 1)], [("x", 1)]], pa.map_(pa.string(), pa.int8()))
    )
    assert latest_if_reducible(keyed_by_map, ["id"], "seq").num_rows == 2


def test_nested_values_rank_in_spark_s_order_null_lowest_at_any_depth_and_nan_highest():
    # Spark's order of structs and arrays (checked against its window): fields or elements in turn, a
    # null below every value, a shorter list before its extensions, NaN above every number, -0.0 = 0.0.
    struct = pa.struct([("a", pa.int64()), ("b", pa.float64())])
    values = [
        None,
        {"a": None, "b": 5.0},
        {"a": 1, "b": None},
        {"a": 1, "b": -0.0},
        {"a": 1, "b": 0.0},
        {"a": 1, "b": 2.0},
        {"a": 1, "b": float("nan")},
        {"a": 2, "b": None},
    ]
    ranks = nested_ranks(pa.chunked_array([pa.array(values, struct)])).to_pylist()
    assert ranks == [0, 1, 2, 3, 3, 4, 5, 6]
    lists = [[1, None], None, [1], [], [1, 2], [None]]
    assert nested_ranks(pa.chunked_array([pa.array(lists, pa.list_(pa.int64()))])).to_pylist() == [
        4,
        0,
        3,
        1,
        5,
        2,
    ]


def test_a_struct_record_key_groups_equal_values_and_a_struct_ordering_field_picks_the_largest():
    key = pa.struct([("region", pa.string()), ("n", pa.int64())])
    version = pa.struct([("major", pa.int64()), ("minor", pa.int64())])
    table = rows(*[(0, 0, 1, "s3://b/a", line) for line in range(1, 7)])
    table = table.set_column(
        0,
        "id",
        pa.array(
            [
                {"region": "eu", "n": 1},
                {"region": "eu", "n": 1},
                {"region": "eu", "n": None},  # a key of its own, as is the null key
                None,
                {"region": "eu", "n": 1},
                None,
            ],
            key,
        ),
    )
    versions = [
        {"major": 1, "minor": 2},
        {"major": 2, "minor": None},
        None,
        None,
        None,
        {"major": 0, "minor": 0},
    ]
    table = table.set_column(1, "seq", pa.array(versions, version))
    kept_lines = sorted(latest(table, ["id"], "seq")["_source_line"].to_pylist())
    assert kept_lines == [2, 3, 6]  # major 2 beats 1.2 and null; a null version loses to 0.0
    assert not keys_distinct(table, ["id"])
    assert keys_distinct(table.take([0, 2, 3]), ["id"])


def test_a_double_record_key_groups_as_spark_does_every_nan_one_key_and_minus_zero_equal_to_zero():
    # Spark's window over (k, seq): [(nan, 1), (-0.0, 2), (0.0, 3), (nan', 4), (1.0, 5)] keeps seq 3, 4, 5
    other_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    keys = [float("nan"), -0.0, 0.0, other_nan, 1.0]
    table = rows(*[(i + 1, i + 1, 1, "s3://b/a", i + 1) for i in range(5)])
    table = table.set_column(0, "id", pa.array(keys, pa.float64()))
    kept_seq = sorted(latest(table, ["id"], "seq")["seq"].to_pylist())
    assert kept_seq == [3, 4, 5]
    assert not keys_distinct(table, ["id"])
    assert keys_distinct(table.slice(2, 3), ["id"])  # 0.0, NaN, 1.0
    assert not keys_distinct(table.slice(1, 2), ["id"])  # -0.0 and 0.0: one key


def test_rows_whose_keys_are_all_distinct_are_all_kept_and_two_null_keys_are_one_key():
    distinct = rows((3, 1, 1, "s3://b/a", 1), (None, 1, 2, "s3://b/a", 2), (1, None, 3, "s3://b/z", 1))
    assert latest(distinct, ["id"], "seq").equals(distinct)  # nothing to choose: as they came

    two_nulls = rows((None, 1, 1, "s3://b/a", 1), (None, 2, 1, "s3://b/a", 2), (1, 1, 1, "s3://b/a", 3))
    assert kept(latest(two_nulls, ["id"], "seq")) == [(1, "s3://b/a", 3), (None, "s3://b/a", 2)]

    composite = distinct.append_column("region", pa.array(["eu", "eu", "us"]))
    assert latest(composite, ["id", "region"], "seq").equals(composite)
    same_pair = rows((1, 1, 1, "s3://b/a", 1), (1, 2, 1, "s3://b/a", 2)).append_column(
        "region", pa.array(["eu"] * 2)
    )
    assert kept(latest(same_pair, ["id", "region"], "seq")) == [(1, "s3://b/a", 2)]


def test_keys_increasing_in_runs_that_do_not_overlap_are_distinct_without_hashing_others_are_hashed():
    def distinct(*runs: list[object], typ: pa.DataType | None = None) -> bool:
        # Each run is a chunk.
        table = pa.table({"id": pa.chunked_array([list(run) for run in runs], typ or pa.int64())})
        return keys_distinct(table, ["id"])

    assert distinct([1, 2, 5, 9]) and distinct([10, 11], [1, 2], [5]) and distinct([], [7], []) and distinct()
    assert distinct([3, 1, 2]) and distinct([1, 5], [3, 4])  # unordered or overlapping: hashed
    assert not distinct([1, 2, 2, 3]) and not distinct([1, 2], [3, 1]) and not distinct([5], [5])
    assert not distinct([1, 3], [2, 3])
    assert distinct(["b", "c"], ["a", "ab"], typ=pa.string())
    assert not distinct(["a", "b"], ["b"], typ=pa.string())
    assert distinct([None, 1], [2]) and not distinct([1, None], [2, None])
    nanoseconds = pa.timestamp("ns")
    assert distinct([1, 2], [3, 5], typ=nanoseconds) and not distinct([1, 2], [2, 5], typ=nanoseconds)
    rng = random.Random(20261125)
    for _ in range(500):
        runs = [sorted(rng.sample(range(40), rng.randint(0, 6))) for _ in range(rng.randint(0, 4))]
        keys = [k for run in runs for k in run]
        assert distinct(*runs) == (len(set(keys)) == len(keys)), runs


def test_a_double_ordering_field_orders_as_spark_does_nan_above_every_number_and_null_last():
    nan = float("nan")
    table = rows(
        (1, 5.0, 1, "s3://b/a", 1),
        (1, nan, 1, "s3://b/a", 2),  # NaN wins over every number
        (1, None, 9, "s3://b/a", 3),
        (2, -0.0, 1, "s3://b/a", 4),
        (2, 0.0, 1, "s3://b/a", 5),  # equal to -0.0: the later line wins
        (2, None, 9, "s3://b/z", 1),
        (3, None, 1, "s3://b/a", 6),
        (3, -1.5, 1, "s3://b/a", 7),
    )
    assert kept(latest(table, ["id"], "seq")) == [(1, "s3://b/a", 2), (2, "s3://b/a", 5), (3, "s3://b/a", 7)]
