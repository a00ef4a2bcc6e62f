"""CPU by process and peak memory, read from /proc (Linux; zeros elsewhere).

CPU seconds are less sensitive than wall time to other work on a shared machine, and splitting them by
process (this driver, the Spark JVM, Spark's Python workers, the local endpoint) says where a run's work
went. `cpu_by_process` counts every descendant of this one, reaped children included (cutime/cstime).
`Measure` follows each process on its own instead (its own utime/stime, sampled while the block runs): a
Spark Python worker whose daemon exits is re-parented outside this tree, and a total over the tree as it
stands at the end would lose it, which once made a split negative."""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import time
from collections.abc import Mapping

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
KINDS = ("driver", "jvm", "workers", "moto", "elasticmq", "gofakes3")


def _kind(command: bytes) -> str:
    program = command.split(b"\0", 1)[0]
    if b"java" in program:
        return "elasticmq" if b"elasticmq" in command else "jvm"
    if b"moto_server" in command:
        return "moto"
    if program.endswith(b"gofakes3"):
        return "gofakes3"
    if b"pyspark.daemon" in command or b"pyspark.worker" in command:
        return "workers"
    return "driver"


def _processes() -> tuple[dict[int, int], dict[int, float], dict[int, str]]:
    """(parent, CPU seconds, kind) of every process that can be read."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    kinds: dict[int, str] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read()
        except OSError:  # the process ended meanwhile
            continue
        pid = int(entry)
        parents[pid] = int(fields[1])
        cpu[pid] = sum(int(x) for x in fields[11:15]) / _TICKS  # utime stime cutime cstime
        kinds[pid] = _kind(command)
    return parents, cpu, kinds


def _descends_from(pid: int, ancestor: int, parents: Mapping[int, int]) -> bool:
    while pid > 1 and pid != ancestor:
        pid = parents.get(pid, 0)
    return pid == ancestor


def cpu_by_process() -> dict[str, float]:
    """CPU seconds (user + system) used so far by this process and its descendants, by kind: `driver`
    (this process and any other Python child), `jvm` (Spark's), `workers` (Spark's Python workers),
    `moto` (moto_server), `elasticmq`, `gofakes3`."""
    parents, cpu, kinds = _processes()
    me = os.getpid()
    totals = dict.fromkeys(KINDS, 0.0)
    for pid, seconds in cpu.items():
        if _descends_from(pid, me, parents):
            totals["driver" if pid == me else kinds[pid]] += seconds
    return totals


def tree_cpu(root: int) -> float:
    """CPU seconds (user + system) used so far by process `root` and its descendants (e.g. a service
    child with its Spark JVM and Python workers); 0 when it is gone."""
    parents, cpu, _ = _processes()
    return sum(seconds for pid, seconds in cpu.items() if _descends_from(pid, root, parents))


def descendant(kind: str) -> int | None:
    """The first descendant process of this one of `kind` (e.g. "jvm": the Spark JVM), or None."""
    parents, _, kinds = _processes()
    me = os.getpid()
    return next(
        (p for p, k in kinds.items() if k == kind and p != me and _descends_from(p, me, parents)), None
    )


class Measure:
    """Wall and CPU seconds of a block: `with Measure() as m: ...`, then `m.wall`, `m.cpu` (this process
    tree) and `m.split` (CPU by kind of process, as `cpu_by_process`).

    Each process is followed by pid from the first sample that sees it among this one's descendants,
    with its own CPU only (no cutime/cstime: a reaped child is not counted twice), every `every`
    seconds in a thread: a process that ends within the block loses at most its last interval, and no
    kind's figure can go below zero. A scan costs a few ms of this process (in `driver`: about 1%)."""

    wall: float
    cpu: float
    split: dict[str, float]

    def __init__(self, every: float = 0.25) -> None:
        self.every = every
        self._first: dict[int, float] = {}  # pid -> own CPU seconds when first seen (0 if born inside)
        self._last: dict[int, tuple[float, str]] = {}  # pid -> (own CPU seconds, kind) when last seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="cpu-sampler")

    def _sample(self, *, first: bool = False) -> None:
        parents, _, kinds = _processes()
        me = os.getpid()
        for pid in parents:
            if pid not in self._last and not _descends_from(pid, me, parents):
                continue
            own = own_cpu(pid)
            if own is None:  # ended since the scan
                continue
            if pid not in self._last:
                self._first[pid] = own if first else 0.0
            self._last[pid] = (own, "driver" if pid == me else kinds[pid])

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def __enter__(self) -> Measure:
        self._sample(first=True)
        self._started = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._started
        self._stop.set()
        self._thread.join()
        self._sample()
        self.split = dict.fromkeys(KINDS, 0.0)
        for pid, (own, kind) in self._last.items():
            self.split[kind] += own - self._first[pid]
        self.cpu = sum(self.split.values())


def own_cpu(pid: int) -> float | None:
    """utime + stime of `pid` alone, in seconds; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS


def rss_bytes(pid: int | str = "self", field_name: str = "VmRSS") -> int:
    """A memory figure of `/proc/<pid>/status` in bytes (VmRSS: resident now; VmHWM: the peak); 0 when
    the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def reset_peak() -> bool:
    """Reset this process's VmHWM to its current RSS (Linux >= 4.0); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def malloc_trim() -> None:
    """Give freed heap back to the system, so the next peak starts from what is really held."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class MemorySampler:
    """The resident memory of some processes (`{"driver": "self", "jvm": 1234}`), sampled every `every`
    seconds in a thread, with the sample times: `peak(name)` over the whole run, `peaks(start, end)`
    within a stretch of `time.perf_counter()`."""

    def __init__(self, pids: Mapping[str, int | str] | None = None, every: float = 0.05) -> None:
        self.pids = dict(pids or {"driver": "self"})
        self.every = every
        self.samples: list[tuple[float, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="memory-sampler")

    def sample(self) -> None:
        self.samples.append((time.perf_counter(), {n: rss_bytes(p) for n, p in self.pids.items()}))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def __enter__(self) -> MemorySampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def peak(self, name: str = "driver") -> int:
        return max((s[name] for _, s in self.samples), default=0)

    def peaks(self, start: float, end: float) -> dict[str, int]:
        inside = [s for t, s in self.samples if start <= t <= end]
        return {n: max((s[n] for s in inside), default=0) for n in self.pids}
