"""Plan one batch for one target, purely: a checkpoint and the metadata rows after it in, a `Batch` out.

No I/O here (STYLE.md item 7). The caller reads the metadata table's change data feed after the target's
checkpoint, calls `plan`, reads and writes the batch's files, and commits `batch.end` with the data.

Plan order is (commit_version, event_id): the same rows give the same order on every run, whatever order
they were read in, so a checkpoint's `position` ("the first n routed entries of the next version") means
the same thing after a restart.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from s3events.errors import CheckpointError
from s3events.ingest.model import Batch, Checkpoint, Deletion, FileRef, Limits, SnapshotRow

__all__ = [
    "Route",
    "append_step",
    "caught_up_to",
    "ensure_forward",
    "mirror_step",
    "plan",
    "plan_snapshot",
    "snapshot_read",
]


@dataclass(frozen=True, slots=True)
class Route:
    """Which objects go to one target (the `s3events.ingest.target.<name>.*` routing keys).

    An object matches when its bucket is `bucket` (None = any bucket), its key starts with `key_prefix`,
    starts with none of `ignore_prefixes`, contains none of `ignore_substrings`, and the whole key matches
    `glob` (None = any key). Keys are compared as decoded text, exactly (case-sensitive).

    Glob syntax (fnmatch-like, but path-aware as in `glob.glob`): `*` matches any run of characters except
    `/`; `**` matches any run including `/`, and `**/` also matches no directory at all (`**/*.json`
    matches `a.json` and `x/y/a.json`); `?` matches one character except `/`; `[abc]`, `[a-z]` match one
    listed character and `[!abc]` one unlisted character other than `/`; an unclosed `[` is literal.
    There is no escape character: every other character, `\\` included, matches itself, so write `[*]`
    for a literal `*`.
    """

    bucket: str | None = None
    key_prefix: str = ""
    ignore_prefixes: tuple[str, ...] = ()
    ignore_substrings: tuple[str, ...] = ()
    glob: str | None = None

    def matches(self, bucket: str, key: str) -> bool:
        return (
            (self.bucket is None or bucket == self.bucket)
            and key.startswith(self.key_prefix)
            and not key.startswith(self.ignore_prefixes)
            and not any(part in key for part in self.ignore_substrings)
            and (self.glob is None or _compile_glob(self.glob).fullmatch(key) is not None)
        )


def plan(
    checkpoint: Checkpoint,
    changes: Sequence[FileRef],
    *,
    route: Route,
    limits: Limits,
    mirror: bool = False,
    latest_version: int | None = None,
) -> Batch | None:
    """The next batch after `checkpoint`, or None when nothing routed is left to ingest.

    `changes` are metadata rows of versions after `checkpoint.version`, in any order (older rows are
    ignored). With `mirror` (on.object.removed=delete) removals are routed too, else created entries only.
    `latest_version` is the metadata version they were read up to (default: the highest
    `commit_version` among them); a batch that takes every remaining routed entry ends there.

    A batch takes routed entries in plan order while it holds fewer than `limits.max_files` entries and
    its created files' sizes (None counts 0) add up to at most `limits.max_bytes`; its first entry is
    taken whatever its size, so every batch makes progress.
    """
    pending = _pending(checkpoint, changes, route, mirror, latest_version)
    taken = _take(pending.entries, limits)
    if not taken:
        return None
    return _batch(taken, checkpoint, _checkpoint_after(checkpoint, pending, len(taken)))


def plan_snapshot(
    start: Checkpoint,
    rows: Iterable[SnapshotRow],
    *,
    route: Route,
    limits: Limits,
    mirror: bool = False,
) -> Batch | None:
    """The next batch of a target bootstrapping from the snapshot `start` stands in, or None when no
    routed row is left in it (the target then stands at `snapshot_read(start)`).

    `rows` are the snapshot's rows from `start`'s file and row on, in the snapshot's order (files sorted
    by path, rows in file order); they are consumed only as far as the batch needs, plus one routed row,
    so a caller may stream them. The batch takes routed rows as `plan` takes entries (the same limits; a
    removal only with `mirror`). Its end stands just before the first routed row it leaves, or, when it
    takes the last one, at the snapshot's version: the change feed follows from the version after it.
    """
    if not start.in_snapshot:
        raise ValueError(f"{start} is not inside a snapshot")
    taken: list[FileRef] = []
    size = 0
    end = snapshot_read(start)
    for row in rows:
        entry = row.entry
        if (row.file, row.row) < (start.snapshot_file, start.snapshot_row) or not (
            _routed(entry, mirror) and route.matches(entry.bucket, entry.key)
        ):
            continue
        size += _size(entry)
        if _full(len(taken), size, limits):
            end = Checkpoint(-1, 0, start.snapshot, row.file, row.row)
            break
        taken.append(entry)
    return _batch(taken, start, end) if taken else None


def snapshot_read(start: Checkpoint) -> Checkpoint:
    """Where a target stands once the snapshot `start` stands in is read: at the snapshot's version."""
    return Checkpoint(start.snapshot, 0)


def caught_up_to(
    checkpoint: Checkpoint,
    changes: Sequence[FileRef],
    *,
    route: Route,
    mirror: bool = False,
    latest_version: int | None = None,
) -> Checkpoint:
    """The furthest checkpoint a target can move to without ingesting anything.

    With nothing routed left in `changes`, that is `latest_version` (or the highest version seen);
    otherwise it stops just before the first routed entry not yet ingested. Never behind `checkpoint`.
    The caller keeps it in memory only, to avoid rescanning versions that hold nothing for the target.
    """
    pending = _pending(checkpoint, changes, route, mirror, latest_version)
    return max(checkpoint, _checkpoint_after(checkpoint, pending, 0))


def mirror_step(batch: Batch) -> tuple[tuple[FileRef, ...], tuple[Deletion, ...]]:
    """For a target that mirrors S3 (on.object.removed=delete): the files to read and the rows to delete.

    Per object, the batch's latest event (by event time; an upload wins a tie with a removal) says what
    S3 holds now. Rows from before it go: a removal removes the object, a later upload replaces its
    content. Only that latest upload is read, and none when the latest event is a removal. Deleting is
    idempotent, so it may run in its own commit ahead of the data commit and again on a replay.
    """
    latest: dict[str, FileRef] = {}
    for entry in (*batch.files, *batch.removals):
        held = latest.get(entry.uri)
        if held is None or _recency(entry) > _recency(held):
            latest[entry.uri] = entry
    read = tuple(f for f in batch.files if latest[f.uri] is f)
    deletions = tuple(Deletion(uri, entry.event_time) for uri, entry in latest.items())
    return read, deletions


def append_step(batch: Batch, held: Collection[tuple[str, str | None]]) -> tuple[FileRef, ...]:
    """For an appending target (on.object.removed=ignore): the files to read, each content once.

    A re-created entry (`FileRef.recreated`) is read only when neither the target (`held`: the (uri,
    etag) pairs it has rows of) nor an earlier file of this batch has its content: its first read may
    have failed (the object was overwritten before it was read), or not happened yet.
    """
    seen = set(held)
    files = []
    for f in batch.files:
        if f.recreated and (f.uri, f.etag) in seen:
            continue
        seen.add((f.uri, f.etag))
        files.append(f)
    return tuple(files)


def ensure_forward(stored: Checkpoint, proposed: Checkpoint) -> None:
    """Raise `CheckpointError` if committing `proposed` would move a target back from `stored`."""
    if proposed < stored:
        raise CheckpointError(
            f"checkpoint would move backwards from version {stored.version} position {stored.position} "
            f"to version {proposed.version} position {proposed.position}; refusing"
        )


# ------------------------------------------------------------------------------------------- internals


@dataclass(frozen=True, slots=True)
class _Pending:
    entries: tuple[FileRef, ...]  # routed entries not yet ingested, in plan order
    skipped: int  # routed entries of version start.version + 1 already ingested (<= start.position)
    horizon: int  # the last metadata version the changes cover


def _plan_order(entry: FileRef) -> tuple[int, str, str, str, str, str, str]:
    # (commit_version, event_id) is the plan order; the rest only breaks ties between rows that share an
    # event id, so even such rows come out in one order whatever order they were read in.
    return (
        entry.commit_version,
        entry.event_id,
        entry.bucket,
        entry.key,
        entry.event_kind,
        entry.version_id or "",
        entry.etag or "",
    )


def _recency(entry: FileRef) -> tuple[object, ...]:
    return (entry.event_time, entry.event_kind == "created", entry.event_id)


def _routed(entry: FileRef, mirror: bool) -> bool:
    return mirror or entry.event_kind == "created"


def _pending(
    start: Checkpoint,
    changes: Sequence[FileRef],
    route: Route,
    mirror: bool,
    latest_version: int | None,
) -> _Pending:
    routed = sorted(
        (
            entry
            for entry in changes
            if entry.commit_version > start.version
            and _routed(entry, mirror)
            and route.matches(entry.bucket, entry.key)
        ),
        key=_plan_order,
    )
    in_next_version = sum(1 for entry in routed if entry.commit_version == start.version + 1)
    skipped = min(start.position, in_next_version)
    seen = [entry.commit_version for entry in changes]
    horizon = max(
        start.version,
        latest_version if latest_version is not None else max(seen, default=start.version),
        routed[-1].commit_version if routed else start.version,
    )
    return _Pending(entries=tuple(routed[skipped:]), skipped=skipped, horizon=horizon)


def _take(entries: Sequence[FileRef], limits: Limits) -> Sequence[FileRef]:
    count, size = 0, 0
    for entry in entries:
        size += _size(entry)
        if _full(count, size, limits):
            break
        count += 1
    return entries[:count]


def _size(entry: FileRef) -> int:
    """What an entry adds to a batch's bytes: a created file's size (None counts 0), a removal nothing."""
    return (entry.size or 0) if entry.event_kind == "created" else 0


def _full(count: int, size: int, limits: Limits) -> bool:
    """Whether a batch of `count` entries can take no entry that brings its bytes to `size` (its first
    entry is taken whatever its size, so every batch makes progress)."""
    return count > 0 and (count >= limits.max_files or size > limits.max_bytes)


def _batch(taken: Sequence[FileRef], start: Checkpoint, end: Checkpoint) -> Batch:
    return Batch(
        files=tuple(entry for entry in taken if entry.event_kind == "created"),
        removals=tuple(entry for entry in taken if entry.event_kind == "removed"),
        start=start,
        end=end,
    )


def _checkpoint_after(start: Checkpoint, pending: _Pending, taken: int) -> Checkpoint:
    """The checkpoint once the first `taken` pending entries are ingested."""
    if taken == len(pending.entries):
        return Checkpoint(pending.horizon, 0)
    # Stand just before the version W of the next entry, with as many of W's entries done as are.
    version = pending.entries[taken].commit_version
    done = sum(1 for entry in pending.entries[:taken] if entry.commit_version == version)
    if version == start.version + 1:
        done += pending.skipped
    return Checkpoint(version - 1, done)


@lru_cache(maxsize=256)
def _compile_glob(pattern: str) -> re.Pattern[str]:
    """Translate a glob (syntax in `Route`) into a regex for `fullmatch` on a whole key."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            stars = i
            while i < n and pattern[i] == "*":
                i += 1
            if i - stars == 1:
                out.append("[^/]*")
            elif i < n and pattern[i] == "/":
                out.append("(?:.*/)?")
                i += 1
            else:
                out.append(".*")
            continue
        if char == "?":
            out.append("[^/]")
        elif char == "[" and (end := _class_end(pattern, i)) is not None:
            out.append(_class(pattern[i + 1 : end]))
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _class_end(pattern: str, start: int) -> int | None:
    """Index of the `]` closing the class opened at `start`, or None when it is not closed."""
    j = start + 1
    if j < len(pattern) and pattern[j] == "!":
        j += 1
    if j < len(pattern) and pattern[j] == "]":  # a leading ']' is a member, as in fnmatch
        j += 1
    end = pattern.find("]", j)
    return None if end < 0 else end


def _class(body: str) -> str:
    negated = body.startswith("!")
    if negated:
        body = body[1:]
    members: list[str] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            low, high = body[k], body[k + 2]
            if low <= high:  # an empty range like z-a matches nothing, as in fnmatch
                members.append(f"{re.escape(low)}-{re.escape(high)}")
            k += 3
        else:
            members.append(re.escape(body[k]))
            k += 1
    if negated:
        return "[^/" + "".join(members) + "]"
    return "[" + "".join(members) + "]" if members else "(?!)"
