"""Field names that differ only in case (`name` and `Name`): Spark resolves columns case-insensitively
and Delta readers refuse a table with two such columns, so a batch keeps one name per spelling-less-case
and every other spelling is refused line by line (the rule here; `formats/json_format.py` applies it).

The kept name is the table's column when it has one; else the spelling held by the most lines of the
batch, the first in code-point order on a tie, so it never depends on which path or task read a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def clashing_groups(names: Iterable[str]) -> list[tuple[str, ...]]:
    """The groups of two or more names equal but for case, each sorted, in the order of their first name."""
    groups: dict[str, set[str]] = {}
    for n in names:
        groups.setdefault(n.lower(), set()).add(n)
    return sorted((tuple(sorted(g)) for g in groups.values() if len(g) > 1), key=lambda g: g[0])


def aliases(batch: Iterable[str], table: Iterable[str], lines_holding: Mapping[str, int]) -> dict[str, str]:
    """Each refused spelling -> the kept column name, for the batch's field names against the table's
    columns; `lines_holding` counts the batch's lines holding each clashing name (absent: 0)."""
    table_names = {n.lower(): n for n in table}
    names = set(batch) | set(table_names.values())
    refused: dict[str, str] = {}
    for group in clashing_groups(names):
        kept = table_names.get(group[0].lower())
        if kept is None:
            kept = min(group, key=lambda n: (-lines_holding.get(n, 0), n))
        refused.update({n: kept for n in group if n != kept})
    return refused


def clash_message(refused: Mapping[str, str]) -> str:
    """How an error row names a batch's clashing names: each refused spelling and the kept column."""
    pairs = ", ".join(f"{n} (column {kept})" for n, kept in sorted(refused.items()))
    return f"field name differs only in case from a column: {pairs}"


def file_clash(names: Iterable[str], known: Iterable[str]) -> str | None:
    """Why a file whose columns are all or nothing (a CSV header's, a Parquet file's) is one error row:
    two of its names equal but for case, or one equal but for case to a `known` column; else None."""
    own = list(names)
    inner = clashing_groups(own)
    if inner:
        return "column names differ only in case: " + "; ".join(", ".join(g) for g in inner)
    table = {n.lower(): n for n in known}
    refused = {n: table[n.lower()] for n in own if table.get(n.lower(), n) != n}
    return clash_message(refused) if refused else None
