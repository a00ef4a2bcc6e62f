"""One table of every column type we write, in three files whose rows sit at each type's edges (the
extremes of integers, NaN / ±inf / -0.0, decimals of 5 to 38 digits, strings past the statistics prefix
and above any 32-character bound, unicode, timestamps with and without a zone, nested values) and hold
nulls in every column somewhere."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa

from s3events.ingest.files.merge_input import MergeInput
from s3events.ingest.model import Checkpoint
from s3events.ingest.target_table import TargetTable

ALL_TYPES = pa.schema(
    [
        ("id", pa.int64()),
        ("i8", pa.int8()),
        ("i32", pa.int32()),
        ("f64", pa.float64()),
        ("f32", pa.float32()),
        ("d5", pa.decimal128(5, 2)),
        ("d15", pa.decimal128(15, 3)),
        ("d16", pa.decimal128(16, 0)),
        ("d24", pa.decimal128(24, 6)),
        ("d38", pa.decimal128(38, 10)),
        ("s", pa.string()),
        ("dt", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),
        ("b", pa.bool_()),
        ("bin", pa.binary()),
        (
            "st",
            pa.struct(
                [("x", pa.decimal128(24, 6)), ("y", pa.string()), ("z", pa.int64()), ("w", pa.float64())]
            ),
        ),
        ("m", pa.map_(pa.string(), pa.string())),
        ("arr", pa.list_(pa.int64())),
    ]
)
D = Decimal
LONG = "a" * 31 + "é" + "tail beyond the 32-character prefix"
HIGH = "\U0010ffff" * 33  # no string of 32 characters is above it: no max can be written
EMOJI = "m" * 30 + "🙂🙂" + "more"


def ts(day: int, micros: int) -> datetime:
    return datetime(2026, 3, day, 12, 0, 0, micros, tzinfo=UTC)


def ntz(day: int, micros: int) -> datetime:
    return datetime(2026, 4, day, 0, 0, 0, micros)


# Each file's rows: edges of every type, and nulls in every column somewhere.
ROWS: list[dict[str, list[Any]]] = [
    {
        "id": [1, 2, 3],
        "i8": [-128, 127, None],
        "i32": [2**31 - 1, None, -(2**31)],
        "f64": [-0.0, 0.0, None],
        "f32": [1.5, None, -2.25],
        "d5": [D("-999.99"), D("0.01"), None],
        "d15": [D("999999999999.999"), None, D("-0.001")],
        "d16": [D("9999999999999999"), D("-9999999999999999"), None],
        "d24": [D("-773456789012345678.000007"), None, D("783456789012345678.000008")],
        "d38": [D("69123456789012345678.0123456789"), D("-1E-10"), None],
        "s": [LONG, "", None],
        "dt": [date(2026, 1, 1), None, date(1970, 1, 1)],
        "ts": [ts(1, 1), ts(1, 999_999), None],
        "ntz": [None, ntz(2, 1500), ntz(2, 999_999)],
        "b": [True, None, True],
        "bin": [b"\x00", b"\xff" * 40, None],
        "st": [
            {"x": D("783456789012345678.000008"), "y": "p", "z": 1, "w": 0.5},
            None,
            {"x": None, "y": None, "z": None, "w": None},
        ],
        "m": [{"k": "v"}, None, {}],
        "arr": [[1, None], [], None],
    },
    {
        "id": [4, 5, 6],
        "i8": [0, 1, 2],
        "i32": [0, 1, 2],
        "f64": [float("nan"), 1.5, float("inf")],
        "f32": [float("-inf"), None, 3.0],
        "d5": [D("1.00"), D("2.50"), D("999.99")],
        "d15": [D("0.000"), D("1.001"), D("123456789012.345")],
        "d16": [D("1"), D("2"), D("3")],
        "d24": [D("1.000001"), D("2"), D("-999999999999999999.999999")],
        "d38": [D("9999999999999999999999999999.9999999999"), None, D("0")],
        "s": [EMOJI, HIGH, "zz"],
        "dt": [date(2026, 12, 31), date(2026, 6, 1), None],
        "ts": [ts(10, 123_456), ts(28, 999_001), ts(11, 0)],
        "ntz": [ntz(10, 0), ntz(12, 123_456), None],
        "b": [False, False, None],
        "bin": [None, None, None],
        "st": [None, {"x": D("1"), "y": "zz", "z": -5, "w": float("nan")}, None],
        "m": [None, {"a": None}, None],
        "arr": [None, [2**62], [None]],
    },
    {
        "id": [7, 8, 9],
        "i8": [None, None, None],
        "i32": [5, 6, 7],
        "f64": [-1e308, 1e308, 2.5e-308],
        "f32": [None, None, None],
        "d5": [None, None, None],
        "d15": [D("1.500"), D("1.500"), D("1.500")],
        "d16": [None, D("1234567890123456"), None],
        "d24": [None, None, None],
        "d38": [D("1"), D("2"), D("3")],
        "s": ["ÿ", "über", "𝄞 clef"],
        "dt": [None, None, None],
        "ts": [ts(20, 0), None, ts(20, 1)],
        "ntz": [ntz(20, 1), ntz(21, 0), ntz(20, 999)],
        "b": [None, None, None],
        "bin": [b"", b"x", b"y"],
        "st": [{"x": D("-5.5"), "y": "q", "z": 9, "w": -1.0}, None, None],
        "m": [{}, {}, {}],
        "arr": [[3], [4], [5]],
    },
]


def batches(rows: Sequence[dict[str, list[Any]]] = ROWS) -> list[pa.Table]:
    return [pa.table(r, schema=ALL_TYPES) for r in rows]


def merge(path: str, rows: pa.Table, version: int) -> None:
    """One merge-mode batch through the target's own commit (updates when the ids are held)."""
    table = TargetTable(path, "s3events.ingest/t", storage_options={})
    table.commit_merge(
        MergeInput.held(rows),
        record_key=("id",),
        ordering_field=None,
        partition_by=(),
        expected=None if version == 0 else Checkpoint(version - 1, 0),
        end=Checkpoint(version, 0),
    )
