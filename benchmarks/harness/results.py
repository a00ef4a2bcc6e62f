"""Results as data: every benchmark run appends JSON lines to `benchmarks/results/<benchmark>.jsonl`.

One line per case measured (a format and mode, a rate, a size), carrying what reproduces and qualifies
it: the command, the commit (and whether the tree had changes), the date, the machine and its load
average while the run went. `--smoke` runs write to `benchmarks/results/smoke/` (git-ignored): they check
that a benchmark still runs, at sizes whose figures mean nothing.

    run = Run.start("freshness", smoke=args.smoke)
    ...
    run.add("1 file/s", params={"rate": 1}, figures={"target_p50_s": 0.63, ...})
    run.save()
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine() -> dict[str, Any]:
    """The machine a run measured: cores, CPU model, memory, OS and the versions that matter."""
    model = ""
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    memory_gb = 0.0
    if os.path.exists("/proc/meminfo"):
        with open("/proc/meminfo") as f:
            memory_gb = round(int(f.readline().split()[1]) / 1024**2, 1)
    versions: dict[str, str] = {"python": platform.python_version()}
    for package in ("deltalake", "pyspark", "pyarrow", "moto"):
        try:
            from importlib.metadata import version

            versions[package] = version(package)
        except Exception:
            continue
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "memory_gb": memory_gb,
        "os": f"{platform.system()} {platform.release()}",
        "versions": versions,
    }


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


def load_text() -> str:
    """The load average as a benchmark prints it beside its figures."""
    one, five, fifteen = load_average() or [float("nan")] * 3
    return f"load average {one:.1f} {five:.1f} {fifteen:.1f} on {os.cpu_count()} cores"


def command_line(argv: list[str] | None = None) -> str:
    """This run as a `python -m benchmarks.<name> ...` command line."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).stem if argv else "?"
    return shlex.join(["python", "-m", f"benchmarks.{script}", *argv[1:]])


@dataclass
class Run:
    """One benchmark run: its provenance, and the cases it measured."""

    benchmark: str
    smoke: bool = False
    command: str = ""
    started: str = ""
    load_start: list[float] = field(default_factory=list)
    cases: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def start(cls, benchmark: str, *, smoke: bool = False) -> Run:
        return cls(
            benchmark,
            smoke=smoke,
            command=command_line(),
            started=datetime.now(UTC).isoformat(timespec="seconds"),
            load_start=load_average(),
        )

    def add(self, case: str, *, params: Mapping[str, Any], figures: Mapping[str, Any]) -> None:
        """One measured case: `params` say what was measured (sizes, rates, modes), `figures` the results
        (medians and ratios; names end in their unit: `_s`, `_ms`, `_mb`, `_x` for a ratio)."""
        self.cases.append({"case": case, "params": dict(params), "figures": dict(figures)})

    def records(self) -> Iterator[dict[str, Any]]:
        commit = _git("rev-parse", "--short=12", "HEAD")
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no", "--", "s3events"))
        common = {
            "benchmark": self.benchmark,
            "command": self.command,
            "commit": commit,
            "code_changed": dirty,
            "date": self.started,
            "machine": machine(),
            "load": {"start": self.load_start, "end": load_average()},
            "smoke": self.smoke,
        }
        for case in self.cases:
            yield {**common, **case}

    def save(self, directory: Path | None = None) -> Path:
        """Append this run's records to `<directory>/<benchmark>.jsonl` (smoke runs: `smoke/`)."""
        directory = directory or Path(os.environ.get("S3EVENTS_BENCH_RESULTS", RESULTS))
        if self.smoke:
            directory = directory / "smoke"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.benchmark}.jsonl"
        with path.open("a") as out:
            for record in self.records():
                out.write(json.dumps(record, sort_keys=True) + "\n")
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"results: {len(self.cases)} case(s) appended to {shown}")
        return path


def read(benchmark: str, directory: Path | None = None) -> list[dict[str, Any]]:
    """Every record of `benchmark` in `directory` (default benchmarks/results/), oldest first."""
    path = (directory or RESULTS) / f"{benchmark}.jsonl"
    if not path.exists():
        return []
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]
