"""The CSV fast path's typing of a column of strings (csv_types) gives what Spark's inference and from_csv
give, or declines: checked against a plain per-value model of those rules on columns of tricky values."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import unicodedata

import pyarrow as pa
import pytest

from s3events.ingest.files.formats import csv_types
from s3events.ingest.files.formats.csv_types import convert, infer

TRICKY = [
    *["0", "1", "007", "+5", "-0", "-12", "2147483647", "2147483648", "-2147483648", "-2147483649"],
    *["9223372036854775807", "9223372036854775808", "123456789012345678901"],
    *["1.5", ".5", "5.", "-.5", "+1.25", "0.000", "1e5", "1E-3", ".", "+", "-", "1.2.3"],
    *["12345678901234567.5", "1234567890123456.5", "NaN", "Infinity", "-Inf", "0x10", "1d", "1f"],
    *["true", "FALSE", "TrUe", "yes", "abc", "x1", " 1", "1 ", "\t2", "2026-01-01", "T12", "t1", "١٢"],
    *["inf", "nanny", "-x", "Ttrue", "", None],
    *["+.5", "-5.", "1.e5", ".5e3", "nan", "INF", "infinity", "00.5", "+0", "1_0", "1,5", "1e400", "TRUE"],
    # plain strings told in Python before any regex, and the characters where that cannot be told
    *["  ", "\x01x", "\x00+1", "Ärger", "\u212a", "İnf", "ǹan", "Nancy", "T١", " true", "true "],
]
NUMBERS = ["1.5", ".5", "+.5", "00.5", "-0", "+0", "-12", "007", "1" + "0" * 400, "2147483648"]
STRINGS = ["abc", "hello world", "x1", "Ttrue"]  # plainly strings to Spark's inference


def _maybe_typed(v: str) -> bool:
    rest = v.lstrip("".join(map(chr, range(0x21))))
    nd = [unicodedata.category(c) == "Nd" for c in rest[:2]]
    return bool(
        rest[:1] in ("+", ".", "-")
        or nd[:1] == [True]
        or (rest[:1] in ("T", "t") and nd[1:2] == [True])
        or rest[:3].lower() in ("nan", "inf")
        or rest.lower() in ("true", "false")
    )


def _integer(v: str) -> bool:
    return re.fullmatch(r"[+-]?[0-9]+", v) is not None


def _number(v: str) -> bool:
    return _integer(v) or re.fullmatch(r"[+-]?[0-9]*\.[0-9]+", v) is not None


def _double(v: str) -> bool:
    return re.fullmatch(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", v) is not None


def _boolean(v: str) -> bool:
    return v.lower() in ("true", "false")


def spark_infers(values: list[str | None]) -> tuple[pa.DataType, list[object]] | None:
    """The model: Spark's CSV inference as far as the fast path takes it (None: declined)."""
    present = [v for v in values if v is not None]
    if not present:
        return pa.null(), list(values)
    if not all(map(_maybe_typed, present)):
        return pa.string(), list(values)
    if all(map(_integer, present)):
        ints = [int(v) for v in present]
        if min(ints) < -(2**63) or max(ints) >= 2**63:
            return None  # a decimal to Spark
        small = min(ints) >= -(2**31) and max(ints) < 2**31
        return (pa.int32() if small else pa.int64()), [None if v is None else int(v) for v in values]
    if all(map(_number, present)):
        if any(len(v) > 18 for v in present):
            return None
        return pa.float64(), [None if v is None else float(v) for v in values]
    if all(map(_boolean, present)):
        return pa.bool_(), [None if v is None else v.lower() == "true" for v in values]
    return None


def from_csv(values: list[str | None], to: pa.DataType) -> list[object] | None:
    """The model of from_csv's conversion as far as the fast path takes it (None: declined)."""
    present = [v for v in values if v is not None]
    if to == pa.string():
        return list(values)
    if to == pa.bool_():
        return (
            [None if v is None else v.lower() == "true" for v in values]
            if all(map(_boolean, present))
            else None
        )
    if to == pa.float64():
        return [None if v is None else float(v) for v in values] if all(map(_double, present)) else None
    if not all(map(_integer, present)):
        return None
    bits = to.bit_width
    if any(not -(2 ** (bits - 1)) <= int(v) < 2 ** (bits - 1) for v in present):
        return None
    return [None if v is None else int(v) for v in values]


def _column(values: list[str | None]) -> pa.ChunkedArray:
    """As the CSV reader gives it: chunks of a block each, an empty field null."""
    cells = [None if v in ("", None) else v for v in values]
    cut = len(cells) // 2
    return pa.chunked_array([pa.array(cells[:cut], pa.string()), pa.array(cells[cut:], pa.string())])


def _columns(seed: int) -> list[list[str | None]]:
    rng = random.Random(seed)
    out = []
    for _ in range(400):
        kind = rng.choice(
            [
                TRICKY,
                TRICKY[:10],
                TRICKY[10:25],
                TRICKY[:13] + TRICKY[13:19],
                ["true", "False", None],
                NUMBERS,
                NUMBERS + TRICKY[-13:],
            ]
        )
        column = [rng.choice(kind) for _ in range(rng.choice([1, 3, 40, 90]))]
        if rng.random() < 0.2:  # a plain string somewhere, also past the values probed first
            column[rng.randrange(len(column))] = rng.choice(STRINGS)
        out.append(column)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_inference_gives_sparks_type_and_values_or_declines(seed: int) -> None:
    for values in _columns(seed):
        cells = [None if v == "" else v for v in values]
        expected, got = spark_infers(cells), infer(_column(values))
        if expected is None:
            assert isinstance(got, str), values
            continue
        assert not isinstance(got, str), (values, got)
        assert (got[0], got[1].to_pylist()) == expected, values


@pytest.mark.parametrize("to", [pa.int8(), pa.int32(), pa.int64(), pa.float64(), pa.bool_(), pa.string()])
def test_a_columns_fixed_type_converts_as_from_csv_or_declines(to: pa.DataType) -> None:
    for values in _columns(7):
        cells = [None if v == "" else v for v in values]
        got = convert(_column(values), to)
        assert (None if got is None else got.to_pylist()) == from_csv(cells, to), values


def test_one_plain_string_past_the_probed_values_makes_a_string_column() -> None:
    values = ["1"] * 100 + ["abc"]
    assert infer(_column(values))[0] == pa.string()  # type: ignore[index]


def test_typed_looking_values_spark_reads_otherwise_are_declined() -> None:
    for values in (["2026-01-01"], ["1", "1e5"], ["NaN"], ["5."], ["true", "1"], ["falſe"], ["0x10"]):
        assert isinstance(infer(_column(values)), str), values


def test_a_column_sliced_past_its_first_values_is_typed_by_its_own_values() -> None:
    """As the fields past the header: the values left out hold bytes (a '.', an 'e', a '+', letters)
    that must not count."""
    for head, rest, expected in (
        ("1.5e3", ["1", "2"], (pa.int32(), [1, 2])),
        ("+x", ["1.5", "2"], (pa.float64(), [1.5, 2.0])),
        ("abc", ["true", "False"], (pa.bool_(), [True, False])),
    ):
        for large in (False, True):
            t = pa.large_string() if large else pa.string()
            column = pa.chunked_array([pa.array([head, *rest], t)]).slice(1)
            got = infer(column)
            assert not isinstance(got, str) and (got[0], got[1].to_pylist()) == expected, (head, large)


def test_signed_and_padded_numbers() -> None:
    assert infer(_column(["+1", "-2", None])) == (pa.int32(), pa.chunked_array([[1], [-2, None]], pa.int32()))
    assert infer(_column(["+1", "-.5"]))[0] == pa.float64()  # type: ignore[index]
    assert convert(_column(["+1.5e3", "2."]), pa.float64()).to_pylist() == [1500.0, 2.0]  # type: ignore[union-attr]
    assert convert(_column([" 1"]), pa.int32()) is None  # from_csv keeps the space: malformed


def test_the_typing_module_is_pure() -> None:
    probe = f"import sys, {csv_types.__name__}; print(' '.join({{m.split('.')[0] for m in sys.modules}}))"
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", probe], check=True, capture_output=True, text=True
        ).stdout.split()
    )
    assert not loaded & {"boto3", "botocore", "deltalake", "pyspark"}
