"""Backfill's small pure pieces: sources, the time window, options, and the pass's report."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from s3events.events.model import ObjectEvent

APP_ID = "s3events.backfill"
"""The Delta app transaction (in the metadata table) holding the last completed pass, in epoch seconds."""

EVENT_NAME = "ObjectCreated:Put"
"""What a backfilled event is called. A listing cannot tell a Put from a Copy or a multipart upload, and
event_name is not part of an event's identity; `event_source = "backfill"` marks the row as synthetic."""


@dataclass(frozen=True, slots=True)
class ListedObject:
    bucket: str
    key: str
    size: int
    etag: str  # without surrounding quotes
    last_modified: datetime  # timezone-aware, UTC
    version_id: str | None  # the latest version's id on versioned buckets, else None


@dataclass(frozen=True, slots=True)
class Page:
    objects: list[ListedObject]
    prefixes: list[str]  # common prefixes; only a listing with a delimiter has any


@dataclass(frozen=True, slots=True, order=True)
class Source:
    """A place to list: `s3://bucket` or `s3://bucket/prefix` (the prefix is a plain string prefix)."""

    bucket: str
    prefix: str = ""

    @classmethod
    def parse(cls, uri: str) -> Source:
        """A `s3://` URI as a Source; ValueError otherwise (validate the text with the config types)."""
        if not uri.startswith("s3://"):
            raise ValueError(f"{uri!r} is not an s3:// URI")
        bucket, _, prefix = uri[len("s3://") :].partition("/")
        if not bucket:
            raise ValueError(f"{uri!r} names no bucket")
        return cls(bucket, prefix)

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def covers(self, other: Source) -> bool:
        return self.bucket == other.bucket and other.prefix.startswith(self.prefix)


def distinct_sources(sources: list[Source]) -> list[Source]:
    """The sources without repeats and without those another source already covers (s3://b covers
    s3://b/data), so no object is listed twice."""
    kept: list[Source] = []
    for source in sorted(set(sources), key=lambda s: (s.bucket, len(s.prefix), s.prefix)):
        if not any(k.covers(source) for k in kept):
            kept.append(source)
    return kept


def parse_time(text: str) -> datetime:
    """An ISO 8601 time as an aware UTC datetime; a time without an offset is UTC. ValueError if bad."""
    value = text.strip()
    if value.endswith(("z", "Z")):
        value = value[:-1] + "+00:00"
    parsed = datetime.fromisoformat(value)  # ValueError for anything else
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """Objects whose LastModified is in [since, until); None = unbounded on that side."""

    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise ValueError(f"{name} must be timezone-aware")
        if self.since is not None and self.until is not None and self.until <= self.since:
            raise ValueError(
                f"until ({self.until.isoformat()}) must be after since ({self.since.isoformat()})"
            )

    @property
    def unbounded(self) -> bool:
        return self.since is None and self.until is None

    def contains(self, moment: datetime) -> bool:
        return (self.since is None or moment >= self.since) and (self.until is None or moment < self.until)


@dataclass(frozen=True, slots=True)
class BackfillOptions:
    window: TimeWindow = field(default_factory=TimeWindow)
    dry_run: bool = False
    workers: int = 8  # listing threads, across sources and their first-level prefixes
    page_size: int = 1000  # keys per list call (the S3 maximum)
    diff_chunk: int = 10_000  # listed objects compared with the table at a time
    commit_chunk: int = 10_000  # events per metadata commit
    sample_size: int = 20  # keys a dry run shows


def backfill_event(obj: ListedObject) -> ObjectEvent:
    """The created event capture would have recorded for this object: the same identity (bucket, key,
    version id else etag), event_time = LastModified, no sequencer."""
    return ObjectEvent(
        bucket=obj.bucket,
        key=obj.key,
        event_name=EVENT_NAME,
        event_time=obj.last_modified,
        size=obj.size,
        etag=obj.etag or None,
        version_id=obj.version_id,
        sequencer=None,
    )


@dataclass(slots=True)
class SourceCounts:
    listed: int = 0
    outside_window: int = 0
    already_known: int = 0
    new: int = 0  # not in the table when compared (a concurrent writer may still win the race)
    elapsed_seconds: float | None = None  # from the start of the pass until its listing ended

    def line(self, new_label: str) -> str:
        listed_in = "" if self.elapsed_seconds is None else f" listed_in={self.elapsed_seconds:.2f}s"
        return (
            f"listed={self.listed} outside_window={self.outside_window} "
            f"already_known={self.already_known} {new_label}={self.new}{listed_in}"
        )


@dataclass(slots=True)
class BackfillReport:
    """What one pass did. `injected` counts rows actually written; `raced` the new objects another writer
    (capture) committed between the comparison and our commit."""

    sources: dict[str, SourceCounts] = field(default_factory=dict)
    injected: int = 0
    raced: int = 0
    dry_run: bool = False
    sample: list[str] = field(default_factory=list)  # s3:// URIs of the first new objects (dry run)
    table_version: int | None = None
    completed_at: int | None = None  # epoch seconds recorded in the table; None: not recorded
    interrupted: bool = False
    elapsed_seconds: float = 0.0

    @property
    def listed(self) -> int:
        return sum(c.listed for c in self.sources.values())

    @property
    def outside_window(self) -> int:
        return sum(c.outside_window for c in self.sources.values())

    @property
    def new(self) -> int:
        return sum(c.new for c in self.sources.values())

    @property
    def already_known(self) -> int:
        return sum(c.already_known for c in self.sources.values()) + self.raced

    def log_line(self) -> str:
        head = "backfill (dry run, nothing written)" if self.dry_run else "backfill"
        written = f"would_inject={self.new}" if self.dry_run else f"injected={self.injected}"
        raced = f" raced={self.raced}" if self.raced else ""
        stopped = " interrupted=true" if self.interrupted else ""
        return (
            f"{head}: listed={self.listed} outside_window={self.outside_window} "
            f"already_known={self.already_known} {written}{raced} table_version={self.table_version}"
            f"{stopped} elapsed={self.elapsed_seconds:.2f}s"
        )

    def summary_lines(self) -> list[str]:
        """The command's printed summary: totals, then one line per source, then (dry run) sample keys."""
        label = "would_inject" if self.dry_run else "new"
        lines = [self.log_line()]
        lines.extend(f"  {uri}: {counts.line(label)}" for uri, counts in self.sources.items())
        if self.dry_run and self.sample:
            lines.append(f"would inject (first {len(self.sample)} of {self.new}):")
            lines.extend(f"  {uri}" for uri in self.sample)
        return lines
