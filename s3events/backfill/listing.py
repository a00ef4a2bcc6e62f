"""Step 1 of a pass: list every source in parallel, page by page.

Each source is listed first one level deep (delimiter '/'): the objects directly under its prefix come
back at once and every first-level prefix becomes a listing task of its own, so one big prefix with many
sub-prefixes is listed by several threads. Pages travel through a bounded queue, so the listing never
runs more than a few pages ahead of the diff and memory stays flat however many objects there are.
"""

from __future__ import annotations

import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from s3events.backfill.model import ListedObject, Page, Source

DELIMITER = "/"


class Lister(Protocol):
    def pages(self, bucket: str, prefix: str = "", *, delimiter: str | None = None) -> Iterator[Page]: ...


@dataclass(frozen=True, slots=True)
class Listed:
    source: Source
    objects: list[ListedObject]
    source_done: bool = False  # the last (empty) item of a source: all of its listings have ended


@dataclass(frozen=True, slots=True)
class _Spawn:  # a worker found first-level prefixes to list on their own
    source: Source
    prefixes: list[str]


@dataclass(frozen=True, slots=True)
class _Done:  # a listing task ended (with its error, if any)
    source: Source
    error: BaseException | None


class _Closed(Exception):
    """The consumer went away; the worker stops quietly."""


def list_sources(
    lister: Lister, sources: Sequence[Source], *, workers: int, stop: Callable[[], bool] = lambda: False
) -> Iterator[Listed]:
    """Every object under `sources`, as pages tagged with their source, in no particular order; after
    a source's last page, an empty `Listed(source, [], source_done=True)`.

    A listing error ends the iteration with that error once the other workers have stopped. Stops early
    (without error) when `stop()` turns true; the caller checks `stop()` to tell.
    """
    inbox = _Inbox(max(4, workers * 2))
    task = partial(_list_pages, lister, inbox)

    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="backfill-list")
    pending: Counter[Source] = Counter()  # tasks submitted and not yet done; only this thread counts
    try:
        for source in sources:
            pool.submit(task, source, source.prefix, DELIMITER)
            pending[source] += 1
        while pending.total() and not stop():
            try:
                item = inbox.items.get(timeout=0.2)
            except queue.Empty:
                continue
            if isinstance(item, Listed):
                yield item
            elif isinstance(item, _Spawn):
                for prefix in item.prefixes:
                    pool.submit(task, item.source, prefix, None)
                    pending[item.source] += 1
            else:
                if item.error is not None:
                    raise item.error
                pending[item.source] -= 1
                if not pending[item.source]:
                    yield Listed(item.source, [], source_done=True)
    finally:
        inbox.closed.set()
        pool.shutdown(wait=True, cancel_futures=True)


class _Inbox:
    """What the listing threads hand the consumer; once it stops (`closed`), posting raises _Closed."""

    def __init__(self, size: int) -> None:
        self.items: queue.Queue[Listed | _Spawn | _Done] = queue.Queue(maxsize=size)
        self.closed = threading.Event()

    def post(self, item: Listed | _Spawn | _Done) -> None:
        while not self.closed.is_set():
            try:
                self.items.put(item, timeout=0.2)
                return
            except queue.Full:
                continue
        raise _Closed


def _list_pages(lister: Lister, inbox: _Inbox, source: Source, prefix: str, delimiter: str | None) -> None:
    """One listing thread: the pages under `prefix`, then `_Done` (with the error that ended it, if any)."""
    error: BaseException | None = None
    try:
        for page in lister.pages(source.bucket, prefix, delimiter=delimiter):
            if page.objects:
                inbox.post(Listed(source, page.objects))
            if page.prefixes:
                inbox.post(_Spawn(source, page.prefixes))
            if inbox.closed.is_set():
                return
    except _Closed:
        return
    except BaseException as exc:  # handed to the consumer, which raises it
        error = exc
    try:
        inbox.post(_Done(source, error))
    except _Closed:
        return
