"""Which of a merge target's data files a merge batch can touch, from the files' statistics.

delta-rs's MERGE holds the rows of every scanned target file it has seen no change in until its input
ends (its merge barrier), so a file scanned for nothing costs driver memory, not only time. Two answers
keep a batch's memory to the files its keys can be in: `holds_none_of` (nothing to merge at all: append)
and `key_ranges` (conditions on the target alone that delta-rs prunes its scan by).

Pure pyarrow and numpy: `files` is the snapshot's add actions as `DeltaTable.get_add_actions(flatten=True)`
gives them (`size_bytes`, `min.<column>`, `max.<column>`).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# The OR'd ranges of one key column. Each splits the batch's keys where target files lie between them;
# beyond this many, the splits that skip the fewest bytes are dropped (more files scanned, same rows).
MAX_KEY_RANGES = 32


def holds_none_of(files: pa.Table, rows: pa.Table, record_key: tuple[str, ...]) -> bool:
    """Whether the target's snapshot certainly holds no row with one of the batch's keys, by its files'
    statistics alone: it has no file, or every file's range of some integer key column misses the
    batch's range (new ids above the held ones: the first batch, an append-only source). String
    statistics may be truncated prefixes and floats hold NaN: such columns prove nothing here."""
    missed = pa.repeat(False, files.num_rows)
    for name, low, high in _integer_bounds(rows, record_key):
        if f"min.{name}" not in files.column_names:
            continue
        if not low.is_valid:  # every key null: a null key equals nothing
            return True
        lowest, highest = files.column(f"min.{name}"), files.column(f"max.{name}")
        outside = pc.or_(pc.less(highest, low.cast(highest.type)), pc.greater(lowest, high.cast(lowest.type)))
        missed = pc.or_(missed, pc.fill_null(outside, False))  # a file without statistics may hold it
    return bool(pc.all(missed).as_py()) if files.num_rows else True


def key_ranges(files: pa.Table, rows: pa.Table, record_key: tuple[str, ...]) -> list[str]:
    """Conditions on the target alone (alias `t`), one per integer or string key column: the batch's keys
    of that column as OR'd ranges that leave out every target file holding none of them, as far as
    `MAX_KEY_RANGES` allows. A target row outside them equals no batch key, so the rows matched are the
    same; delta-rs skips the files outside them. One range from the lowest key to the highest would still
    scan, and hold, every file between a batch's old and new ids. (delta-rs prunes by that one range
    itself with streamed_exec=False, but then it may build its join's hash table on the target's side:
    a target part smaller on disk than the batch in memory, many times its size in RAM.)"""
    conditions = []
    # Other key types have no literal we write (floats: NaN; times: zones): the whole target is scanned.
    for name, keys in _sorted_keys(rows, record_key):
        if not len(keys):  # every key null: they match nothing
            continue
        spans = " OR ".join(
            f"(t.`{name}` >= {_literal(low)} AND t.`{name}` <= {_literal(high)})"
            for low, high in _ranges(keys, files, name)
        )
        conditions.append(f"({spans})")
    return conditions


def sql_string(value: str) -> str:
    # Keys are untrusted input: a SQL string literal with quotes doubled, nothing else interpreted.
    return "'" + value.replace("'", "''") + "'"


def _ranges(keys: pa.Array, files: pa.Table, name: str) -> list[tuple[object, object]]:
    """`keys` (distinct, sorted, not null) split into at most `MAX_KEY_RANGES` runs: a split falls
    between two neighbouring keys wherever a file's whole range lies between them."""
    values = _comparable(keys)
    stats = _file_ranges(files, name, keys.type)
    if stats is None or values is None:
        return [(keys[0].as_py(), keys[-1].as_py())]
    lowest, highest, size = stats
    first = np.searchsorted(values, lowest, side="left")  # the first key at or above the file's min
    after = np.searchsorted(values, highest, side="right")  # the first key above its max
    # A file holding no key lies between keys[first - 1] and keys[first]; one below or above all keys is
    # outside the runs' ends anyway.
    skipped = (first == after) & (first > 0) & (first < len(values))
    weight = np.bincount(first[skipped], weights=size[skipped], minlength=len(values))
    splits = np.flatnonzero(weight)
    if len(splits) >= MAX_KEY_RANGES:
        splits = np.sort(splits[np.argsort(-weight[splits], kind="stable")[: MAX_KEY_RANGES - 1]])
    starts = [0, *splits.tolist()]
    ends = [*(s - 1 for s in splits.tolist()), len(values) - 1]
    return [(keys[s].as_py(), keys[e].as_py()) for s, e in zip(starts, ends, strict=True)]


def _file_ranges(
    files: pa.Table, name: str, kind: pa.DataType
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The min, max and size of the files with both statistics of column `name`, comparable with keys of
    type `kind`; None when no file has them (or they cannot be compared)."""
    if f"min.{name}" not in files.column_names or f"max.{name}" not in files.column_names:
        return None
    both = pc.and_(pc.is_valid(files.column(f"min.{name}")), pc.is_valid(files.column(f"max.{name}")))
    known = files.filter(both)
    if not known.num_rows:
        return None
    try:
        lowest = _comparable(known.column(f"min.{name}").cast(kind))
        highest = _comparable(known.column(f"max.{name}").cast(kind))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if lowest is None or highest is None:
        return None
    size = known.column("size_bytes").to_numpy().astype(np.float64) + 1  # a split skips at least a file
    return lowest, highest, size


def _comparable(values: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """`values` as a numpy array ordered as Delta's statistics are: integers as int64, strings as Python
    str (code point order is UTF-8 byte order); None for unsigned integers beyond int64."""
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        return np.asarray(values.to_pylist(), dtype=object)
    try:
        return values.cast(pa.int64()).to_numpy(zero_copy_only=False)
    except pa.ArrowInvalid:
        return None


def _sorted_keys(rows: pa.Table, record_key: tuple[str, ...]) -> Iterator[tuple[str, pa.Array]]:
    """Each integer or string key column's distinct non-null values, sorted."""
    for name in record_key:
        column = rows.column(name)
        if pa.types.is_integer(column.type) or pa.types.is_string(column.type):
            distinct = pc.drop_null(pc.unique(column))
            yield name, distinct.take(pc.sort_indices(distinct))


def _integer_bounds(
    rows: pa.Table, record_key: tuple[str, ...]
) -> Iterator[tuple[str, pa.Scalar, pa.Scalar]]:
    """The batch's min and max of each integer key column: null scalars when every key is null."""
    for name in record_key:
        column = rows.column(name)
        if pa.types.is_integer(column.type):
            bounds = pc.min_max(column)
            yield name, bounds["min"], bounds["max"]


def _literal(value: object) -> str:
    return sql_string(value) if isinstance(value, str) else str(int(value))  # type: ignore[call-overload]
