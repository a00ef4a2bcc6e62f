"""The metadata and quarantine tables' schemas, versions and identity buckets, and their rows built from
parsed records: what a writer of these tables (capture, backfill, migrate) and its readers share. Pure
pyarrow."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from s3events.events.record import EventRecord, QuarantineRecord

# 2: partitioned by `id_bucket` (new tables). 1: unpartitioned, written by s3events before the identity
# buckets; still served as it is (its duplicate check reads every row of the window), and rewritten into
# buckets by `s3events migrate` (metadata/migrate.py).
METADATA_SCHEMA_VERSION = 2
QUARANTINE_SCHEMA_VERSION = 1

# The metadata table's partition column: event_id's first byte (a SHA-256, so uniform) modulo 64, as two
# hex digits. A MERGE joining on it touches only the buckets of the batch's identities (delta-rs expands a
# partition column's join to the source's exact values, while a plain column only gets a min..max range,
# which random ids stretch over the whole table): a commit of n events reads at most n of the 64 buckets,
# so its cost follows the window's rows / 64, not the table's history. 64, not 256: delta-rs also pays per
# file in the snapshot, and 256 buckets of a few small files each hold three times the files for little
# gain (benchmarks/bucket_layout.py; the figures and reasoning are in docs/maintenance.md).
ID_BUCKET = "id_bucket"
ID_BUCKETS = 64
_BUCKET_NAMES = pa.array([f"{b % ID_BUCKETS:02x}" for b in range(256)])
_FIRST_BYTES = pa.array([f"{b:02x}" for b in range(256)])
# Compaction packs a bucket's files up to this size (or the configured target when smaller), not 128 MiB:
# delta-rs rewrites every file under its target with the new small ones, so a bucket compacted towards a
# large target would be rewritten whole, again and again, as the table grows; files that reached this
# size are left alone, and older ones drop out of the dedupe window by their `captured_at` statistics.
BUCKET_FILE_BYTES = 1 << 20

TIMESTAMP = pa.timestamp("us", tz="UTC")

METADATA_SCHEMA = pa.schema(
    [
        pa.field("event_id", pa.string(), nullable=False),
        pa.field("bucket", pa.string(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("size", pa.int64()),
        pa.field("etag", pa.string()),
        pa.field("version_id", pa.string()),
        pa.field("sequencer", pa.string()),
        pa.field("event_name", pa.string(), nullable=False),
        pa.field("event_kind", pa.string(), nullable=False),
        pa.field("event_time", TIMESTAMP, nullable=False),
        pa.field("event_source", pa.string(), nullable=False),
        pa.field("message_id", pa.string()),
        pa.field("captured_at", TIMESTAMP, nullable=False),
        pa.field(ID_BUCKET, pa.string()),  # nullable: `migrate` must be able to see rows left without one
    ]
)
METADATA_PARTITION_BY = [ID_BUCKET]

QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field("message_id", pa.string(), nullable=False),
        pa.field("receive_count", pa.int32(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("raw_body", pa.string(), nullable=False),
        pa.field("raw_body_bytes", pa.int64(), nullable=False),
        pa.field("truncated", pa.bool_(), nullable=False),
        pa.field("queue_url", pa.string(), nullable=False),
        pa.field("sent_at", TIMESTAMP),
        pa.field("quarantined_at", TIMESTAMP, nullable=False),
    ]
)


def id_bucket(event_id: str) -> str:
    return f"{int(event_id[:2], 16) % ID_BUCKETS:02x}"


def id_buckets(event_ids: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`id_bucket` of every id, in Arrow (a table rewritten by `s3events migrate` never leaves Arrow)."""
    first_byte = pc.utf8_slice_codeunits(event_ids.cast(pa.string()), 0, 2)
    return _BUCKET_NAMES.take(pc.index_in(first_byte, value_set=_FIRST_BYTES))


def is_bucketed(table: Any) -> bool:
    """Whether a metadata table has today's layout (partitioned by `id_bucket`) or the unpartitioned one
    of schema version 1."""
    return ID_BUCKET in partitions(table)


def partitions(table: Any) -> list[str]:
    return list(table.metadata().partition_columns)


# Metadata columns that are an `ObjectEvent` attribute of the same name.
_EVENT_COLUMNS = ("bucket", "key", "size", "etag", "version_id", "sequencer", "event_name", "event_time")


def metadata_batch(records: Sequence[EventRecord]) -> pa.Table:
    """The rows of `records`, built column by column (each event's id hashed once: capture's CPU per
    message counts this)."""
    events = [r.event for r in records]
    ids = pa.array([e.event_id for e in events], pa.string())
    columns: dict[str, Any] = {
        **{name: [getattr(e, name) for e in events] for name in _EVENT_COLUMNS},
        "event_id": ids,
        "event_kind": [e.kind for e in events],
        "event_source": [r.source for r in records],
        "message_id": [r.message_id for r in records],
        "captured_at": [r.captured_at for r in records],
        ID_BUCKET: id_buckets(ids),
    }
    return pa.Table.from_pydict(
        {name: columns[name] for name in METADATA_SCHEMA.names}, schema=METADATA_SCHEMA
    )


def quarantine_batch(records: Sequence[QuarantineRecord]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "message_id": q.message_id,
                "receive_count": q.receive_count,
                "reason": q.reason,
                "raw_body": q.raw_body,
                "raw_body_bytes": q.raw_body_bytes,
                "truncated": q.truncated,
                "queue_url": q.queue_url,
                "sent_at": q.sent_at,
                "quarantined_at": q.quarantined_at,
            }
            for q in records
        ],
        schema=QUARANTINE_SCHEMA,
    )
