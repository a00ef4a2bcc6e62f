"""Keeping each target's catalog entry in step with its Delta table, after ingest's commits.

1. start: read every target's entry; one at another location stops the process (exit 3) before any
   commit, and is left as it is.
2. after a cycle: for each target that committed (or whose last sync failed), compare its table's shape
   with the entry last read or written; create or update the entry only when they differ.
3. a failure is logged and counted, never raised: the data commit stands, and the next cycle retries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from s3events.catalog.model import CatalogTarget, Entry, TableState, action_for, behind, elsewhere
from s3events.catalog.ports import Catalog
from s3events.errors import FatalError

log = logging.getLogger(__name__)


class CatalogEntryElsewhere(FatalError):
    """The catalog holds the target's table name for another location: not ours to change."""


class SyncObserver(Protocol):
    def declare(self, targets: Iterable[str]) -> None: ...

    def registered(self, target: str, action: str) -> None: ...

    def failed(self, target: str) -> None: ...

    def behind(self, target: str, versions: int) -> None: ...


def elsewhere_message(catalog: Catalog, database: str, target: CatalogTarget, found: Entry) -> str:
    return (
        f"target {target.name}: {catalog.description} table {database}.{target.table} is at "
        f"{found.shape.location}, not at the target's location {target.location}; s3events leaves it "
        f"alone: drop or rename that entry, or set s3events.ingest.target.{target.name}.catalog.table"
    )


class CatalogSync:
    def __init__(
        self,
        catalog: Catalog,
        database: str,
        targets: Sequence[CatalogTarget],
        *,
        state_of: Callable[[str], TableState | None],
        observer: SyncObserver | None = None,
    ) -> None:
        self.catalog = catalog
        self.database = database
        self._targets = {t.name: t for t in targets}
        self._state_of = state_of
        self._observer = observer
        self._entries: dict[str, Entry | None] = {}  # target -> its entry as last read or written
        self._pending: set[str] = set()  # targets to compare at the next sync
        self.failures = 0
        self.behind: dict[str, int] = {}  # target -> Delta versions its entry lags (failed syncs only)

    def start(self) -> None:
        """Step 1. Raises CatalogEntryElsewhere; any other failure is retried by the first sync."""
        if self._observer is not None:
            self._observer.declare(self._targets)
        for target in self._targets.values():
            self._pending.add(target.name)  # an existing table is compared at the first sync
            try:
                found = self.catalog.get_entry(self.database, target.table)
            except Exception as exc:
                self._failed(target, exc, None)
                continue
            if found is not None and elsewhere(found, target):
                raise CatalogEntryElsewhere(elsewhere_message(self.catalog, self.database, target, found))
            self._entries[target.name] = found

    def after_cycle(self, committed: Iterable[str]) -> None:
        """Steps 2 and 3, for the targets that committed in the cycle and those still pending."""
        wanted = self._pending | set(committed)
        for name in [n for n in self._targets if n in wanted]:
            self._sync(self._targets[name])

    def _sync(self, target: CatalogTarget) -> None:
        state: TableState | None = None
        try:
            state = self._state_of(target.name)
            if state is None:  # no commit yet: the first one creates the entry
                self._pending.discard(target.name)
                return
            if target.name not in self._entries:  # after a failure: what is there now
                found = self.catalog.get_entry(self.database, target.table)
                if found is not None and elsewhere(found, target):
                    raise CatalogEntryElsewhere(elsewhere_message(self.catalog, self.database, target, found))
                self._entries[target.name] = found
            entry = self._entries[target.name]
            action = action_for(entry.shape if entry is not None else None, state.shape)
            if action == "create":
                self.catalog.create_entry(self.database, target.table, state)
            elif action == "update":
                self.catalog.update_entry(self.database, target.table, state)
        except Exception as exc:
            self._failed(target, exc, state)
            return
        self._pending.discard(target.name)
        self.behind.pop(target.name, None)
        if self._observer is not None:
            self._observer.behind(target.name, 0)
        if action is None:
            return
        self._entries[target.name] = Entry(state.shape, state.version)
        log.info(
            "target %s: %s %s.%s in %s (table version %d)",
            target.name,
            "registered" if action == "create" else "updated",
            self.database,
            target.table,
            self.catalog.description,
            state.version,
        )
        if self._observer is not None:
            self._observer.registered(target.name, action)

    def _failed(self, target: CatalogTarget, exc: Exception, state: TableState | None) -> None:
        self.failures += 1
        self._pending.add(target.name)
        entry = self._entries.pop(target.name, None)  # read again next time: it may have changed
        lag = behind(entry, state)
        if lag is not None:
            self.behind[target.name] = lag
        log.warning(
            "target %s: catalog table %s.%s not synced (retried next cycle): %s",
            target.name,
            self.database,
            target.table,
            f"{type(exc).__name__}: {exc}",
        )
        if self._observer is not None:
            self._observer.failed(target.name)
            if lag is not None:
                self._observer.behind(target.name, lag)
