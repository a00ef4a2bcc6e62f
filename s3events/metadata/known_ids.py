"""The event ids the metadata table holds, in capture's memory: a commit whose ids are all new can then be
an append checked here instead of a MERGE that reads the dedupe window's rows back from storage.

An id is kept as its first 64 bits (a SHA-256 in hex, so uniform): 8 bytes per row of the window, and
about 70 per id of the open chunk (at most SEAL_IDS, an hour's). The set only routes a batch: an id it
may hold sends the batch through the MERGE, which decides exactly, so two ids sharing a prefix (odds
about rows x batch / 2^64) cost one MERGE, never an event. The direction that must hold is the other
one: every id the table holds among rows captured since `floor`, as of table `version`, is in the set.
Rows leave it in whole chunks once every row of a chunk is older than the window, so memory follows the
window's rows, not the table's history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_HEX_DIGITS = 16  # 64 bits
_INVALID = 255
_NIBBLE = np.full(256, _INVALID, dtype=np.uint8)
for _value, _digit in enumerate(b"0123456789abcdef"):
    _NIBBLE[_digit] = _value
    _NIBBLE[bytes([_digit]).upper()[0]] = _value

# The open chunk (a set: each commit adds to it and searches it, so neither may cost its size) is sealed
# (sorted, searched by bisection) at this many ids or this age; sealed chunks are what expires.
SEAL_IDS = 1 << 16
SEAL_AGE = timedelta(hours=1)


def prefixes(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The first 64 bits of each hex id, as unsigned integers. ValueError for an id that is not hex of at
    least 16 digits (ours always are: `ObjectEvent.event_id`)."""
    column = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    if column.null_count:
        raise ValueError("an event id is null")
    heads = pc.utf8_slice_codeunits(column.cast(pa.string()), 0, _HEX_DIGITS)
    if len(heads) and pc.min(pc.binary_length(heads)).as_py() != _HEX_DIGITS:
        raise ValueError(f"an event id is shorter than {_HEX_DIGITS} hex digits")
    fixed = heads.cast(pa.binary()).cast(pa.binary(_HEX_DIGITS))
    count = len(fixed)
    raw = np.frombuffer(
        fixed.buffers()[1], dtype=np.uint8, count=count * _HEX_DIGITS, offset=fixed.offset * _HEX_DIGITS
    ).reshape(count, _HEX_DIGITS)
    nibbles = _NIBBLE[raw]
    if (nibbles == _INVALID).any():
        raise ValueError("an event id is not hexadecimal")
    octets = (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]
    return np.ascontiguousarray(octets).view(">u8").ravel().astype(np.uint64)


@dataclass(slots=True)
class _Chunk:
    prefixes: np.ndarray  # sorted
    newest: datetime  # no row of it was captured later, by the clock of whoever added it


@dataclass
class KnownIds:
    """Every id of the rows captured since `floor` (None: all rows) that the table holds at `version`.

    `skew` is how far another writer's clock may run ahead of ours: a chunk leaves only when it is older
    than the window by that much too."""

    version: int
    floor: datetime | None
    skew: timedelta
    _sealed: list[_Chunk] = field(default_factory=list)
    _open: set[int] = field(default_factory=set)
    _open_since: datetime | None = None
    _open_newest: datetime | None = None

    def __len__(self) -> int:
        return sum(len(c.prefixes) for c in self._sealed) + len(self._open)

    def covers(self, since: datetime | None) -> bool:
        """Whether the set holds every id of rows captured since `since` (None: every row)."""
        if self.floor is None:
            return True
        return since is not None and since >= self.floor

    def may_hold_any(self, ids: pa.Array | pa.ChunkedArray) -> bool:
        wanted = prefixes(ids)
        if not len(wanted):
            return False
        for chunk in self._sealed:
            at = np.searchsorted(chunk.prefixes, wanted)
            found = chunk.prefixes[np.minimum(at, len(chunk.prefixes) - 1)] == wanted
            if found.any():
                return True
        return not self._open.isdisjoint(wanted.tolist())

    def add(self, ids: pa.Array | pa.ChunkedArray, *, version: int, now: datetime) -> None:
        """Ids the table holds from `version` on, captured at `now` at the latest."""
        new = prefixes(ids)
        if len(new):
            self._open.update(new.tolist())
            self._open_since = self._open_since or now
            self._open_newest = now if self._open_newest is None else max(self._open_newest, now)
            if len(self._open) >= SEAL_IDS or now - self._open_since >= SEAL_AGE:
                self._seal()
        self.version = version

    def _seal(self) -> None:
        assert self._open_newest is not None
        merged = np.sort(np.fromiter(self._open, dtype=np.uint64, count=len(self._open)))
        self._sealed.append(_Chunk(merged, self._open_newest))
        self._open, self._open_since, self._open_newest = set(), None, None

    def expire(self, *, now: datetime, window: timedelta) -> int:
        """Drop the sealed chunks whose every row is older than `window`; the ids dropped."""
        horizon = now - window - self.skew
        kept = [c for c in self._sealed if c.newest >= horizon]
        gone = [c for c in self._sealed if c.newest < horizon]
        if gone:
            newest_gone = max(c.newest for c in gone) + self.skew
            self.floor = newest_gone if self.floor is None else max(self.floor, newest_gone)
            self._sealed = kept
        return sum(len(c.prefixes) for c in gone)

    @classmethod
    def loaded(
        cls,
        ids: list[np.ndarray],
        *,
        version: int,
        floor: datetime | None,
        skew: timedelta,
        now: datetime,
    ) -> KnownIds:
        """The set read from the table at `version`: `ids` are the prefixes of its rows since `floor`."""
        known = cls(version=version, floor=floor, skew=skew)
        merged = np.unique(np.concatenate(ids)) if ids else np.empty(0, dtype=np.uint64)
        if len(merged):
            known._sealed.append(_Chunk(merged, now))
        return known
