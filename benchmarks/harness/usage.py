"""CPU by role over a stretch of a benchmark: each service child with its descendants (a Spark JVM and
its Python workers belong to the ingest child), the endpoint servers by kind, and this process."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

from benchmarks.harness.procs import cpu_by_process, tree_cpu

SERVERS = ("moto", "gofakes3", "elasticmq")


def snapshot(children: Mapping[str, int]) -> dict[str, float]:
    """CPU seconds so far: each of `children` (role -> pid) with its descendants, each server kind, and
    `benchmark` (this process alone: PUTs and notifications)."""
    by_kind = cpu_by_process()
    taken = dict(zip(("user", "system"), os.times()[:2], strict=True))
    used = {role: tree_cpu(pid) for role, pid in children.items()}
    used |= {kind: by_kind[kind] for kind in SERVERS}
    used["benchmark"] = taken["user"] + taken["system"]
    return used


@dataclass
class Usage:
    """`with Usage({"capture": pid, ...}) as u: ...`, then `u.cores()`: CPU cores used by each role over
    the block (CPU seconds / wall seconds)."""

    children: Mapping[str, int]

    def __enter__(self) -> Usage:
        self._before, self._started = snapshot(self.children), time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.monotonic() - self._started
        after = snapshot(self.children)
        self.seconds = {role: after[role] - self._before[role] for role in after}

    def cores(self) -> dict[str, float]:
        return {role: round(s / self.wall, 2) if self.wall else 0.0 for role, s in self.seconds.items()}
