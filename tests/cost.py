"""What a test costs, for making the suite cheaper: a pytest plugin that records, per test, the CPU
seconds of this process's tree (the pytest process, its Spark JVM and Python workers, the `s3events`
children it waits for: utime+stime+cutime+cstime from /proc) and the wall time, of the call alone
(`"call"`: fixtures excluded, so the session's Spark start is not the first test's) and of the whole
protocol (`"test"`). On a loaded machine the CPU seconds compare before and after a change; the wall
time does not.

    S3EVENTS_TEST_COST=/tmp/cost.jsonl .venv/bin/python -m pytest -q -p no:xdist -p tests.cost tests/...

One JSON line per test and phase is appended to the file `S3EVENTS_TEST_COST` names (default
`.pytest_cache/test-cost.jsonl`). A process that ends unwaited by the tree (the JVM the session stops
at the end, a Python worker its daemon forked) takes its CPU seconds out of the sum: the last test's
`"test"` line misses the JVM's, and a call can show a second less, even below zero; compare medians.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds of `root` and every process under it, children it has waited for included."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        cpu[pid] = sum(int(f) for f in fields[11:15]) / _TICKS
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total


def _record(phase: str, item: pytest.Item, cpu: float, wall: float) -> None:
    line = {
        phase: item.nodeid,
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "load": os.getloadavg()[0],
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "-"),  # with `ended`: each worker's timeline
        "ended": round(time.time(), 2),
    }
    with open(os.environ.get("S3EVENTS_TEST_COST", ".pytest_cache/test-cost.jsonl"), "a") as out:
        out.write(json.dumps(line) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    cpu, wall = tree_cpu_seconds(os.getpid()), time.monotonic()
    yield
    _record("test", item, tree_cpu_seconds(os.getpid()) - cpu, time.monotonic() - wall)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    cpu, wall = tree_cpu_seconds(os.getpid()), time.monotonic()
    yield
    _record("call", item, tree_cpu_seconds(os.getpid()) - cpu, time.monotonic() - wall)
