"""A merge batch's conditions on the target: its keys as ranges that leave out the files holding none."""

from __future__ import annotations

import random
import re

import pyarrow as pa
import pytest

from s3events.ingest.merge_scope import MAX_KEY_RANGES, holds_none_of, key_ranges


def _files(
    ranges: list[tuple[object, object]], *, column: str = "id", sizes: list[int] | None = None
) -> pa.Table:
    """Add actions as `get_add_actions(flatten=True)` gives them, one file per (min, max)."""
    return pa.table(
        {
            "path": [f"part-{i}.parquet" for i in range(len(ranges))],
            "size_bytes": sizes or [1000] * len(ranges),
            f"min.{column}": [low for low, _ in ranges],
            f"max.{column}": [high for _, high in ranges],
        }
    )


def _spans(condition: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r">= (-?\d+) AND t.`id` <= (-?\d+)", condition)]


def _rows(ids: list[object], kind: pa.DataType | None = None) -> pa.Table:
    return pa.table({"id": pa.array(ids, kind or pa.int64()), "v": ["x"] * len(ids)})


def test_old_and_new_keys_leave_out_the_files_between_them() -> None:
    files = _files([(0, 99), (100, 199), (200, 299)])

    [condition] = key_ranges(files, _rows([5, 7, 300, 310]), ("id",))

    assert _spans(condition) == [(5, 7), (300, 310)]


def test_keys_in_every_file_are_one_range() -> None:
    files = _files([(0, 99), (100, 199), (200, 299)])

    [condition] = key_ranges(files, _rows([5, 150, 250]), ("id",))

    assert _spans(condition) == [(5, 250)]


def test_beyond_the_cap_the_splits_skipping_the_most_bytes_are_kept() -> None:
    # Keys 0, 10, 20, ...; a file between every two neighbours, the larger ones further up.
    count = MAX_KEY_RANGES + 10
    files = _files([(10 * i + 1, 10 * i + 9) for i in range(count)], sizes=list(range(1, count + 1)))

    [condition] = key_ranges(files, _rows([10 * i for i in range(count + 1)]), ("id",))

    spans = _spans(condition)
    assert len(spans) == MAX_KEY_RANGES
    assert spans[0] == (0, 10 * (count - MAX_KEY_RANGES + 1))  # the smallest files' splits are dropped
    assert spans[1:] == [(10 * i, 10 * i) for i in range(count - MAX_KEY_RANGES + 2, count + 1)]


def test_files_without_statistics_give_the_whole_range() -> None:
    files = pa.table(
        {"path": ["a"], "size_bytes": [10], "min.id": pa.array([None], pa.int64()), "max.id": [None]}
    )

    [condition] = key_ranges(files, _rows([1, 500]), ("id",))

    assert _spans(condition) == [(1, 500)]


def test_string_keys_are_quoted_literals() -> None:
    files = _files([("a", "b"), ("m", "n"), ("x", "z")])

    [condition] = key_ranges(files, _rows(["a'1", "b", "y"], pa.string()), ("id",))

    assert condition == "((t.`id` >= 'a''1' AND t.`id` <= 'b') OR (t.`id` >= 'y' AND t.`id` <= 'y'))"


def test_null_keys_match_nothing_and_other_types_bound_nothing() -> None:
    files = _files([(0, 9)])

    assert key_ranges(files, _rows([None, None]), ("id",)) == []
    assert key_ranges(files, pa.table({"id": [1.5, 2.5]}), ("id",)) == []


def test_only_integer_statistics_prove_a_batch_is_new() -> None:
    files = _files([(0, 99), (100, 199)])

    assert holds_none_of(files, _rows([200, 300]), ("id",))
    assert not holds_none_of(files, _rows([199, 300]), ("id",))
    assert holds_none_of(files.slice(0, 0), _rows([1]), ("id",))


@pytest.mark.parametrize("seed", range(20))
def test_random_targets_every_key_is_covered_and_only_files_with_keys_are_in_range(seed: int) -> None:
    rng = random.Random(seed)
    edges = sorted(rng.sample(range(10_000), 2 * rng.randint(1, 60)))
    ranges = list(zip(edges[::2], edges[1::2], strict=True))  # disjoint files
    keys = sorted(set(rng.sample(range(-100, 10_100), rng.randint(1, 300))))

    [condition] = key_ranges(_files(ranges), _rows(keys), ("id",))

    spans = _spans(condition)
    assert all(any(a <= k <= b for a, b in spans) for k in keys)
    overlapping = [(lo, hi) for lo, hi in ranges if any(a <= hi and lo <= b for a, b in spans)]
    holding = [(lo, hi) for lo, hi in ranges if any(lo <= k <= hi for k in keys)]
    if len(spans) < MAX_KEY_RANGES:
        assert overlapping == holding
    else:
        assert set(holding) <= set(overlapping)
