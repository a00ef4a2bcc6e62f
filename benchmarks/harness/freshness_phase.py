"""One phase of the freshness benchmark (a rate held for some seconds): PUT -> metadata and PUT -> target
latencies and their stages, and, for sustained rates, CPU by role, files per batch and the backlog over
time. Computed after the phase from when each object was PUT and became visible."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from benchmarks.harness.backlog import backlog_series, batch_sizes
from benchmarks.harness.stats import median, percentile
from benchmarks.harness.table_watch import TableWatch


@dataclass
class Phase:
    rate: float
    files: int
    meta: list[float]
    target: list[float]
    stages: dict[str, list[float]]
    load: tuple[float, float]  # 1-minute load average at the start and the end
    cores: dict[str, float] = field(default_factory=dict)  # CPU cores by role, first PUT -> all in target
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # the same stretch's CPU seconds by role
    batches: list[int] = field(default_factory=list)  # files per target commit
    backlog: list[tuple[float, int]] = field(default_factory=list)  # (s, files PUT and not yet in target)
    put_seconds: float = 0.0  # first PUT scheduled -> last PUT answered
    missing: int = 0  # files not in the target when the phase gave up waiting (it fell behind)


def measure(put: dict[str, float], meta: TableWatch, target: TableWatch, rate: float, load: Any) -> Phase:
    stages: dict[str, list[float]] = {
        "receive": [],
        "capture commit": [],
        "ingest wait": [],
        "ingest read+commit": [],
    }
    m_lat, t_lat = [], []
    for uri, put_done in put.items():
        m, t = meta.seen[uri], target.seen[uri]
        m_lat.append(m.visible - put_done)
        t_lat.append(t.visible - put_done)
        if m.stamp is not None and t.stamp is not None:
            stages["receive"].append(m.stamp - put_done)
            stages["capture commit"].append(m.visible - m.stamp)
            stages["ingest wait"].append(t.stamp - m.visible)
            stages["ingest read+commit"].append(t.visible - t.stamp)
    return Phase(rate, len(put), m_lat, t_lat, stages, load)


def sustained(phase: Phase, put: dict[str, float], target: TableWatch, started: float, every: float) -> None:
    """The phase's batch sizes and backlog over time (from `started`, epoch seconds, every `every` s)."""
    phase.batches = batch_sizes(target.seen[u].version for u in put if u in target.seen)
    visible = {u: target.seen[u].visible for u in put if u in target.seen}
    end = max(visible.values()) if len(visible) == len(put) else time.time()  # fell behind: until now
    phase.backlog = backlog_series(put, visible, start=started, end=end, every=every)
    phase.put_seconds = max(put.values()) - started


def sustained_text(phase: Phase) -> str:
    cores = ", ".join(f"{role} {c:.2f}" for role, c in phase.cores.items() if c)
    put_end = next((w for t, w in phase.backlog if t >= phase.put_seconds), 0)
    series = " ".join(str(w) for _, w in phase.backlog)
    every = phase.backlog[1][0] if len(phase.backlog) > 1 else 0
    return (
        f"  CPU cores: {cores}\n"
        f"  PUT rate held {phase.files / phase.put_seconds:.0f}/s; files per batch p50 "
        f"{percentile(phase.batches, 0.5):.0f}, max {max(phase.batches)} ({len(phase.batches)} batches); "
        f"backlog at the end of the PUTs {put_end}, max {max(w for _, w in phase.backlog)}\n"
        f"  backlog (files PUT, not yet in the target) every {every:g} s: "
        f"{series}"
    )


def sustained_figures(mine: list[Phase]) -> dict[str, Any]:
    """Figures of the phases of one rate (medians over rounds), the last round's backlog series."""
    if not mine[0].cores:
        return {}
    figures: dict[str, Any] = {
        f"{role}_cpu_cores": round(median(p.cores[role] for p in mine), 2) for role in mine[0].cores
    }
    figures |= {
        f"{role}_cpu_ms_per_file": round(median(1000 * p.cpu_seconds[role] / p.files for p in mine), 2)
        for role in mine[0].cpu_seconds
    }
    figures["put_rate_per_s"] = round(median(p.files / p.put_seconds for p in mine), 1)
    figures["files_per_batch_p50"] = median(percentile(p.batches, 0.5) for p in mine)
    figures["files_per_batch_max"] = max(max(p.batches) for p in mine)
    figures["backlog_max_files"] = max(max(w for _, w in p.backlog) for p in mine)
    figures["backlog_files"] = [w for _, w in mine[-1].backlog]
    figures["backlog_every_s"] = mine[-1].backlog[1][0] if len(mine[-1].backlog) > 1 else 0
    figures["files_missing"] = sum(p.missing for p in mine)
    return figures
