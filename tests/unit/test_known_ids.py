"""The in-memory set of held event ids that lets capture append new events without a MERGE."""

import hashlib
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest

from s3events.metadata.known_ids import SEAL_IDS, KnownIds, prefixes

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
SKEW = timedelta(days=1)
WINDOW = timedelta(days=15)


def ids(*seeds: object) -> pa.Array:
    return pa.array([hashlib.sha256(str(s).encode()).hexdigest() for s in seeds])


def test_a_prefix_is_the_ids_first_64_bits():
    one = ids("a")
    assert prefixes(one).tolist() == [int(one[0].as_py()[:16], 16)]
    assert prefixes(pa.chunked_array([ids("a"), ids("b")])).tolist() == prefixes(ids("a", "b")).tolist()
    assert prefixes(pa.array(["ABCDEF0123456789" + "0" * 48])).tolist() == [0xABCDEF0123456789]


@pytest.mark.parametrize("bad", ["not-hex-at-all-but-long-enough", "abc", "zz" * 32])
def test_an_id_that_is_not_a_long_hex_string_is_refused_not_misread(bad):
    with pytest.raises(ValueError):
        prefixes(pa.array([bad]))


def test_ids_loaded_or_added_are_found_and_others_are_not():
    known = KnownIds.loaded([prefixes(ids(*range(100)))], version=3, floor=NOW - WINDOW, skew=SKEW, now=NOW)
    known.add(ids("x", "y"), version=4, now=NOW)

    assert known.version == 4 and len(known) == 102
    assert known.may_hold_any(ids(500, 7)) and known.may_hold_any(ids(600, "y"))
    assert not known.may_hold_any(ids(*range(100, 1000)))
    assert not known.may_hold_any(pa.array([], pa.string()))


def test_the_open_chunk_is_sealed_by_size_and_stays_searchable():
    known = KnownIds(version=0, floor=None, skew=SKEW)
    many = ids(*range(SEAL_IDS + 10))
    known.add(many, version=1, now=NOW)
    known.add(ids("late"), version=2, now=NOW)

    assert known.may_hold_any(many.slice(SEAL_IDS - 3, 1)) and known.may_hold_any(ids("late"))
    assert not known.may_hold_any(ids("never"))


def test_a_chunk_leaves_only_when_every_row_is_older_than_the_window_and_the_skew():
    start = NOW - WINDOW - SKEW - timedelta(hours=2)
    known = KnownIds.loaded([prefixes(ids("old"))], version=1, floor=start - WINDOW, skew=SKEW, now=start)
    later = start + timedelta(hours=3)  # an hour past the horizon below
    known.add(ids("recent"), version=2, now=later)
    known.add(ids("sealer"), version=3, now=later + timedelta(hours=1, seconds=1))  # the open chunk seals

    assert known.expire(now=NOW, window=WINDOW) == 1

    assert not known.may_hold_any(ids("old")) and known.may_hold_any(ids("recent"))
    # Complete only for rows captured after the dropped chunk's newest row (plus the skew) now:
    assert known.floor == start + SKEW
    assert known.covers(NOW - WINDOW) and not known.covers(start)
    assert known.expire(now=NOW, window=WINDOW) == 0


def test_a_set_of_the_whole_table_covers_every_window_and_a_windowed_one_not_the_whole_table():
    whole = KnownIds(version=0, floor=None, skew=SKEW)
    windowed = KnownIds(version=0, floor=NOW - WINDOW, skew=SKEW)
    assert whole.covers(None) and whole.covers(NOW)
    assert not windowed.covers(None) and not windowed.covers(NOW - WINDOW - timedelta(seconds=1))
    assert windowed.covers(NOW - WINDOW)


def test_a_prefix_shared_by_two_ids_reads_as_held():
    held = "0123456789abcdef" + "1" * 48
    twin = "0123456789abcdef" + "2" * 48
    known = KnownIds.loaded([prefixes(pa.array([held]))], version=0, floor=None, skew=SKEW, now=NOW)
    assert known.may_hold_any(pa.array([twin]))  # the MERGE then decides exactly
    assert np.uint64(0x0123456789ABCDEF) in prefixes(pa.array([twin]))
