"""Step 2 of a pass: which listed objects does the metadata table not know? An Arrow anti-join.

The table side is one Arrow column (the `event_id`s of created events in the listed buckets), read once
per pass; the listing side is compared a chunk at a time. Neither side becomes Python objects per row of
the table, so the diff of 200k listed objects against a large table stays within memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

EMPTY_IDS = pa.table({"event_id": pa.array([], pa.string())})


def unknown_positions(event_ids: Sequence[str], known_ids: pa.Table) -> set[int]:
    """The positions in `event_ids` of the ids that `known_ids` (a table with an `event_id` column) lacks."""
    if not event_ids:
        return set()
    if known_ids.num_rows == 0:
        return set(range(len(event_ids)))
    listed = pa.table(
        {
            "event_id": pa.array(event_ids, pa.string()),
            "position": pa.array(range(len(event_ids)), pa.int64()),
        }
    )
    # One thread: measured faster for chunks this size, and ~55 MiB lower peak memory per 200k known ids.
    absent = listed.join(
        known_ids.select(["event_id"]), keys="event_id", join_type="left anti", use_threads=False
    )
    return set(absent.column("position").to_pylist())
