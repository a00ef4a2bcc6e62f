"""Step 2 of a pass: which listed objects does the metadata table not know? An Arrow join.

The table side is two Arrow columns (the `event_id`s of created events in the listed buckets and their
event times), read once per pass; the listing side is compared a chunk at a time. Neither side becomes
Python objects per row of the table, so the diff of 200k listed objects against a large table stays
within memory.

The rule capture follows decides what "known" means: the same content (identity) uploaded again within
the dedupe window is the same upload; uploaded again after it, it is a new one (capture's duplicate check
reads only the window). So a listed object counts as known only when the table holds its identity with an
event time no more than `window` before the object's LastModified.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc

EMPTY_IDS = pa.table(
    {"event_id": pa.array([], pa.string()), "event_time": pa.array([], pa.timestamp("us", tz="UTC"))}
)


def unknown_positions(
    event_ids: Sequence[str],
    known_ids: pa.Table,
    *,
    listed_at: Sequence[datetime] | None = None,
    window: timedelta | None = None,
) -> set[int]:
    """The positions in `event_ids` of the ids that `known_ids` (columns `event_id`, `event_time`) lacks;
    with `listed_at` (each object's LastModified) and `window`, also those whose known events are all
    more than `window` older than the listed object: uploaded again after the window."""
    if not event_ids:
        return set()
    if known_ids.num_rows == 0:
        return set(range(len(event_ids)))
    if listed_at is not None and window is not None:
        return _unknown_or_uploaded_again(event_ids, known_ids, listed_at, window)
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


def _unknown_or_uploaded_again(
    event_ids: Sequence[str], known_ids: pa.Table, listed_at: Sequence[datetime], window: timedelta
) -> set[int]:
    since = pa.array([moment - window for moment in listed_at], pa.timestamp("us", tz="UTC"))
    listed = pa.table(
        {
            "event_id": pa.array(event_ids, pa.string()),
            "position": pa.array(range(len(event_ids)), pa.int64()),
            "since": since,
        }
    )
    known = known_ids.select(["event_id", "event_time"])
    known = known.set_column(1, "event_time", known.column("event_time").cast(pa.timestamp("us", tz="UTC")))
    matched = listed.join(known, keys="event_id", join_type="inner", use_threads=False)
    recent = matched.filter(pc.greater_equal(matched.column("event_time"), matched.column("since")))
    return set(range(len(event_ids))) - set(recent.column("position").to_pylist())
